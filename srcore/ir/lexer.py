"""Tokens of IR text, scanned on demand (the parser sometimes rescans raw text).

Token kinds: ``NL`` (end of line), ``COMMENT`` (``# ...`` up to the end of the
line, text without ``#``), ``VALUE`` (``%name``, text without ``%``), ``IDENT``
(names, may contain ``::`` and ``.``), ``INT``, ``FLOAT``, ``STRING`` (text is
the unescaped string), ``ARROW`` (``->``), ``ELLIPSIS`` (``...``), ``EOF``,
punctuation (kind is the character itself), and ``BAD`` for any other character
(the parser reports it).
"""
from __future__ import annotations

import bisect
import re

import attrs

from .._repr import shared_repr
from ..errors import GraphParseError


@attrs.frozen
@shared_repr
class Token:
    kind: str
    text: str
    pos: int
    end: int


_SPACE = re.compile(r"[ \t\r\f\v]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.)[A-Za-z_0-9][A-Za-z0-9_]*)*")
_VALUE = re.compile(r"%([A-Za-z0-9_][A-Za-z0-9_.]*)")
_NUMBER = re.compile(r"-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+(?:[eE][-+]?\d+)?|\d+)")
_SPECIAL_FLOAT = re.compile(r"-?(?:inf|nan)(?![A-Za-z0-9_.])")
_PUNCT = set("()[]{},:=?*<>")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"',
            "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


class Lexer:
    """Scans ``text`` from ``pos``; ``peek``/``next`` with one token of lookahead."""

    def __init__(self, text: str, filename: str | None = None):
        self.text = text
        self.filename = filename
        self.pos = 0
        self._peeked: Token | None = None
        self._starts: list[int] | None = None

    # -- positions ------------------------------------------------------------------
    @property
    def _line_starts(self) -> list[int]:
        """Where each line starts (only positions reported need them: not computed for a parse that has none)."""
        if self._starts is None:
            starts, i = [0], self.text.find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = self.text.find("\n", i + 1)
            self._starts = starts
        return self._starts

    def line_col(self, pos: int) -> tuple[int, int]:
        i = bisect.bisect_right(self._line_starts, pos) - 1
        return i + 1, pos - self._line_starts[i] + 1

    def line_text(self, line: int) -> str:
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    def error(self, message: str, tok: Token | int | None = None) -> GraphParseError:
        if tok is None:
            tok = self.peek()
        pos = tok if isinstance(tok, int) else tok.pos
        line, col = self.line_col(min(pos, len(self.text)))
        token = None
        if isinstance(tok, Token):
            token = "end of input" if tok.kind == "EOF" else ("newline" if tok.kind == "NL" else
                                                               self.text[tok.pos:tok.end])
        return GraphParseError(message, line=line, column=col, token=token, filename=self.filename,
                               source_line=self.line_text(line))

    # -- scanning -------------------------------------------------------------------
    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> Token:
        tok = self.peek()
        self._peeked = None
        self.pos = tok.end
        return tok

    def seek(self, pos: int) -> None:
        """Continue scanning from ``pos`` (drops the lookahead)."""
        self._peeked = None
        self.pos = pos

    def raw_pos(self) -> int:
        """Position just after the last consumed token, before any whitespace."""
        return self.pos

    def _scan(self) -> Token:
        text, pos = self.text, self.pos
        m = _SPACE.match(text, pos)
        if m:
            pos = m.end()
        if pos >= len(text):
            return Token("EOF", "", pos, pos)
        c = text[pos]
        if c == "\n":
            return Token("NL", "\n", pos, pos + 1)
        if c == "#":
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            return Token("COMMENT", text[pos + 1:end].strip(), pos, end)
        if c == "%":
            m = _VALUE.match(text, pos)
            if not m:
                return Token("BAD", c, pos, pos + 1)
            return Token("VALUE", m.group(1), pos, m.end())
        if c == '"' or c == "'":
            return self._string(pos, c)
        if text.startswith("->", pos):
            return Token("ARROW", "->", pos, pos + 2)
        if text.startswith("...", pos):
            return Token("ELLIPSIS", "...", pos, pos + 3)
        m = _SPECIAL_FLOAT.match(text, pos)
        if m:
            return Token("FLOAT", m.group(0), pos, m.end())
        m = _NUMBER.match(text, pos)
        if m and not (m.group(0) == "-" or m.group(0) == "."):
            s = m.group(0)
            kind = "FLOAT" if any(ch in s for ch in ".eE") else "INT"
            return Token(kind, s, pos, m.end())
        m = _IDENT.match(text, pos)
        if m:
            return Token("IDENT", m.group(0), pos, m.end())
        if c in _PUNCT:
            return Token(c, c, pos, pos + 1)
        return Token("BAD", c, pos, pos + 1)

    def _string(self, pos: int, quote: str) -> Token:
        text = self.text
        out = []
        i = pos + 1
        while i < len(text):
            c = text[i]
            if c == quote:
                return Token("STRING", "".join(out), pos, i + 1)
            if c == "\n":
                break
            if c == "\\":
                if i + 1 >= len(text):
                    break
                e = text[i + 1]
                if e in _ESCAPES:
                    out.append(_ESCAPES[e])
                    i += 2
                    continue
                if e == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2:i + 4]):
                    out.append(chr(int(text[i + 2:i + 4], 16)))
                    i += 4
                    continue
                raise self.error(f"unknown escape sequence \\{e} in string", i)
            out.append(c)
            i += 1
        raise self.error("unterminated string", pos)

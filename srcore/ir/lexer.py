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

from .._re_cache import compile as _compile_cached
from .._repr import shared_repr
from ..errors import GraphParseError


@attrs.define   # not frozen: a frozen init sets each field through object.__setattr__ (a token costs ~2x); none is changed
@shared_repr
class Token:
    kind: str
    text: str
    pos: int
    end: int


# One pattern for every token, its alternatives in the order the kinds are tried (Python's alternation takes
# the first that matches): one match a token instead of up to five (digits' 442 tokens: 9.2 -> 6.6 M instructions;
# its compilation costs ~1 M more than the five patterns'), served compiled from srcore._re_cache after the first start.
_TOKEN = _compile_cached(r"[ \t\r\f\v]*(?:"   # (not re.VERBOSE: parsing it was ~0.5 M instructions more)
                    r"(?P<NL>\n)"
                    r"|#(?P<COMMENT>[^\n]*)"
                    r"|%(?P<VALUE>[A-Za-z0-9_][A-Za-z0-9_.]*)"
                    r"|(?P<QUOTE>[\"'])"
                    r"|(?P<ARROW>->)"
                    r"|(?P<ELLIPSIS>\.\.\.)"
                    r"|(?P<SPECIAL>-?(?:inf|nan))(?![A-Za-z0-9_.])"
                    r"|(?P<NUMBER>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+(?:[eE][-+]?\d+)?|\d+))"
                    r"|(?P<IDENT>[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.)[A-Za-z_0-9][A-Za-z0-9_]*)*)"
                    r"|(?P<PUNCT>[()\[\]{},:=?*<>])"
                    r"|(?P<EOF>\Z)"
                    r"|(?P<BAD>.))")
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
        m = _TOKEN.match(self.text, self.pos)
        kind = m.lastgroup
        end = m.end()
        if kind == "IDENT":
            return Token("IDENT", m.group(kind), m.start(kind), end)
        if kind == "VALUE":   # text without the %
            return Token("VALUE", m.group(kind), m.start(kind) - 1, end)
        if kind == "PUNCT":
            c = m.group(kind)
            return Token(c, c, end - 1, end)
        if kind == "NL":
            return Token("NL", "\n", end - 1, end)
        if kind == "NUMBER":
            t = m.group(kind)
            return Token("FLOAT" if "." in t or "e" in t or "E" in t else "INT", t, m.start(kind), end)
        if kind == "COMMENT":   # text without the #, stripped
            return Token("COMMENT", m.group(kind).strip(), m.start(kind) - 1, end)
        if kind == "QUOTE":
            return self._string(end - 1, m.group(kind))
        if kind == "SPECIAL":
            return Token("FLOAT", m.group(kind), m.start(kind), m.end(kind))
        if kind == "EOF":
            return Token("EOF", "", end, end)
        return Token(kind, m.group(kind), m.start(kind), end)   # ARROW, ELLIPSIS, BAD (any other character)

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

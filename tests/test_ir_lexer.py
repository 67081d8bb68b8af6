"""The IR lexer's one-pattern scanner gives the tokens (kind, text, position, end) of the scanner it replaced: one
pattern per token kind tried in turn (kept here as the reference), on the golden graphs, the example models' graphs
and random text."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from srcore.ir.lexer import Lexer, Token

#: the lexer's tokens, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[1]

_SPACE = re.compile(r"[ \t\r\f\v]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.)[A-Za-z_0-9][A-Za-z0-9_]*)*")
_VALUE = re.compile(r"%([A-Za-z0-9_][A-Za-z0-9_.]*)")
_NUMBER = re.compile(r"-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+(?:[eE][-+]?\d+)?|\d+)")
_SPECIAL_FLOAT = re.compile(r"-?(?:inf|nan)(?![A-Za-z0-9_.])")
_PUNCT = set("()[]{},:=?*<>")


def _reference_scan(lx: Lexer) -> Token:
    """The scanner before srcore 0.1's one-pattern lexer (2026-11-29), verbatim but for ``self``."""
    text, pos = lx.text, lx.pos
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
        return lx._string(pos, c)
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


def _tokens(text: str, scan) -> list:
    """Every token from each position a token can start at (a token's end), and the error a string raises."""
    lx, out = Lexer(text), []
    while True:
        try:
            tok = scan(lx)
        except Exception as exc:  # noqa: BLE001 - an unterminated string: both must raise the same
            out.append((type(exc).__name__, str(exc)))
            return out
        out.append(tok)
        if tok.kind == "EOF":
            return out
        lx.pos = tok.end if tok.end > lx.pos else lx.pos + 1


def _same(text: str) -> None:
    assert _tokens(text, Lexer._scan) == _tokens(text, _reference_scan)


def test_every_example_graph_scans_as_before():
    texts = [p.read_text() for p in (ROOT / "tests" / "golden").rglob("*.ir")]
    from srcore.format.safetensors_io import Container

    texts += [Container(p).metadata["graph"] for p in (ROOT / "examples").rglob("*.srm")]
    assert texts
    for text in texts:
        _same(text)


ALPHABET = list("%#\"'\\-+.eE0123456789xinfa_:()[]{},:=?*<>!@ \t\r\f\v\n") + ["inf", "nan", "->", "...", "::",
                                                                               "aten::add", "%x.1", "1e5", "\\x4"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join))
def test_random_text_scans_as_before(text):
    _same(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_any_text_scans_as_before(text):
    _same(text)

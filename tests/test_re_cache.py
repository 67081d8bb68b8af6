"""``srcore._re_cache.compile`` gives the pattern ``re.compile`` gives (equal: flags and SRE code), from its file
after the first start; a damaged file or entry is compiled as usual; nothing is written under
PYTHONDONTWRITEBYTECODE."""
from __future__ import annotations

import marshal
import re
import sys

import pytest
from hypothesis import given, settings, strategies as st

from srcore import _re_cache
from srcore.ir import lexer

#: compiled patterns and their file, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

PATTERNS = [(lexer._TOKEN.pattern, 0), (r"(?P<a>x+)|(?P<b>y)\Z", 0), (r"[a-z]+\d*", re.IGNORECASE), (r"^a.b$", re.M | re.S),
            (r"(\w+)@(\w+)\.com", 0)]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SRCORE_NO_RE_CACHE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(_re_cache, "_entries", None)
    return tmp_path


def _fresh(monkeypatch):
    monkeypatch.setattr(_re_cache, "_entries", None)   # what a new process sees: the file only


@pytest.mark.parametrize("pattern,flags", PATTERNS)
def test_a_second_start_builds_the_pattern_re_compiles(cache, monkeypatch, pattern, flags):
    first = _re_cache.compile(pattern, flags)
    assert first == re.compile(pattern, flags)
    _fresh(monkeypatch)
    calls = []
    monkeypatch.setattr(re, "compile", lambda *a: calls.append(a) or pytest.fail("compiled again"))
    second = _re_cache.compile(pattern, flags)
    monkeypatch.undo()
    assert not calls and type(second) is re.Pattern
    assert second == re.compile(pattern, flags)
    assert (second.pattern, second.flags, second.groups, second.groupindex) == (pattern, re.compile(pattern, flags).flags,
                                                                                 re.compile(pattern, flags).groups,
                                                                                 re.compile(pattern, flags).groupindex)


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet="%abc_:.019 ->#\n\"'()[]{},=?*<>-inf", max_size=60))
def test_the_cached_lexer_pattern_matches_as_re_does(text):
    fresh = re.compile(lexer._TOKEN.pattern)
    for pos in range(len(text) + 1):
        a, b = lexer._TOKEN.match(text, pos), fresh.match(text, pos)
        assert (a and (a.span(), a.lastgroup, a.groups())) == (b and (b.span(), b.lastgroup, b.groups()))


def test_a_damaged_file_or_entry_is_compiled_as_usual(cache, monkeypatch):
    pattern = r"(?P<n>\d+)-(\w)"
    _re_cache.compile(pattern)
    (path,) = (cache / "re").glob("*.marshal")
    path.write_bytes(b"\x00garbage")
    _fresh(monkeypatch)
    assert _re_cache.compile(pattern) == re.compile(pattern)
    entries = marshal.loads(path.read_bytes())   # rewritten
    entries[(pattern, 0)] = (0, [999999], 0, {}, ())   # code _sre refuses
    path.write_bytes(marshal.dumps(entries))
    _fresh(monkeypatch)
    assert _re_cache.compile(pattern) == re.compile(pattern)


def test_nothing_is_written_without_bytecode(cache, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert _re_cache.compile(r"ab+c") == re.compile(r"ab+c")
    assert not (cache / "re").exists()

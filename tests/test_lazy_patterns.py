"""What replaced regexes compiled at import (a cold start's cost): the lazily compiled patterns, the entry
point value split and attrs' hash-literal search, each against the regex it stands for."""
from __future__ import annotations

import re

import pytest

from srcore._attrs_code_cache import _type_hash
from srcore._lazyre import LazyPattern
from srcore.plugin.discovery import _split_value

pytestmark = pytest.mark.one_pass


def test_a_lazy_pattern_compiles_on_first_use_and_is_the_pattern():
    p = LazyPattern(r"(a+)(b)?", re.IGNORECASE)
    assert p._compiled is None
    assert p.fullmatch("AAb").groups() == ("AA", "b") and p.pattern == "(a+)(b)?" and p.flags & re.IGNORECASE
    assert p._compiled is re.compile(r"(a+)(b)?", re.IGNORECASE)
    assert p.sub("x", "caab") == "cx"


VALUE_RE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


@pytest.mark.parametrize("value", ["srcore_cpu", "srcore_cpu:plugin", "a.b.c:d.e", "pkg:obj.attr", ".", "a:",
                                   ":b", "", "a b", "a : b", "a:b [x]", "a:b[x, y]", "mod:attr:x", "é.ü:ñ",
                                   "a-b:c", "a:b-c", "a:b\n", "a\n"])
def test_an_entry_point_value_splits_as_importlib_metadata_pattern_reads_it(value):
    m = VALUE_RE.match(value)
    assert _split_value(value) == (None if m is None else (m.group("module"), m.group("attr")))


TYPE_HASH = re.compile(r"return hash\(\(\s*(-?\d+),")


@pytest.mark.parametrize("script", [
    "def __hash__(self):\n    return hash((\n        -1234567890123,\n        self.a,\n    ))\n",
    "def __hash__(self):\n    return hash((\n        987,\n        self.a,\n    ))\n",
    "def __hash__(self):\n    return hash((\t \n42,self.a))",
    "return hash((x, 1))\nreturn hash(( 7,",
    "return hash((-,)) return hash((٣٤,",
    "return hash((12 ,", "no hash here", "return hash((", "return hash((-5",
])
def test_the_hash_literal_is_found_where_the_regex_finds_it(script):
    m = TYPE_HASH.search(script)
    assert _type_hash(script) == (None if m is None else m.span(1))

"""The IR parser's source-location and tensor-literal scanners are written with str methods instead of
regexes (compiling those was ~0.3 ms of every cold start): each must give what its regex gives (the
reference), at any position of any text."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from srcore.ir import parser as P

#: the parser's scanners against their regexes, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

PIECES = ["{", "}", "[", "]", "[ ", "} ]", "\n", " ", ":", "1", "23", "٣", ",", '"', "%", "#", "a", "_",
          "Type", "FloatType", "CPUFloatType{2,3}", "{2,3}", "0.5", "-", ".", "(1,.,.) =", "x.py", "é"]
TEXT = st.one_of(st.lists(st.sampled_from(PIECES), max_size=14).map("".join), st.text(max_size=14))

EDGES = ["{0.5}", "{0.5", "{0[5}", "{}", "{\n}", " 1 2\n 3 4\n[ CPUFloatType{2,2} ]", "[ Type{2} ]",
         "[ FloatType{} ]", "[ FloatType{2,} ] x", "1 % [ FloatType{2} ]", "[ FloatType {2} ]",
         "[ CPUFloatType{2,3} ]]", "a/b.py:12", "a/b.py:12:3", "a:1:2:3", "a:b:1", ":1", "a:", "a:1:", "a\nb:1",
         "a:١", "C:\\x.py:7:8", "x.py:12a", "::1"]


@settings(max_examples=500, deadline=None)
@given(st.one_of(TEXT, st.sampled_from(EDGES)), st.integers(0, 4))
def test_tensor_literal_scanners_equal_their_regexes(text, pos):
    pos = min(pos, len(text))
    for pattern, scan in ((P._SCALAR_TENSOR_PATTERN, P._scalar_tensor_end),
                          (P._TENSOR_DUMP_PATTERN, P._tensor_dump_end)):
        m = re.compile(pattern).match(text, pos)
        assert scan(text, pos) == (m.end() if m else None), (pattern, text, pos)


@settings(max_examples=500, deadline=None)
@given(st.one_of(TEXT, st.sampled_from(EDGES)))
def test_source_location_split_equals_its_regex(text):
    text = text.strip()   # as parse_source_location passes it
    m = re.match(P._SOURCE_PATTERN, text)
    assert P._source_parts(text) == (m.groups() if m else None), text


def test_locations_and_literals_in_a_parsed_graph():
    g = P.parse_graph(
        "graph(%x : Float(2, 2)):\n"
        "  %c : Tensor = prim::Constant[value={0.5}]()  # m/a.py:12:3\n"
        "  %d : Tensor = prim::Constant[value= 1  2\n  3  4\n[ CPUFloatType{2,2} ]]()  # m/b.py:7\n"
        "  %y : Tensor = aten::mul(%x, %c)\n"
        "  return (%y)\n")
    c, d = [n for n in g.nodes if n.kind == "prim::Constant"]
    assert (c.source.file, c.source.line, c.source.col) == ("m/a.py", 12, 3)
    assert (d.source.file, d.source.line, d.source.col) == ("m/b.py", 7, None)
    assert P.parse_source_location("not a location") is None

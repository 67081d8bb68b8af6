"""srcore.plugin.types' name checks (op names, plugin/backend names, ``module:attr`` references) are written
with str methods instead of regexes (compiling those was ~0.3 ms of every cold start): each must accept
exactly what its regex accepts under ``re.match`` (the reference), including ``$`` before a final newline
and ``\\w``'s Unicode word characters."""
from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings, strategies as st

from srcore.plugin import types as T

#: string checks against their regexes, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

# the characters the patterns care about, and some they must reject or treat as Unicode word characters
ALPHABET = st.sampled_from(list("aZ_09-.:*") + ["::", "\n", " ", "\t", "é", "ß", "٣", "²", "½", "Ⅻ", "·", "\u200d", "$"])
TEXT = st.one_of(st.lists(ALPHABET, max_size=12).map("".join), st.text(max_size=12))

CASES = ["aten::add", "aten::add.Tensor", "aten::*", "aten::add\n", "aten::add\n\n", "aten::add.", "aten::add.a.b",
         "a::*\n", "::add", "1a::b", "aten:add", "aten::a-b", "cpu", "trt-like", "cpu\n", "-cpu", "", "\n",
         "m:f", "a.b:c.d", "pkg.mod:attr\n", "é:ß", "m²:f", "m:", ":f", "m:f:g", "m :f", "mod:١"]


def _agree(pattern, value: str) -> None:
    expect = bool(re.match(pattern.pattern, value))
    assert pattern._test(value) is expect, (pattern.pattern, value)   # the str form
    assert bool(pattern.match(value)) is expect, (pattern.pattern, value)   # whichever form is in use


def test_the_regex_takes_over_after_the_first_uses_with_the_same_answers():
    p = T._Pattern(T._OP_OR_WILDCARD_RE.pattern, T._op_or_wildcard)
    values = ["aten::add", "aten:add", "x::*", "a::b.c.d"] * (T._STR_CALLS // 4 + 2)
    answers = [bool(p.match(v)) for v in values]
    assert answers == [bool(re.match(p.pattern, v)) for v in values]
    assert p.match.__self__.pattern == p.pattern   # now the compiled regex's own match


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_each_check_accepts_exactly_what_its_regex_matches(value):
    for pattern in (T._OP_OR_WILDCARD_RE, T._NAME_RE, T._REF_RE):
        _agree(pattern, value)


@given(st.sampled_from(CASES))
@example("aten::add.Tensor")
def test_the_edge_cases(value):
    for pattern in (T._OP_OR_WILDCARD_RE, T._NAME_RE, T._REF_RE):
        _agree(pattern, value)


def test_records_still_reject_bad_names():
    import pytest

    from srcore.plugin import Backend, Kernel

    assert Kernel("aten::relu", "cpu", "out", ("*",), impl="m:f").op == "aten::relu"
    with pytest.raises(ValueError, match="invalid op name"):
        Kernel("aten:relu", "cpu", "out", ("*",), impl="m:f")
    with pytest.raises(ValueError, match="must be a callable"):
        Kernel("aten::relu", "cpu", "out", ("*",), impl="m.f")
    with pytest.raises(ValueError, match="invalid backend name"):
        Kernel("aten::relu", "cpu-1 x", "out", ("*",), impl="m:f")
    with pytest.raises(ValueError, match="invalid backend name"):
        Backend("cpu backend", "")

"""The IR's name checks written with str methods instead of regexes (compiling those was ~0.1 ms each of
every cold start): each accepts exactly what its regex does (the reference), ``$`` before a final newline and
``\\d``'s Unicode decimal digits included."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from srcore.ir import alias, types

#: name checks against their regexes, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

ALPHABET = st.sampled_from(list("tKVAnySS()-_a9z0") + ["Any", "SS(", "\n", " ", "٣", "²", "é", "+", "t1"])
TEXT = st.one_of(st.lists(ALPHABET, max_size=8).map("".join), st.text(max_size=8))
EDGES = ["t", "t0", "t12", "t١", "t²", "tx", "K", "V", "Any", "Any\n", "t1\n", "t1\n\n", "", "\n", "KV", "k",
         "n", "n_1", "_", "1n", "SS(3)", "SS(-3)", "SS()", "SS(-)", "SS(3", "SS(٣)", "SS(3)\n", "n+1", "é", "a b"]


@settings(max_examples=400, deadline=None)
@given(st.one_of(TEXT, st.sampled_from(EDGES)))
def test_type_var_and_symbol_checks_equal_their_regexes(value):
    assert alias._is_type_var(value) == bool(re.match(alias._TYPE_VAR_PATTERN, value)), value
    assert types._is_symbol(value) == bool(re.fullmatch(types._SYMBOL_PATTERN, value)), value


def test_a_symbolic_dim_prints_bare_only_when_it_reparses():
    t = types.TensorType(dtype="float32", shape=("n", "SS(-2)", "n+1", 3))
    text = str(t)
    assert "n," in text and "SS(-2)" in text and '"n+1"' in text

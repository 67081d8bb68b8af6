"""srcore.testing.op_cases: the conformance suites' own pieces must catch what they are for."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore.testing.op_cases import (SPECIALS, GraphText, In, Param, TList, compare_specials, constant_line,
                                     random_values, raise_worst, tin)

pytestmark = pytest.mark.one_pass


def test_random_values_are_seeded_and_carry_the_specials():
    a, b = random_values((6, 7), 3), random_values((6, 7), 3)
    np.testing.assert_array_equal(a, b)
    # a third of the places (14 of 42) hold specials, each used at most once
    specials = np.isnan(a) | np.isin(a, SPECIALS[~np.isnan(SPECIALS)])
    assert specials.sum() == 14 and len(np.unique(a[specials & ~np.isnan(a)])) == 14 - np.isnan(a).sum()
    everything = random_values((len(SPECIALS) * 3,), 0)
    assert np.isnan(everything).sum() == 1 and np.isposinf(everything).sum() == 1 and np.isneginf(everything).sum() == 1
    assert not np.isin(random_values((6, 7), 3, special=False), [np.inf, -np.inf]).any()
    assert (random_values((50,), 1, positive=True) > 0).all()
    ints = random_values((100,), 2, np.int64)
    assert ints.dtype == np.int64 and ints.min() >= -5 and ints.max() <= 5


def test_transposed_input_is_a_non_contiguous_view_of_the_same_values():
    x = tin((3, 5), seed=4, transposed=True)
    assert x.array.shape == (3, 5) and not x.array.flags.c_contiguous
    np.testing.assert_array_equal(x.array, random_values((5, 3), 4).T)


def test_graph_text_runs_what_it_describes():
    """Inputs, a parameter, a tensor list and constants, as srcore parses and runs them."""
    x, y, w = tin((2, 3), 1, special=False), tin((2, 3), 2, special=False), Param(random_values((3,), 3, special=False))
    g = GraphText()
    a = g.value(TList((x, y)), "0")
    d = g.value(0, "1")
    g.line(f"  %c : Tensor = aten::cat(%{a}, %{d})")
    g.line(f"  %m : Tensor = aten::mul(%c, %{g.value(w, '2')})")
    g.line(f"  %s : Tensor = aten::sum(%m, %{g.value([1], '3')}, %{g.value(False, '4')}, %{g.value(None, '5')})")
    sm = srcore.StaticModule(srcore.parse_graph(g.text(["%s"]), params=g.params))
    got = sm(*g.inputs)
    np.testing.assert_allclose(got, (np.concatenate([x.array, y.array]) * w.array).sum(1), rtol=1e-6)
    assert len(g.inputs) == 2 and list(g.params) == ["w0"]


def test_constant_line_refuses_what_the_ir_cannot_hold():
    assert constant_line("k", 2.5) == "  %k : float = prim::Constant[value=2.5]()"
    assert constant_line("k", [1.0, 2.0]).endswith("float[] = prim::Constant[value=[1.0, 2.0]]()")
    with pytest.raises(TypeError, match="no IR constant"):
        constant_line("k", {"a": 1})


@pytest.mark.parametrize("got, message", [
    ([np.nan, 1.0, np.inf], None),
    ([1.0, 1.0, np.inf], "NaN at other places"),
    ([np.nan, 1.0, -np.inf], "infinities differ"),
    ([np.nan, 1.0, 5.0], "infinities differ"),
])
def test_compare_specials_places_nan_and_infinity_exactly(got, message):
    want = np.array([np.nan, 1.0, np.inf], np.float32)
    got = np.array(got, np.float32)
    if message is None:
        g, w, finite = compare_specials(got, want)
        assert finite.tolist() == [False, True, False]
    else:
        with pytest.raises(AssertionError, match=message):
            compare_specials(got, want)


def test_compare_specials_checks_shape_dtype_and_exact_integers():
    with pytest.raises(AssertionError, match="shape"):
        compare_specials(np.zeros(3, np.float32), np.zeros(4, np.float32))
    with pytest.raises(AssertionError, match="dtype"):
        compare_specials(np.zeros(3, np.float64), np.zeros(3, np.float32))
    assert compare_specials(np.arange(3), np.arange(3)) is None
    with pytest.raises(AssertionError):
        compare_specials(np.array([0, 1, 3]), np.arange(3))


def test_raise_worst_names_the_worst_value():
    g, w = np.array([1.0, 2.5, 3.0]), np.array([1.0, 2.0, 2.9])
    err, bound = np.abs(g - w), 0.2
    with pytest.raises(AssertionError, match=r"1 value\(s\).*worst got 2\.5, torch 2\.0"):
        raise_worst(err > bound, err, bound, g, w, "tol", "op")
    raise_worst(err > 1.0, err, 1.0, g, w, "tol", "op")     # nothing over: no error
    assert In(g) == In(g.copy()) and Param(g) == Param(w)     # arrays take no part in equality

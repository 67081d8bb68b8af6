"""kernels/select.py's ``kth_smallest`` against numpy's sort: any float32 buffer without NaN (ties,
signed zeros, infinities, sorted and reversed runs), every rank."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from srcore_trt_like.kernels.select import kth_smallest

pytestmark = pytest.mark.one_pass

_VALUES = st.one_of(st.floats(allow_nan=False, width=32), st.sampled_from([0.0, -0.0, 1.0, -1.0]))


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 80), elements=_VALUES), st.data())
def test_kth_smallest_is_the_sorted_value(a, data):
    k = data.draw(st.integers(0, a.size - 1))
    expected = np.sort(a)[k]
    before = a.copy()
    got = kth_smallest(a, k, np.empty(a.size + 3, np.float32))
    assert got == expected, (a, k, got, expected)
    np.testing.assert_array_equal(a, before)   # the input is read only (the segment reuses it)   # (a zero's sign may differ: -0.0 == 0.0, as a threshold)


@pytest.mark.parametrize("order", ["sorted", "reversed", "organ", "constant"])
def test_kth_smallest_on_patterned_buffers(order):
    base = np.arange(1001, dtype=np.float32)
    a = {"sorted": base, "reversed": base[::-1].copy(),
         "organ": np.concatenate([base[:500], base[500::-1]]), "constant": np.full(1001, 3.0, np.float32)}[order]
    ref = np.sort(a)
    for k in (0, 1, 250, 500, a.size - 2, a.size - 1):
        assert kth_smallest(a, k, np.empty_like(a)) == ref[k]

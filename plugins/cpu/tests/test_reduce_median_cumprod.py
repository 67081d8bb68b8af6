"""cumprod and median kernels vs torch: dims, dtype accumulation, 0-d inputs, median's lower median,
index of ties (torch: the first in a stable order), NaN (NaN and the first NaN's index), empty inputs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import reduce as R  # noqa: E402
from cpu_kernel_util import make_rand  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(5)
rand = make_rand(RNG, -3, 4)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool"])
@pytest.mark.parametrize("dim", [0, 1, -1, -3])
def test_cumprod(dim, dtype):
    x = rand(3, 4, 2, dtype=dtype)
    check_kernel(R.cumprod, torch.cumprod, x, dim)  # ints and bool accumulate in int64


@pytest.mark.parametrize("code,tdtype", [(7, torch.float64), (4, torch.int64), (6, torch.float32)])
def test_cumprod_dtype(code, tdtype):
    x = rand(3, 5, dtype="int32")
    check_kernel(R.cumprod, lambda t, d: torch.cumprod(t, d, dtype=tdtype), x, 1, dtype=code)


@pytest.mark.parametrize("dim", [0, -1])
def test_cumprod_0d(dim):
    check_kernel(R.cumprod, torch.cumprod, np.array(2.5, np.float32), dim)
    check_kernel(R.cumprod, torch.cumprod, np.array(3, np.int32), dim)
    with pytest.raises(KernelError, match="Dimension out of range"):
        R.cumprod(np.array(2.5, np.float32), 1)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("shape", [(7,), (4, 6), (2, 3, 5), ()])
def test_median_all(shape, dtype):
    check_kernel(R.median, torch.median, rand(*shape, dtype=dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_dim(dim, keepdim, dtype):
    x = rand(4, 5, 6, dtype=dtype)  # ints in [-3, 3]: ties on every slice
    check_kernel(R.median, lambda t, d, k: tuple(torch.median(t, d, k)), x, dim, keepdim)


def test_median_even_count_is_the_lower_median():
    x = np.array([[4.0, 1.0, 3.0, 2.0]], np.float32)
    values, indices = R.median(x, 1)
    assert values.tolist() == [2.0] and indices.tolist() == [3]
    assert float(R.median(x)) == 2.0


def test_median_nan():
    nan = np.nan
    x = np.array([[1.0, nan, 2.0, nan], [3.0, 1.0, 2.0, 5.0], [nan, nan, 1.0, 0.0]], np.float32)
    check_kernel(R.median, lambda t, d: tuple(torch.median(t, d)), x, 1)
    check_kernel(R.median, lambda t, d: tuple(torch.median(t, d)), x, 0)
    assert np.isnan(R.median(x))
    values, indices = R.median(x, 1)
    assert indices.tolist() == [1, 2, 0]  # the first NaN of each slice holding one


def test_median_0d_and_empty():
    x = np.array(3.5, np.float32)
    check_kernel(R.median, lambda t, d, k: tuple(torch.median(t, d, k)), x, 0, False)
    check_kernel(R.median, lambda t, d, k: tuple(torch.median(t, d, k)), x, -1, True)
    check_kernel(R.median, torch.median, np.zeros((0,), np.float32))  # NaN
    check_kernel(R.median, lambda t, d: tuple(torch.median(t, d)), np.zeros((0, 3), np.float32), 1)
    with pytest.raises(KernelError, match="non-zero size"):
        R.median(np.zeros((2, 0), np.float32), 1)
    with pytest.raises(KernelError, match="Dimension out of range"):
        R.median(np.zeros((2, 3), np.float32), 2)
    with pytest.raises(KernelError, match="Bool"):
        R.median(np.zeros((3,), bool))


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
                  elements=st.sampled_from([-1.0, 0.0, 0.5, 2.0, np.nan])), st.data())
def test_median_matches_torch_with_ties_and_nan(x, data):
    d = data.draw(st.integers(-x.ndim, x.ndim - 1))
    if x.shape[d] == 0:
        return
    v, i = torch.median(torch.from_numpy(x), d)
    got_v, got_i = R.median(x, d)
    np.testing.assert_array_equal(got_v, v.numpy())  # NaN positions included
    np.testing.assert_array_equal(got_i, i.numpy())
    np.testing.assert_array_equal(R.median(x), torch.median(torch.from_numpy(x)).numpy())


def test_decl():
    from srcore_cpu.decl import reduce as D
    ops = {k.op: k for k in D.KERNELS}
    assert {"aten::cumprod", "aten::median", "aten::median.dim"} <= set(ops)
    assert "bool" not in ops["aten::median"].dtypes and "bool" in ops["aten::cumprod"].dtypes

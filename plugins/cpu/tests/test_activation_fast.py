"""The float32-fast exact GELU against float64 x * ndtr(x) and torch."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from scipy.special import ndtr  # noqa: E402

from srcore_cpu.kernels import activation_fast as AF  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass


def _ref(x):
    x64 = np.asarray(x, np.float64)
    return x64 * ndtr(x64)


def test_gelu_relative_accuracy_over_the_whole_range():
    # spans several BLOCKs, so the block loop and its tail are exercised
    x = np.linspace(-30, 30, 3 * AF.BLOCK + 17).astype(np.float32)
    y = AF.gelu(x)
    ref = _ref(x)
    nz = np.abs(ref) > 1e-35
    assert y.dtype == np.float32
    assert np.max(np.abs(y[nz] - ref[nz]) / np.abs(ref[nz])) < 5e-5  # the tail keeps relative accuracy
    assert np.all(y[~nz] == 0) or np.max(np.abs(y[~nz])) < 1e-35


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 5), ()])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_matches_torch(shape, dtype):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype) * 3
    ref = torch.nn.functional.gelu(torch.from_numpy(np.array(x))).numpy()
    np.testing.assert_allclose(AF.gelu(x), ref, rtol=1e-5, atol=1e-6)
    out = np.empty(shape, dtype)
    assert AF.gelu(x, out=out) is out
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_gelu_in_place_non_contiguous_and_tanh():
    x = np.random.default_rng(1).standard_normal((6, 8)).astype(np.float32)
    ref = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    y = x.copy()
    AF.gelu_erf_(y)                                   # in place
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    xt = x.T                                          # non-contiguous: the scipy path
    np.testing.assert_allclose(AF.gelu(xt), ref.T, rtol=1e-5, atol=1e-6)
    tanh = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    np.testing.assert_allclose(AF.gelu(x, approximate="tanh"), tanh, rtol=1e-5, atol=1e-6)
    with pytest.raises(Exception, match="approximate"):
        AF.gelu(x, approximate="fast")


def test_gelu_declared_with_priority_over_the_scipy_kernel():
    from srcore_cpu import declared_kernels

    # the compiled one-pass kernel (decl/jit_pointwise.py) comes first but has a matcher that
    # declines small and float64 nodes; of the unconditional kernels this one wins
    gelus = [k for k in declared_kernels() if k.op == "aten::gelu" and k.matcher is None]
    best = max(gelus, key=lambda k: k.priority)
    assert best.impl == "srcore_cpu.kernels.activation_fast:gelu"
    assert sum(k.priority == best.priority for k in gelus) == 1


def test_small_gelu_takes_ndtr_within_float32_rounding():
    """Below SMALL elements (fixed cost over throughput): two roundings of float64-accurate values."""
    x = np.linspace(-30, 30, AF.SMALL - 1).astype(np.float32)
    y = AF.gelu(x)
    ref = _ref(x)
    nz = np.abs(ref) > 1e-35
    assert np.max(np.abs(y[nz] - ref[nz]) / np.abs(ref[nz])) < 2.5e-7
    np.testing.assert_allclose(y[:64], torch.nn.functional.gelu(torch.from_numpy(x[:64])).numpy(), rtol=0, atol=1e-6)

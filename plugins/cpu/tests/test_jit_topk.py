"""The compiled topk (heap selection, numba) vs torch: largest and smallest, ties at the k-th value,
NaN, every dim, non-contiguous input, int dtypes, into ``out``, and the matcher's choices."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from srcore.testing import node_info  # noqa: E402
from srcore_cpu.kernels import reduce as RK  # noqa: E402

rng = np.random.default_rng(0)


def _fn(shape, k, dim, largest, dtype="float32"):
    t = TensorType(dtype, shape)
    answer = RK.topk_matcher(node_info("aten::topk", self=t, k=k, dim=dim, largest=largest, sorted=True,
                                       outputs=(t, TensorType("int64", shape))))
    assert isinstance(answer, Specialized)
    return answer.fn


def _check(x, k, dim, largest, ties=False):
    """Values as torch's; indices as torch's, or with ties (whose order torch leaves open) as the
    numpy kernel's stable order, and pointing at the values."""
    fn = _fn(x.shape, k, dim, largest, x.dtype.name)
    tv, ti = torch.topk(torch.from_numpy(np.ascontiguousarray(x)), k, dim, largest, True)
    want_i = RK.topk(x, k, dim, largest)[1] if ties else ti.numpy()
    v, i = fn(x)
    assert v.dtype == x.dtype and i.dtype == np.int64
    np.testing.assert_array_equal(v, tv.numpy())
    np.testing.assert_array_equal(i, want_i)
    np.testing.assert_array_equal(np.take_along_axis(x, i, dim), v)
    out = (np.full(tv.shape, 7, x.dtype), np.full(ti.shape, -1, np.int64))
    assert fn(x, out=out) is out
    np.testing.assert_array_equal(out[0], tv.numpy())
    np.testing.assert_array_equal(out[1], want_i)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape,k,dim", [((8, 4000), 50, -1), ((3, 300), 1, 1), ((300, 5), 7, 0),
                                         ((2, 400, 3), 400, 1), ((1, 257), 64, -1)])
def test_matches_torch(shape, k, dim, largest):
    _check(rng.standard_normal(shape).astype(np.float32), k, dim, largest)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("largest", [True, False])
def test_ties_nan_and_signed_zeros_in_torch_order(largest):
    x = rng.integers(-3, 4, (4, 600)).astype(np.float32)   # many ties at the k-th value
    x[0, ::7] = np.nan
    x[1, :] = np.nan
    x[2, ::3] = -0.0
    x[3, 5] = np.inf
    x[3, 9] = -np.inf
    for k in (1, 10, 300, 600):
        _check(x, k, -1, largest, ties=True)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("dtype", ["float64", "int32", "int64"])
def test_other_dtypes_and_a_non_contiguous_input(dtype):
    x = rng.integers(-50, 50, (300, 6)).astype(dtype)
    _check(x.T, 20, 1, True, ties=True)         # a transposed view
    _check(x, 20, 0, False, ties=True)


@pytest.mark.one_pass   # matcher choices only
def test_matcher_declines_short_rows_runtime_k_and_other_dtypes():
    """Short rows of a large tensor, a k known at run time and other dtypes keep the numpy kernel; a
    small tensor's short rows (a point net's kNN) take the compiled one."""
    short = TensorType("float32", (200, 64))
    assert RK.topk_matcher(node_info("aten::topk", self=short, k=5, dim=-1, largest=True, sorted=True,
                                     outputs=(short, short))) is None
    _check(np.random.default_rng(3).standard_normal((2, 8, 32)).astype(np.float32), 4, -1, False)
    big = TensorType("float32", (8, 4000))
    from srcore.ir.types import INT
    assert RK.topk_matcher(node_info("aten::topk", self=big, k=INT, dim=-1, largest=True, sorted=True,
                                     outputs=(big, big))) is None
    f16 = TensorType("float16", (8, 4000))
    assert RK.topk_matcher(node_info("aten::topk", self=f16, k=5, dim=-1, largest=True, sorted=True,
                                     outputs=(f16, f16))) is None


def test_a_sampling_step_through_a_static_module():
    import srcore

    class M(torch.nn.Module):
        def forward(self, logits):
            top, idx = torch.topk(logits, 20, dim=-1)
            low = torch.topk(logits, 3, dim=0, largest=False)[0]
            return torch.softmax(top, -1), idx, low

    x = torch.randn(12, 500)   # (more than TOPK_JIT_MAX_SMALL elements: the short columns stay numpy's)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(M()), (x,)))
    got, want = sm(x.numpy()), M()(x)
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(got[1], want[1].numpy())
    np.testing.assert_array_equal(got[2], want[2].numpy())
    chosen = [getattr(pn.fn.fn, "__qualname__", "") for b in sm.blocks for pn in b.nodes
              if pn.fn is not None and pn.node.kind == "aten::topk"]
    # the rows of 500 take the compiled kernel; the columns of 12 stay with numpy
    assert sorted(chosen) == ["topk", "topk_matcher.<locals>.topk_jit"]


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_rows_cut_to_candidates_keep_torch_order(largest, dtype):
    """Rows long enough to be cut to candidates first (block extremes, ``_FILTER_MIN_RATIO``): every
    element tied, sorted either way, few distinct values, a best element in the last partial block,
    and one NaN (that row not cut); the result is the same as the full stable order."""
    n, k = 1003, 12            # 1003 = 20 blocks of 50 and a partial block of 3
    rows = [np.full(n, 3), np.arange(n), np.arange(n)[::-1], rng.integers(-2, 3, n),
            rng.integers(-1000, 1000, n)]
    x = np.stack(rows).astype(dtype)
    x[4, -1] = 5000 if largest else -5000
    _check(x, k, 1, largest, ties=True)
    _check(np.ascontiguousarray(x[:, ::-1]), k, 1, largest, ties=True)
    if dtype == "float32":
        y = x.copy()
        y[3, 7] = np.nan
        _check(y, k, 1, largest, ties=True)
        # infinities (masked logits) through the NaN-free block extremes (compiled with ``nnan``)
        z = x.copy()
        z[1, ::3] = -np.inf
        z[2, 5] = np.inf
        z[0, 100:400] = -np.inf if largest else np.inf
        _check(z, k, 1, largest, ties=True)

"""Ops torch.export's core ATen decomposition (``from_torch(..., decompositions="core")``) emits for
the real-world zoo, vs torch: scalar_tensor (masked_fill), diagonal (diag), native_group_norm,
_cdist_forward, and uint8 comparisons (eye decomposes into uint8 aranges compared with eq)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import creation as C  # noqa: E402
from srcore_cpu.kernels import elementwise as E  # noqa: E402
from srcore_cpu.kernels import linalg as L  # noqa: E402
from srcore_cpu.kernels import norm as N  # noqa: E402
from srcore_cpu.kernels import shape as V  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(17)


def test_scalar_tensor_defaults_to_float32():
    for s, dtype in ((2.5, None), (3, None), (float("-inf"), 6), (4, 4), (True, 11)):
        want = torch.scalar_tensor(s, dtype=None if dtype is None else {6: torch.float32, 4: torch.int64,
                                                                        11: torch.bool}[dtype]).numpy()
        got = C.scalar_tensor(s, dtype=dtype)
        assert got.shape == () and got.dtype == want.dtype and got == want


@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 1), (-2, 1, 2), (0, -1, 0), (5, 0, 2)])
def test_diagonal_is_a_writable_view(offset, d1, d2):
    x = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    check_kernel(V.diagonal, lambda t, *_: torch.diagonal(t, offset, d1, d2), x, offset, d1, d2)
    y = x.copy()
    r = V.diagonal(y, offset, d1, d2)
    assert np.shares_memory(r, y) or r.size == 0
    r[...] = 7.0            # writes through, as into torch's view
    want = torch.from_numpy(x.copy())
    torch.diagonal(want, offset, d1, d2).fill_(7.0)
    np.testing.assert_array_equal(y, want.numpy())
    with pytest.raises(KernelError, match="identical"):
        V.diagonal(x, 0, 1, -2)


def test_native_group_norm():
    x = RNG.standard_normal((2, 6, 3, 4)).astype(np.float32) * 3 + 1
    w, b = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    got = N.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5)
    want = torch.ops.aten.native_group_norm(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                            2, 6, 12, 3, 1e-5)
    for g, t in zip(got, want):
        assert g.shape == tuple(t.shape) and g.dtype == np.float32
        np.testing.assert_allclose(g, t.numpy(), rtol=1e-5, atol=1e-5)
    got = N.native_group_norm(x, None, None, 2, 6, 12, 2, 1e-5)
    want = torch.ops.aten.native_group_norm(torch.from_numpy(x), None, None, 2, 6, 12, 2, 1e-5)
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-5)
    # an empty batch (it reshaped with -1, which an empty array cannot infer)
    got = N.native_group_norm(x[:0], w, b, 0, 6, 12, 3, 1e-5)
    want = torch.ops.aten.native_group_norm(torch.from_numpy(x[:0]), torch.from_numpy(w), torch.from_numpy(b),
                                            0, 6, 12, 3, 1e-5)
    assert [g.shape for g in got] == [tuple(t.shape) for t in want]


def test_cdist_forward():
    a, b = RNG.standard_normal((2, 4, 3)).astype(np.float32), RNG.standard_normal((2, 5, 3)).astype(np.float32)
    check_kernel(L.cdist, lambda x, y, *_: torch.ops.aten._cdist_forward(x, y, 2.0, None), a, b, 2.0, None,
                 rtol=1e-5)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_uint8_comparisons(op):
    img = RNG.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    other = RNG.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    fn = getattr(E, op)
    ref = getattr(torch, op)
    check_kernel(fn, ref, img, other)
    check_kernel(fn, lambda t, s: ref(t, s), img, 128)
    check_kernel(fn, ref, img, other.astype(np.int64))   # mixed: torch promotes to int64


@pytest.mark.parametrize("with_stats", [True, False])
def test_native_batch_norm_legit_batch_stats_and_running_update(with_stats):
    """instance_norm's core decomposition: batch statistics, and (with running stats) their update."""
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32) * 2 + 0.5
    w, b = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    rm, rv = np.zeros(4, np.float32), np.ones(4, np.float32)
    trm, trv = torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())
    if with_stats:
        got = N._native_batch_norm_legit(x, w, b, rm, rv, True, 0.1, 1e-5)
        want = torch.ops.aten._native_batch_norm_legit(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                                       trm, trv, True, 0.1, 1e-5)
        np.testing.assert_allclose(rm, trm.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rv, trv.numpy(), rtol=1e-5, atol=1e-6)
    else:
        got = N._native_batch_norm_legit_no_stats(x, w, b, True, 0.1, 1e-5)
        want = torch.ops.aten._native_batch_norm_legit.no_stats(torch.from_numpy(x), torch.from_numpy(w),
                                                                torch.from_numpy(b), True, 0.1, 1e-5)
    for g, t in zip(got, want):
        assert g.shape == tuple(t.shape)
        np.testing.assert_allclose(g, t.numpy(), rtol=1e-5, atol=1e-5)
    evald = N._native_batch_norm_legit(x, w, b, rm, rv, False, 0.1, 1e-5)[0]
    np.testing.assert_allclose(evald, torch.nn.functional.batch_norm(torch.from_numpy(x), torch.from_numpy(rm),
                               torch.from_numpy(rv), torch.from_numpy(w), torch.from_numpy(b)).numpy(),
                               rtol=1e-5, atol=1e-5)

"""meshgrid (detection heads' anchor and YOLO grids) and fmod vs torch (no kernel before)."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import elementwise as E  # noqa: E402
from srcore_cpu.kernels import scalar as S  # noqa: E402
from srcore_cpu.kernels import shape as V  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(13)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
    for arrays in ([np.arange(3, dtype=np.float32), np.arange(5, dtype=np.float32) - 2],
                   [np.arange(2), np.array(7), np.arange(4)]):
        got = V.meshgrid(arrays, indexing=indexing)
        want = torch.meshgrid(*[torch.from_numpy(np.asarray(a)) for a in arrays], indexing=indexing)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.numpy().dtype
            np.testing.assert_array_equal(g, w.numpy())
    with pytest.raises(KernelError, match="indexing"):
        V.meshgrid([np.arange(2)], indexing="yx")
    with pytest.raises(KernelError, match="0D or 1D"):
        V.meshgrid([np.zeros((2, 2))])


def test_meshgrid_default_is_ij():
    a, b = np.arange(3), np.arange(4)
    for g, w in zip(V.meshgrid([a, b]), torch.meshgrid(torch.from_numpy(a), torch.from_numpy(b), indexing="ij")):
        np.testing.assert_array_equal(g, w.numpy())


def test_fmod_takes_the_sign_of_the_dividend():
    a = (RNG.standard_normal((4, 5)) * 5).astype(np.float32)
    b = (RNG.standard_normal((4, 5)) * 2).astype(np.float32)
    check_kernel(E.fmod, torch.fmod, a, b)
    check_kernel(E.fmod, lambda x, s: torch.fmod(x, s), a, -1.5)
    ai, bi = np.array([-7, -3, 5, 9, 0, 7]), np.array([2, -2, 3, -4, 5, -3])
    check_kernel(E.fmod, torch.fmod, ai, bi)
    check_kernel(E.fmod, lambda x, s: torch.fmod(x, s), ai, 3)
    check_kernel(E.fmod, lambda x, s: torch.fmod(x, s), ai, 2.5)     # int tensor, float scalar: float32


@pytest.mark.parametrize("a,b", [(7, 3), (-7, 3), (7.5, -2), (-7, 2.5)])
def test_number_fmod_is_a_float(a, b):
    r = S.fmod(a, b)
    assert isinstance(r, float) and r == math.fmod(a, b)


def test_atan2_index_fill_tensor_split():
    from srcore_cpu.kernels import index as X

    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)
    check_kernel(E.atan2, torch.atan2, a, b)
    check_kernel(E.atan2, torch.atan2, np.arange(-3, 3), np.array([2, -1, 0, 3, 1, -2]))   # ints: float32
    assert S.atan2(1, -1) == math.atan2(1, -1)
    idx = np.array([0, 2, 2])
    check_kernel(X.index_fill, lambda x, d, i, v: torch.index_fill(x, d, i, v), a, 1, idx, -1.5)
    check_kernel(X.index_fill, lambda x, d, i, v: torch.index_fill(x, d, i, v), a, 0, idx[:2], np.array(7.0, np.float32))
    with pytest.raises(KernelError, match="out of bounds"):
        X.index_fill(a, 1, np.array([4]), 0.0)
    x = RNG.standard_normal((3, 7)).astype(np.float32)
    for arg in (3, 4, [1, 4], [5, 1], np.array(2), np.array([2, 6])):
        got = V.tensor_split(x, arg, 1)
        want = torch.tensor_split(torch.from_numpy(x), torch.from_numpy(arg) if isinstance(arg, np.ndarray) else arg, 1)
        assert [g.shape for g in got] == [tuple(w.shape) for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.numpy())

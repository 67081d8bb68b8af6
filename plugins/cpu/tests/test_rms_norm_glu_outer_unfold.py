"""rms_norm (nn.RMSNorm), glu, outer (RoPE tables), cosine_similarity and Tensor.unfold vs torch:
ops that Llama-style blocks, Conformer convolutions and metric heads use (no kernel before)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import activation as A  # noqa: E402
from srcore_cpu.kernels import linalg as L  # noqa: E402
from srcore_cpu.kernels import norm as N  # noqa: E402
from srcore_cpu.kernels import shape as V  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(12)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_rms_norm(dtype, eps):
    x, w = rand(2, 3, 8, dtype=dtype) * 3, rand(8, dtype=dtype)
    check_kernel(N.rms_norm, lambda t, _s, ww, *_: torch.rms_norm(t, [8], ww, eps), x, [8], w, eps)
    check_kernel(N.rms_norm, lambda t, *_: torch.rms_norm(t, [3, 8], None, eps), x, [3, 8], None, eps)
    tiny = np.full((1, 4), 1e-5, dtype)      # where the default eps (finfo.eps) matters
    check_kernel(N.rms_norm, lambda t, *_: torch.rms_norm(t, [4]), tiny, [4])


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_glu(dim):
    x = rand(4, 6, 2)
    check_kernel(A.glu, lambda t, *_: torch.nn.functional.glu(t, dim), x, dim)
    with pytest.raises(KernelError, match="even"):
        A.glu(rand(3, 5), -1)


def test_outer():
    check_kernel(L.outer, torch.outer, rand(5), rand(3))
    check_kernel(L.outer, torch.outer, np.arange(4, dtype=np.int64), np.arange(3, dtype=np.int64) - 1)


@pytest.mark.parametrize("dim", [1, -1, 0])
def test_cosine_similarity(dim):
    a, b = rand(3, 4, 5), rand(3, 4, 5)
    check_kernel(L.cosine_similarity, lambda x, y, *_: torch.cosine_similarity(x, y, dim), a, b, dim)
    check_kernel(L.cosine_similarity, lambda x, y, *_: torch.cosine_similarity(x, y, dim), a, b[:1], dim)  # broadcast
    z = np.zeros((2, 4), np.float32)            # a zero vector: the norm clamps to eps (0, not NaN)
    check_kernel(L.cosine_similarity, lambda x, y, *_: torch.cosine_similarity(x, y, 1), z, rand(2, 4), 1)


@pytest.mark.parametrize("dim,size,step", [(1, 3, 2), (0, 2, 1), (-1, 4, 4), (1, 7, 1), (2, 1, 3)])
def test_unfold_is_a_strided_view(dim, size, step):
    x = rand(4, 7, 5)
    if size > x.shape[dim]:
        return
    r = check_kernel(V.unfold, lambda t, *_: t.unfold(dim, size, step), x, dim, size, step)
    assert np.shares_memory(r, x)
    with pytest.raises(KernelError):
        V.unfold(x, 1, 8, 1)
    with pytest.raises(KernelError):
        V.unfold(x, 1, 2, 0)

"""Group norms, resizes and max pools split over numba's OpenMP team at 2 intra-op threads (``numba_split``:
:mod:`srcore_trt_like.kernels.rows_split`, the pool by channels): each (sample, group) row, each resized plane
and each pooled channel claimed by whichever thread is free gives the bits of the one-thread ``numba``
tactic, and torch's result; a conv split on the team pools there too (``<conv>_omp+max_pool``).
Parallel kernels of their own: ``full``."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.full


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = torch.nn.GroupNorm(4, 16)
        with torch.no_grad():
            self.n.weight.uniform_(0.5, 1.5)
            self.n.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return F.silu(self.n(x)) + 1.0


class Up(torch.nn.Module):
    def __init__(self, mode, align):
        super().__init__()
        self.mode, self.align = mode, align

    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode=self.mode, align_corners=self.align) + 1.0


class Pool(torch.nn.Module):
    def __init__(self, k, s, p, c):
        super().__init__()
        self.k, self.s, self.p = k, s, p
        self.c = torch.nn.Conv2d(c, 4, 1)   # (a pointwise op after it would fuse the pool into a segment)

    def forward(self, x):
        return self.c(F.max_pool2d(x, self.k, self.s, self.p))


class StemPool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 24, 3, 1, 1)

    def forward(self, x):
        return F.max_pool2d(torch.relu(self.c(x)), 3, 2, 1)


def _engine(m, x, exclude):
    model = srcore.from_torchscript(torch.jit.trace(m, (x,)), (x,))
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={"exclude_tactics": exclude, "timing": False})
    sm = srcore.StaticModule(model, options=opts)
    return sm, "\n".join(e.description for e in sm.partition.engines)


@pytest.mark.parametrize("m, shape, kind", [
    (Norm(), (1, 16, 64, 64), "group_norm"),                    # 4 rows of 4 channels x 4096
    (Up("bilinear", False), (1, 16, 32, 32), "resize"),           # 16 planes
    (Up("bilinear", True), (2, 8, 32, 32), "resize"),
    (Up("nearest", None), (1, 16, 32, 32), "resize"),
    (Up("linear", False), (2, 16, 2048), "resize"),               # 32 rows (1-D: the last dim)
    (Pool(2, 2, 0, 16), (1, 16, 32, 32), "max_pool2d"),               # under the work threshold: timed beside
    (Pool(3, 2, 1, 5), (2, 5, 33, 31), "max_pool2d"),                # 10 channels, odd sizes, padding
])
def test_split_gives_the_one_thread_bits(m, shape, kind):
    from threadpoolctl import threadpool_limits

    from srcore_trt_like.kernels import threads

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(7))
    with threadpool_limits(2):
        if threads.count() < 2:
            pytest.skip("one intra-op thread here")
        split, desc = _engine(m, x, ["numba", "numpy"])
        one, _ = _engine(m, x, ["numba_split", "numpy"])
    assert any(line.strip().startswith(kind) and line.endswith("[numba_split]") for line in desc.splitlines()), desc
    want = one(x.numpy())
    assert all(np.array_equal(split(x.numpy()), want) for _ in range(3))
    with torch.no_grad():
        np.testing.assert_allclose(want, m(x).numpy(), rtol=1e-5, atol=1e-5)


def test_a_conv_split_on_the_team_pools_there_too():
    """``simd_direct_omp+max_pool`` (the conv on the OpenMP team, then the pool split by channels there) against
    ``simd_direct+max_pool`` (both on the calling thread): the same bits, and torch's result."""
    from threadpoolctl import threadpool_limits

    from srcore_trt_like.kernels import threads

    m = StemPool().eval()
    x = torch.randn(1, 3, 40, 36, generator=torch.Generator().manual_seed(3))
    pooled = [f"{c}+max_pool" for c in ("simd_direct", "simd_direct_omp", "simd_direct_rows", "simd_direct_rows_omp",
                                        "im2col_gemm", "packed_gemm", "conv_nchwc_planes", "conv_nchwc_planes_h8",
                                        "winograd_f4x4", "winograd_f2x2", "winograd_f4x4_packed",
                                        "winograd_f2x2_packed", "winograd_f4x4_sgemm", "winograd_f2x2_sgemm",
                                        "winograd_f4x4_sgemm_omp", "winograd_f2x2_sgemm_omp",
                                        "conv_nchwc_planes_omp", "conv_nchwc_planes_rows_omp",
                                        "conv_nchwc_planes_h8_omp", "conv_nchwc_planes_h8_rows_omp")] + [
        "packed_gemm_max_pool"]
    with threadpool_limits(2):
        if threads.count() < 2:
            pytest.skip("one intra-op thread here")
        split, desc = _engine(m, x, [p for p in pooled if p != "simd_direct_omp+max_pool"])
        one, desc_one = _engine(m, x, [p for p in pooled if p != "simd_direct+max_pool"])
    assert "[simd_direct_omp+max_pool]" in desc and "[simd_direct+max_pool]" in desc_one, (desc, desc_one)
    want = one(x.numpy())
    assert all(np.array_equal(split(x.numpy()), want) for _ in range(3))
    with torch.no_grad():
        np.testing.assert_allclose(want, m(x).numpy(), rtol=1e-4, atol=1e-4)

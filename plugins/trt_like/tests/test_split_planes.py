"""Group norms and resizes split over numba's OpenMP team at 2 intra-op threads (``numba_split``:
:mod:`srcore_trt_like.kernels.rows_split`): each (sample, group) row and each resized plane claimed by
whichever thread is free gives the bits of the one-thread ``numba`` tactic, and torch's result.
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

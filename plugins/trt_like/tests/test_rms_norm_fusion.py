"""Written-out RMSNorm fused into one ``rms_norm`` layer (builder/norm_fusion.py): each spelling
torch code writes (T5's, LLaMA's with float casts, ``x * x``, ``torch.square``, ``rsqrt`` /
``1 / sqrt`` / ``x / sqrt``, with or without the weight) is one layer and matches torch with the
compiled and the numpy tactic; near misses stay as they were and still match."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn

N = 24
SPELLINGS = {
    "t5": lambda x, w: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)),
    "llama": lambda x, w: w * (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x),
    "mul_reciprocal": lambda x, w: (x * (1 / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5))) * w,
    "square_divide": lambda x, w: x / torch.sqrt(1e-6 + torch.square(x).mean(-1, keepdim=True)),
    "scalar_weight": lambda x, w: 2.5 * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)),
    # the mean as torch's float32 mean computes it: the sum, then a division by the count
    "sum_over_n": lambda x, w: x * torch.rsqrt((x * x).sum(-1, keepdim=True) / N + 1e-6) * w,
}
NEAR_MISSES = {
    # another tensor's statistics scale x
    "other_tensor": lambda x, w: x * torch.rsqrt((x + 1.0).pow(2).mean(-1, keepdim=True) + 1e-6) * w,
    # the mean over another dim
    "other_dim": lambda x, w: x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6),
    # the sum divided by another count (a float sum in the engine, numpy's as the cpu plugin's)
    "sum_over_n_minus_1": lambda x, w: x * torch.rsqrt((x * x).sum(-1, keepdim=True) / (N - 1) + 1e-6) * w,
    # a cube, not a square
    "cube": lambda x, w: x * torch.rsqrt(x.pow(3).abs().mean(-1, keepdim=True) + 1e-6),
}


class Net(nn.Module):
    def __init__(self, f, leak=False):
        super().__init__()
        self.f, self.leak = f, leak
        self.w = nn.Parameter(torch.randn(N, generator=torch.Generator().manual_seed(1)))

    def forward(self, x):
        y = self.f(x, self.w) + 1.0
        return (y, x.pow(2).mean(-1, keepdim=True)) if self.leak else y


def _engine(m, x, exclude=()):
    model = srcore.from_torchscript(torch.jit.trace(m, (x,)), (x,))
    opts = srcore.Options(backends=("trt_like", "cpu"),
                          engine_options={"exclude_tactics": ["segment", *exclude], "timing": False})
    sm = srcore.StaticModule(model, options=opts)
    return sm, "\n".join(e.description for e in sm.partition.engines)


def _x(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 20, N, generator=g) * 3.0


@pytest.mark.parametrize("tactic", ["numba", "numpy"])
@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_rms_norm_spellings_are_one_layer_and_match_torch(name, tactic):
    m, x = Net(SPELLINGS[name]).eval(), _x()
    sm, desc = _engine(m, x, exclude=["numpy" if tactic == "numba" else "numba"] if name == "t5" else ())
    assert "rms_norm" in desc and "mean" not in desc, desc
    assert f"rms_norm -> 2x20x{N} [{tactic if name == 't5' else 'numba'}]" in desc, desc
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(sm(x), ref, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_near_misses_are_not_fused_and_match_torch(name):
    m, x = Net(NEAR_MISSES[name]).eval(), _x(1)
    sm, desc = _engine(m, x)
    assert "rms_norm" not in desc, desc
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(sm(x), ref, rtol=2e-6, atol=2e-6)


def test_a_statistic_read_elsewhere_is_not_fused():
    """The mean of squares is also an engine output: the layers stay."""
    m, x = Net(SPELLINGS["t5"], leak=True).eval(), _x(2)
    sm, desc = _engine(m, x)
    assert "rms_norm" not in desc, desc
    with torch.no_grad():
        ref = m(x)
    for got, want in zip(sm(x), ref):
        np.testing.assert_allclose(got, want.numpy(), rtol=2e-6, atol=2e-6)


def test_a_weight_over_rows_stays_a_multiply():
    """A weight broadcast over rows, not features, is not the norm's: the norm fuses without it."""
    f = lambda x, w: (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)) * w[:20].reshape(1, 20, 1)  # noqa: E731
    m, x = Net(f).eval(), _x(3)
    sm, desc = _engine(m, x)
    assert "rms_norm" in desc and "(2 ops: mul, add)" in desc, desc
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(sm(x), ref, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("eps", [None, 1e-5])
def test_nn_rmsnorm_converts_to_the_same_layer(eps):
    """``aten::rms_norm`` (nn.RMSNorm; eps None: float32's epsilon, as torch) is the same layer."""
    m, x = nn.Sequential(nn.RMSNorm(N, eps=eps), nn.ReLU()).eval(), _x(4) * 1e-3
    with torch.no_grad():
        m[0].weight.copy_(torch.randn(N, generator=torch.Generator().manual_seed(5)))
        ref = m(x).numpy()
    sm, desc = _engine(m, x)
    assert f"rms_norm -> 2x20x{N}" in desc, desc
    np.testing.assert_allclose(sm(x), ref, rtol=2e-6, atol=2e-6)

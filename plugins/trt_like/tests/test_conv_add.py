"""The conv + add fusion (``builder/fusion.py``'s ``fuse_conv_add``) against torch: a linear
bottleneck's project conv (1x1, depthwise, dense 3x3) takes the block input as its residual, on
either side of the add, batch 1 and 2; convs with an activation, an add of another shape, a conv
output read twice and an add of the conv with itself stay as they are."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn


class Bottleneck(nn.Module):
    def __init__(self, c, conv, left=True, act=None, twice=False, self_add=False):
        super().__init__()
        self.pre = nn.Conv2d(3, c, 3, padding=1)
        self.conv = conv
        self.act, self.left, self.twice, self.self_add = act, left, twice, self_add

    def forward(self, x):
        x = torch.relu(self.pre(x))
        y = self.conv(x)
        if self.act is not None:
            y = self.act(y)
        if self.self_add:
            return y + y
        out = x + y if self.left else y + x
        return (out, y * 2) if self.twice else out


def _engine(m, x):
    model = srcore.from_torchscript(torch.jit.trace(m, x), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu")))
    return sm, "\n".join(e.description for e in sm.partition.engines)


def _check(m, x):
    sm, desc = _engine(m, x)
    with torch.no_grad():
        want = m(x)
    got = sm(x.numpy())
    for g, w in zip(got if isinstance(want, tuple) else [got], want if isinstance(want, tuple) else [want]):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
    return desc


@pytest.mark.parametrize("conv, left, n", [
    (lambda c: nn.Conv2d(c, c, 1), True, 1),
    (lambda c: nn.Conv2d(c, c, 1, bias=False), False, 2),
    (lambda c: nn.Conv2d(c, c, 3, padding=1, groups=c), True, 2),
    (lambda c: nn.Conv2d(c, c, 3, padding=1), False, 1),
])
def test_the_add_becomes_the_convs_residual_and_matches_torch(conv, left, n):
    torch.manual_seed(n)
    m = Bottleneck(24, conv(24), left).eval()
    desc = _check(m, torch.randn(n, 3, 14, 14))
    assert "fused_pointwise" not in desc and desc.count("conv ->") == 2, desc


@pytest.mark.parametrize("kw", [dict(act=nn.Hardswish()), dict(twice=True), dict(self_add=True)])
def test_convs_the_fusion_must_leave_alone(kw):
    torch.manual_seed(3)
    m = Bottleneck(16, nn.Conv2d(16, 16, 1), **kw).eval()
    desc = _check(m, torch.randn(1, 3, 7, 7))
    assert "fused_pointwise" in desc, desc


class CausalBlock1d(nn.Module):
    """A TCN block: causal dilated conv1d + relu, grouped 1x1 conv1d, residual add, relu."""

    def __init__(self, c, dilation):
        super().__init__()
        self.pad = 2 * dilation
        self.conv = nn.Conv1d(c, c, 3, dilation=dilation)
        self.group = nn.Conv1d(c, c, 1, groups=4)

    def forward(self, x):
        y = torch.relu(self.conv(torch.nn.functional.pad(x, (self.pad, 0))))
        return torch.relu(x + self.group(y))


def test_1d_convs_take_relu_and_the_residual_add_through_their_views():
    """A 1-D conv's relu and its residual add then relu (read through the (N, C, 1, L) -> (N, C, L)
    view) go into the convs, and the causal left padding into the dilated conv (a ``conv1d``
    layer): no pointwise or pad layer is left, and the engine matches torch."""
    torch.manual_seed(4)
    m = nn.Sequential(CausalBlock1d(8, 1), CausalBlock1d(8, 2)).eval()
    x = torch.randn(2, 8, 37)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu")))
    desc = "\n".join(e.description for e in sm.partition.engines)
    assert "fused_pointwise" not in desc and "pad" not in desc, desc
    assert desc.count("conv1d -> ") == 2 and desc.count("conv -> ") == 2, desc
    with torch.no_grad():
        np.testing.assert_allclose(sm(x.numpy()), m(x).numpy(), rtol=1e-4, atol=1e-5)

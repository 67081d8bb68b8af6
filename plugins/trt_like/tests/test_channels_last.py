"""Channels-last MLP blocks run in NCHW (builder/channels_last.py) and ConvNeXt's written-out
channels-first layer norm as one ``channel_norm`` layer (builder/norm_fusion.py): the permutes go,
the linears are 1x1 convs (GELU, bias and layer scale carried by them), and the results match
torch with the compiled and the numpy channel norm; regions that are not per-position stay."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

C = 24


class Block(nn.Module):
    """ConvNeXt's block: depthwise 7x7, then LayerNorm / Linear / GELU / Linear / layer scale over
    the channels of each position in NHWC, back to NCHW and the residual."""

    def __init__(self, scale: bool = True):
        super().__init__()
        self.dw = nn.Conv2d(C, C, 7, padding=3, groups=C)
        self.norm = nn.LayerNorm(C, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.gamma = nn.Parameter(torch.rand(C) + 0.5) if scale else None

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.norm(y))))
        if self.gamma is not None:
            y = self.gamma * y
        return x + y.permute(0, 3, 1, 2)


class ChannelsFirstNorm(nn.Module):
    """ConvNeXt's LayerNorm(data_format="channels_first"), written out (``twice``: ``x - u`` spelled
    twice, as ConvNeXt does, else once)."""

    def __init__(self, twice: bool, affine: bool = True):
        super().__init__()
        self.twice, self.affine = twice, affine
        self.w, self.b = nn.Parameter(torch.rand(C) + 0.5), nn.Parameter(torch.randn(C))

    def forward(self, x):
        x = torch.relu(x)
        u = x.mean(1, keepdim=True)
        d = x - u
        s = ((x - u) if self.twice else d).pow(2).mean(1, keepdim=True)
        y = d / torch.sqrt(s + 1e-6)
        if self.affine:
            y = self.w[:, None, None] * y + self.b[:, None, None]
        return y + 1.0


def _engine(m, x, exclude=()):
    model = srcore.from_torchscript(torch.jit.trace(m, (x,)), (x,))
    opts = srcore.Options(backends=("trt_like", "cpu"),
                          engine_options={"exclude_tactics": ["segment", *exclude], "timing": False})
    sm = srcore.StaticModule(model, options=opts)
    return sm, "\n".join(e.description for e in sm.partition.engines)


def _x(seed=0, shape=(2, C, 5, 6)):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 2.0


def _check(sm, m, x, tol=2e-5):
    with torch.no_grad():
        ref = m(x)
    got = sm(x)
    for g, r in zip(got if isinstance(ref, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
        np.testing.assert_allclose(g, r.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("tactic", ["numba", "numpy"])
def test_convnext_block_runs_in_nchw_and_matches_torch(tactic):
    torch.manual_seed(0)
    m, x = Block().eval(), _x()
    sm, desc = _engine(m, x, exclude=["numpy" if tactic == "numba" else "numba"])
    assert "permute" not in desc and "gemm" not in desc and "layer_norm" not in desc, desc
    assert f"channel_norm -> 2x{C}x5x6 [{tactic}]" in desc and "conv + gelu" in desc, desc
    assert "fused_pointwise" not in desc, desc   # (bias, GELU, layer scale and residual all in the convs)
    _check(sm, m, x)


def test_a_region_with_a_reduction_over_channels_stays():
    """A mean over the last dim is not per-position work: the permutes and the gemm stay."""
    class Net(Block):
        def forward(self, x):
            y = self.norm(x.permute(0, 2, 3, 1))
            y = self.fc2(F.gelu(self.fc1(y - y.mean(-1, keepdim=True))))
            return x + y.permute(0, 3, 1, 2)
    torch.manual_seed(1)
    m, x = Net().eval(), _x(1)
    sm, desc = _engine(m, x)
    assert "permute" in desc and "channel_norm" not in desc, desc
    _check(sm, m, x)


def test_a_returned_nhwc_tensor_keeps_its_region():
    """The NHWC tensor is also an engine output: nothing is rewritten, both results match."""
    class Net(Block):
        def forward(self, x):
            y = self.norm(x.permute(0, 2, 3, 1))
            return y, self.fc1(y).permute(0, 3, 1, 2)
    torch.manual_seed(2)
    m, x = Net().eval(), _x(2)
    sm, desc = _engine(m, x)
    assert "channel_norm" not in desc, desc
    _check(sm, m, x)


@pytest.mark.parametrize("twice,affine", [(True, True), (False, False)])
def test_written_out_channels_first_norm_is_one_layer(twice, affine):
    torch.manual_seed(3)
    m, x = ChannelsFirstNorm(twice, affine).eval(), _x(3, (1, C, 4, 7))
    sm, desc = _engine(m, x)
    assert f"channel_norm -> 1x{C}x4x7" in desc and "mean" not in desc and "sqrt" not in desc, desc
    _check(sm, m, x)


def test_a_channels_first_norm_over_another_dim_stays():
    """The variance over dim 2, not the channels: no channel norm, still torch's result."""
    class Net(ChannelsFirstNorm):
        def forward(self, x):
            u = x.mean(1, keepdim=True)
            return (x - u) / torch.sqrt((x - u).pow(2).mean(2, keepdim=True) + 1e-6)
    m, x = Net(True).eval(), _x(4, (1, C, 4, 7))
    sm, desc = _engine(m, x)
    assert "channel_norm" not in desc, desc
    _check(sm, m, x)


def test_the_onnx_export_of_the_written_out_norm_is_one_engine(tmp_path):
    """ONNX writes ``.pow(2)`` as ``Pow`` with a one-element exponent tensor (aten::pow.Tensor_Tensor
    after import): the engine takes it, and the norm is still one layer."""
    torch.manual_seed(5)
    m, x = ChannelsFirstNorm(True).eval(), _x(5, (1, C, 4, 7))
    f = str(tmp_path / "m.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (x,), f, dynamo=False, opset_version=17)
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={"exclude_tactics": ["segment"], "timing": False})
    sm = srcore.StaticModule(srcore.from_onnx(f), options=opts)
    desc = "\n".join(e.description for e in sm.partition.engines)
    assert not sm.partition.refused and f"channel_norm -> 1x{C}x4x7" in desc, (sm.partition.refused, desc)
    _check(sm, m, x)

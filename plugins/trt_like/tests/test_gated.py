"""Gates in trt_like engines: ``aten::glu`` (two slices and a sigmoid-multiply, inside the engine)
and ``x * sigmoid(x)`` written out (one SiLU, carried by the conv before it), against torch."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
F = torch.nn.functional


class ConvModule(torch.nn.Module):
    """A conformer convolution module on (B, T, C): pointwise conv1d -> GLU over channels -> depthwise
    conv1d -> BatchNorm1d -> hand-written Swish -> pointwise conv1d; then a GLU over the last dim
    and a Swish whose sigmoid is read twice (no SiLU made of it)."""

    def __init__(self):
        super().__init__()
        c = 8
        self.pw1 = torch.nn.Conv1d(c, 2 * c, 1)
        self.dw = torch.nn.Conv1d(c, c, 5, padding=2, groups=c)
        self.bn = torch.nn.BatchNorm1d(c)
        self.pw2 = torch.nn.Conv1d(c, 2 * c, 1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = F.glu(self.pw1(x.transpose(1, 2)), dim=1)
        y = self.bn(self.dw(y))
        y = y * torch.sigmoid(y)
        z = F.glu(self.pw2(y).transpose(1, 2), dim=-1)
        s = torch.sigmoid(z)
        return z * s + s


def test_glu_and_a_written_out_swish_stay_in_one_engine_like_torch():
    torch.manual_seed(0)
    m = ConvModule().eval()
    x = 2 * torch.randn(2, 11, 8)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    with torch.no_grad():
        want = m(x).numpy()
    # the layers, not a compiled run of them (tactics/segment.py)
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={"exclude_tactics": ["segment"]})
    sm = srcore.StaticModule(model, options=opts)
    engines = sm.partition.engines
    assert [e.backend for e in engines] == ["trt_like"], [e.backend for e in engines]
    desc = engines[0].description
    assert "conv + silu ->" in desc, desc          # the depthwise conv (its batch norm folded) carries it
    assert desc.count("strided") == 4, desc        # two GLUs, two halves each
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


@pytest.mark.one_pass   # the network rewrite alone
def test_fuse_swish_takes_only_a_sigmoid_read_by_its_own_mul():
    from srcore_trt_like.builder.fusion import fuse_swish
    from srcore_trt_like.builder.network import Network

    net = Network()
    x = net.new_tensor((2, 3))
    net.inputs = [x]
    s = net.add("pointwise", [x], (2, 3), op="sigmoid", args=(("in", 0),), params={})
    y = net.add("pointwise", [s, x], (2, 3), op="mul", args=(("in", 0), ("in", 1)), params={})
    s2 = net.add("pointwise", [y], (2, 3), op="sigmoid", args=(("in", 0),), params={})
    z = net.add("pointwise", [y, s2], (2, 3), op="mul", args=(("in", 0), ("in", 1)), params={})
    net.outputs = [z, s2]          # s2 is returned too: its sigmoid stays
    fuse_swish(net)
    assert [(layer.attrs["op"], layer.inputs) for layer in net.layers] == [
        ("silu", [x]), ("sigmoid", [y]), ("mul", [y, s2])]
    assert net.layers[0].outputs == [y]

"""Conv-TasNet's layers in one trt_like engine, against torch: PReLU with one slope (a leaky relu
the conv before it carries), with one per channel (a constant or a computed weight), ``clamp_min``
/ ``clamp_max``, and 1-D transposed convs (2-D layers on (N, C, 1, L) views)."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
F = torch.nn.functional


class TasNetLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Conv1d(4, 12, 1)
        self.p1 = torch.nn.PReLU(init=0.3)
        self.dw = torch.nn.Conv1d(12, 12, 3, padding=2, dilation=2, groups=12)
        self.p2 = torch.nn.PReLU(12)
        self.dec = torch.nn.ConvTranspose1d(12, 2, 8, stride=4, bias=False)
        self.dec2 = torch.nn.ConvTranspose1d(12, 4, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2)
        with torch.no_grad():
            self.p2.weight.uniform_(-0.5, 0.5)

    def forward(self, x, w):
        y = self.p2(self.dw(self.p1(self.inp(x))))
        z = F.prelu(y.clamp_min(-1.0), w).clamp_max(2.0)
        return self.dec(z), self.dec2(y)


def test_tasnet_layers_run_in_one_engine_like_torch():
    torch.manual_seed(3)
    m = TasNetLayers().eval()
    x, w = torch.randn(2, 4, 21), torch.rand(12) - 0.5
    model = srcore.from_torchscript(torch.jit.script(m), (x, w))
    with torch.no_grad():
        want = [t.numpy() for t in m(x, w)]
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"), engine_options={"timing": False}))
    assert [e.backend for e in sm.partition.engines] == ["trt_like"]
    desc = sm.partition.engines[0].description
    assert "conv + leaky_relu ->" in desc and desc.count("conv_transpose") == 2, desc
    for got, ref in zip(sm(x.numpy(), w.numpy()), want):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)

"""pixel_shuffle / pixel_unshuffle / repeat of quantized tensors keep their parameters (found by the seventh
held-out zoo: an FX-quantized ESRGAN tail ran the cpu plugin's shuffle on the stored integers, which
dropped the parameters, and ``aten::dequantize`` passed the bare uint8 values through as the output)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional


class _Shuffles(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 12, 3, 1, 1)
        self.d = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        up = F.pixel_shuffle(self.c(x), 2)             # (1, 3, 8, 12)
        return up, F.pixel_unshuffle(self.d(up), 2).repeat(2, 1, 1, 2)    # (2, 16, 4, 12)


def _fx_quantized():
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.manual_seed(0)
    m = _Shuffles().eval()
    x = torch.randn(1, 3, 4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_fx(m, tq.get_default_qconfig_mapping("fbgemm"), (x,))
        with torch.no_grad():
            for s in range(3):
                prepared(torch.randn(1, 3, 4, 6, generator=torch.Generator().manual_seed(s)))
        return torch.jit.script(convert_fx(prepared)), x


def test_quantized_pixel_shuffle_and_unshuffle_match_torch_bit_for_bit():
    before = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "fbgemm"
        ts, x = _fx_quantized()
        with torch.no_grad():
            want = [t.numpy() for t in ts(x)]
        sm = srcore.StaticModule(srcore.from_torchscript(ts, (x,)))
    finally:
        torch.backends.quantized.engine = before
    shuffles = [pn for pn in sm.top.nodes if "pixel_" in str(pn.node.kind) or "repeat" in str(pn.node.kind)]
    assert len(shuffles) == 3 and all(pn.fn.backend == "quantized_cpu" for pn in shuffles)
    got = sm(x.numpy())
    assert len(got) == 2
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_dequantize_refuses_plain_integers():
    from srcore_quantized.kernels.convert import dequantize_out

    with pytest.raises(srcore.plugin.KernelError, match="plain uint8 array, not a quantized tensor"):
        dequantize_out(np.arange(4, dtype=np.uint8))
    x = np.arange(4, dtype=np.float32)   # a float tensor passes as torch returns it
    assert dequantize_out(x) is x

"""The ``conv1d_simd`` tactic (``tactics/conv1d.py``) against torch: dense and grouped 1-D convs,
strided, dilated, padded on both sides or on the left only (a folded ``pad``), with relu, another
activation and a residual, rows on and off its two-vector blocks; where it applies; a slice of a
whole dim is a view in the engine."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.tactics import conv1d

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _layer(x_shape, w, b, pads, dilation, groups, relu, residual, kind="conv", stride=1, act="none"):
    net = Network()
    x = net.new_tensor(x_shape)
    attrs = dict(weight=w, bias=b, stride=(1, stride), padding=(0, pads[0] if kind == "conv" else 0),
                 dilation=(1, dilation), groups=groups, relu=relu, residual=residual, activation=act)
    if kind == "conv1d":
        attrs["pads"] = pads
    return Layer(kind, [x], [net.new_tensor((1,))], attrs), net


ACTS = {"none": lambda y: y, "gelu": F.gelu, "silu": F.silu, "leaky_relu": lambda y: F.leaky_relu(y, 0.01)}


@pytest.mark.parametrize("n, c, o, k, length, pads, dilation, groups, relu, residual, kind, stride, act", [
    (2, 16, 16, 3, 37, (1, 1), 2, 1, True, False, "conv", 1, "none"),      # dense, padded, one partial block
    (1, 12, 8, 1, 50, (0, 0), 1, 2, True, True, "conv", 1, "none"),        # grouped 1x1 with the residual
    (2, 16, 16, 3, 100, (8, 0), 4, 1, False, False, "conv1d", 1, "none"),  # causal: left padding only
    (2, 1, 8, 10, 203, (0, 0), 1, 1, False, False, "conv", 5, "gelu"),     # wav2vec's first: k10 s5, 1 channel
    (2, 8, 12, 3, 61, (1, 1), 1, 1, False, True, "conv", 2, "silu"),       # k3 s2 padded, residual then SiLU
    (1, 8, 8, 3, 40, (4, 1), 2, 2, False, False, "conv1d", 3, "leaky_relu"),   # folded pad, s3, dilated
])
def test_conv1d_simd_matches_torch(n, c, o, k, length, pads, dilation, groups, relu, residual, kind, stride, act):
    rng = np.random.default_rng(length)
    x = rng.standard_normal((n, c, 1, length), dtype=np.float32)
    w = rng.standard_normal((o, c // groups, 1, k), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32)
    want = F.conv1d(F.pad(torch.from_numpy(x[:, :, 0]), pads), torch.from_numpy(w[:, :, 0]), torch.from_numpy(b),
                    stride=stride, dilation=dilation, groups=groups)
    res = rng.standard_normal(want.shape, dtype=np.float32)[:, :, None]
    if residual:
        want = want + torch.from_numpy(res[:, :, 0])
    if relu:
        want = torch.relu(want)
    want = ACTS[act](want)
    layer, net = _layer(x.shape, w, b, pads, dilation, groups, relu, residual, kind, stride, act)
    (cand,) = conv1d.candidates(layer, net)
    y = np.full((n, o, 1, want.shape[-1]), np.nan, np.float32)
    kern = cand.build()
    kern.fn(*((x, res, y) if residual else (x, y)))
    np.testing.assert_allclose(y[:, :, 0], want.numpy(), rtol=1e-4, atol=1e-4)
    again = conv1d.candidates(layer, net)[0].restore(kern.layout)   # a serialized plan's weights
    y2 = np.empty_like(y)
    again.fn(*((x, res, y2) if residual else (x, y2)))
    np.testing.assert_array_equal(y2, y)


def test_conv1d_simd_applies_to_1d_convs_in_blocks_of_4_only():
    w = np.zeros((16, 16, 1, 3), np.float32)
    assert conv1d.applies(*_layer((1, 16, 1, 40), w, None, (1, 1), 1, 1, False, False))
    assert conv1d.applies(*_layer((1, 16, 1, 40), w, None, (1, 1), 1, 1, False, False, stride=2, act="gelu"))
    assert not conv1d.applies(*_layer((1, 12, 1, 40), np.zeros((6, 12, 1, 3), np.float32), None, (1, 1), 1, 1,
                                      False, False))        # 6 output channels: no block of 4
    assert not conv1d.applies(*_layer((1, 16, 5, 40), np.zeros((16, 16, 3, 3), np.float32), None, (1, 1), 1, 1,
                                      False, False))        # a 2-D conv


def test_a_slice_of_a_whole_dim_is_a_view():
    class Last(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)[:, :, -1] * 2

    x = torch.randn(2, 3, 9)
    # layer by layer (a network this small may otherwise be compiled whole: tactics/segment.py)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(Last()), (x,)),
                             options=srcore.Options(backends=("trt_like", "cpu"),
                                                    engine_options={"exclude_tactics": ("segment",)}))
    desc = "\n".join(e.description for e in sm.partition.engines)
    assert desc.count("strided") == 1, desc
    np.testing.assert_allclose(sm(x.numpy()), (torch.relu(x)[:, :, -1] * 2).numpy(), rtol=1e-6)

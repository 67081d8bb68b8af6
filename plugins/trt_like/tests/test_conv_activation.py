"""hardswish / hardsigmoid / SiLU / sigmoid carried by a trt_like conv layer (``ConvSpec.activation``): every
conv tactic against torch (float64) for each activation, the fusion pass's rule, and engines."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore_trt_like.conv import ConvSpec
from srcore_trt_like.conv.tactics import conv_tactic_builders
from srcore_trt_like.errors import TacticSpecError

torch = pytest.importorskip("torch")
F = torch.nn.functional

ACTS = {"hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "silu": F.silu, "sigmoid": torch.sigmoid}

# shapes picked so that together they offer every conv tactic (asserted below)
SPECS = [
    dict(x_shape=(1, 16, 12, 12), out_channels=24, kernel=1),                          # 1x1
    dict(x_shape=(2, 8, 13, 11), out_channels=16, kernel=3, padding=1),                # 3x3 dense
    dict(x_shape=(1, 12, 15, 15), out_channels=12, kernel=3, stride=2, padding=1, groups=12),   # depthwise s2
    dict(x_shape=(1, 16, 9, 9), out_channels=16, kernel=5, padding=2, groups=16),      # depthwise 5x5
    dict(x_shape=(1, 8, 10, 10), out_channels=8, kernel=3, padding=1, groups=2),       # grouped
]


def _reference(spec, x, w, b, act):
    t = lambda a: torch.from_numpy(np.asarray(a, np.float64))  # noqa: E731
    y = F.conv2d(t(x), t(w), t(b), spec.stride, spec.padding, spec.dilation, spec.groups)
    return ACTS[act](y).numpy()


@pytest.mark.parametrize("act", sorted(ACTS))
def test_every_conv_tactic_applies_the_activation_like_torch(act):
    seen = set()
    for i, kw in enumerate(SPECS):
        spec = ConvSpec(**kw, activation=act)
        rng = np.random.default_rng(i)
        x = (3 * rng.standard_normal(spec.x_shape)).astype(np.float32)     # both sides of the kinks at +-3
        w = (rng.standard_normal(spec.weight_shape) / np.sqrt(np.prod(spec.weight_shape[1:]))).astype(np.float32)
        b = rng.standard_normal(spec.out_channels).astype(np.float32)
        want = _reference(spec, x, w, b, act)
        for name, build in conv_tactic_builders(spec, w, b):
            out = np.full(spec.out_shape, np.nan, np.float32)
            build()(x, out)
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} {kw}")
            seen.add(name)
    assert {"gemm_1x1", "im2col_gemm", "depthwise_direct", "depthwise_channels_last",
            "depthwise_simd", "pointwise_simd"} <= seen, seen


def test_a_spec_with_relu_and_an_activation_or_an_unknown_one_is_an_error():
    with pytest.raises(TacticSpecError, match="relu and activation"):
        ConvSpec((1, 2, 5, 5), 2, 3, relu=True, activation="silu")
    with pytest.raises(TacticSpecError, match="'gelu' is not one of"):
        ConvSpec((1, 2, 5, 5), 2, 3, activation="gelu")


class Block(torch.nn.Module):
    """A MobileNetV3-like block: 1x1 + hardswish, depthwise + SiLU, squeeze-excite's hardsigmoid, a
    conv whose output two layers read (not fused) and a conv + SiLU feeding a max pool."""
    def __init__(self):
        super().__init__()
        self.expand = torch.nn.Conv2d(8, 16, 1)
        self.dw = torch.nn.Conv2d(16, 16, 3, 2, 1, groups=16)
        self.fc1 = torch.nn.Conv2d(16, 4, 1)
        self.fc2 = torch.nn.Conv2d(4, 16, 1)
        self.shared = torch.nn.Conv2d(16, 8, 1)
        self.last = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = F.silu(self.dw(F.hardswish(self.expand(x))))
        s = F.hardsigmoid(self.fc2(torch.relu(self.fc1(F.adaptive_avg_pool2d(y, 1)))))
        z = self.shared(y * s)
        z = F.hardswish(z) + z
        return F.max_pool2d(F.silu(self.last(z)), 2)


def test_engines_carry_the_activation_in_the_conv_and_match_torch():
    torch.manual_seed(0)
    m = Block().eval()
    x = 3 * torch.randn(1, 8, 14, 14)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    with torch.no_grad():
        want = m(x).numpy()
    for fusion in (True, False):
        sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                               engine_options={"fusion": fusion}))
        engines = [e for e in sm.partition.engines if e.backend == "trt_like"]
        assert len(engines) == 1
        desc = engines[0].description
        # expand, dw and last carry theirs (fc2 its hardsigmoid, then the squeeze-excite block
        # is one layer); shared's output is read twice
        for act in ("hardswish", "silu"):
            assert (f"conv + {act} ->" in desc) == fusion, desc
        assert ("squeeze_excite" in desc) == fusion
        assert desc.count("fused_pointwise") == (1 if fusion else 7), desc
        np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)

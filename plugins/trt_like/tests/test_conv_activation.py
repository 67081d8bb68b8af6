"""hardswish / hardsigmoid / SiLU / sigmoid / GELU / leaky relu / relu6 carried by a trt_like conv layer
(``ConvSpec.activation``): every conv tactic against torch (float64) for each activation, the fusion
pass's rule, and engines (2-D convs, and 1-D convs as 2-D layers on views)."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore_trt_like.conv import ConvSpec
from srcore_trt_like.conv.tactics import conv_tactic_builders
from srcore_trt_like.errors import TacticSpecError

torch = pytest.importorskip("torch")
F = torch.nn.functional

ACTS = {"hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "silu": F.silu, "sigmoid": torch.sigmoid,
        "gelu": F.gelu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
        "leaky_relu": lambda y: F.leaky_relu(y, 0.15), "relu6": F.relu6}
#: the ConvSpec fields of each activation besides its name
ACT_KW = {"leaky_relu": {"negative_slope": 0.15}}

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


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("act", sorted(ACTS))
def test_every_conv_tactic_applies_the_activation_like_torch(act):
    seen = set()
    for i, kw in enumerate(SPECS):
        spec = ConvSpec(**kw, activation=act, **ACT_KW.get(act, {}))
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


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_a_spec_with_relu_and_an_activation_or_an_unknown_one_is_an_error():
    with pytest.raises(TacticSpecError, match="relu and activation"):
        ConvSpec((1, 2, 5, 5), 2, 3, relu=True, activation="silu")
    with pytest.raises(TacticSpecError, match="'mish' is not one of"):
        ConvSpec((1, 2, 5, 5), 2, 3, activation="mish")


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


class Conv1dNet(torch.nn.Module):
    """wav2vec-style 1-D convs: strided, padded, dilated, grouped, with and without bias; GELU (erf
    and tanh), leaky relu and a group norm between; one conv output read twice (not fused)."""
    def __init__(self):
        super().__init__()
        self.c0 = torch.nn.Conv1d(2, 12, 10, 5, bias=False)
        self.norm = torch.nn.GroupNorm(4, 12)
        self.c1 = torch.nn.Conv1d(12, 12, 3, 2, padding=1, groups=3)
        self.c2 = torch.nn.Conv1d(12, 16, 3, 1, padding=2, dilation=2)
        self.c3 = torch.nn.Conv1d(16, 8, 2, 2)

    def forward(self, x):
        y = F.gelu(self.norm(self.c0(x)))
        y = F.gelu(self.c1(y), approximate="tanh")
        y = F.leaky_relu(self.c2(y), 0.2)
        z = self.c3(y)
        return F.gelu(z) + z


def test_1d_convs_run_in_engines_with_their_activations_like_torch():
    torch.manual_seed(1)
    m = Conv1dNet().eval()
    x = torch.randn(2, 2, 203)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    with torch.no_grad():
        want = m(x).numpy()
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu")))
    engines = [e for e in sm.partition.engines if e.backend == "trt_like"]
    assert len(engines) == 1 and len(sm.partition.engines) == 1, [e.backend for e in sm.partition.engines]
    desc = engines[0].description
    # c1's and c2's activations read their convs through the (N, C, 1, L) -> (N, C, L) view
    for act in ("gelu_tanh", "leaky_relu"):
        assert f"conv + {act} ->" in desc, desc
    assert desc.count("conv ->") == 2, desc       # c0 (a group norm reads it) and c3 (read twice)
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("act", sorted(ACTS))
def test_a_tactic_fusing_the_activation_gives_the_bits_of_the_separate_pass(act):
    """The GEMM tactics' epilogue (every activation) and the SIMD tactics' stores (leaky relu) against
    the same tactic without the activation, then the in-place kernel the other tactics use."""
    from srcore_trt_like.kernels.activation import in_place

    fused = set()
    for i, kw in enumerate(SPECS):
        spec = ConvSpec(**kw, activation=act, **ACT_KW.get(act, {}))
        plain = ConvSpec(**kw)
        rng = np.random.default_rng(10 + i)
        x = (3 * rng.standard_normal(spec.x_shape)).astype(np.float32)
        w = (rng.standard_normal(spec.weight_shape) / np.sqrt(np.prod(spec.weight_shape[1:]))).astype(np.float32)
        b = rng.standard_normal(spec.out_channels).astype(np.float32)
        plains = dict(conv_tactic_builders(plain, w, b))
        for name, build in conv_tactic_builders(spec, w, b):
            tactic = build()
            if act not in tactic.fused_activations:
                continue
            got = np.empty(spec.out_shape, np.float32)
            tactic(x, got)
            want = np.empty(spec.out_shape, np.float32)
            plains[name]()(x, want)
            in_place(act, spec.negative_slope)(want)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {kw}")
            fused.add(name)
    assert {"gemm_1x1", "im2col_gemm"} <= fused, fused
    if act == "leaky_relu":
        assert {"simd_direct", "depthwise_simd"} <= fused, fused
    if act == "relu6":   # (the SIMD kernels' clamp)
        assert {"depthwise_simd", "depthwise_simd_blocked", "pointwise_simd"} <= fused, fused


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("act", ["hardswish", "hardsigmoid"])
def test_depthwise_simd_fuses_hard_activations_into_its_stores_with_the_separate_pass_bits(act):
    """``depthwise_simd`` applies hardswish / hardsigmoid in its vector stores (no pass after it):
    the same bits as the same kernel without them followed by the in-place activation."""
    from srcore_trt_like.conv.depthwise import DepthwiseSimdTactic
    from srcore_trt_like.kernels import activation as _activation

    assert act in DepthwiseSimdTactic.fused_activations
    for kw in (SPECS[2], SPECS[3]):
        rng = np.random.default_rng(7)
        plain = ConvSpec(**kw)
        x = (3 * rng.standard_normal(plain.x_shape)).astype(np.float32)
        w = rng.standard_normal(plain.weight_shape).astype(np.float32)
        b = rng.standard_normal(plain.out_channels).astype(np.float32)
        want = np.empty(plain.out_shape, np.float32)
        DepthwiseSimdTactic(plain, w, b)(x, want)
        _activation.in_place(act, 0.0)(want)
        out = np.full(plain.out_shape, np.nan, np.float32)
        DepthwiseSimdTactic(ConvSpec(**kw, activation=act), w, b)(x, out)
        np.testing.assert_array_equal(out, want)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("act", ["silu", "sigmoid", "gelu", "gelu_tanh"])
def test_wide_in_place_twins_give_the_same_bits_like_torch(act):
    """The 512-bit twin of each transcendental in-place activation (one of the two is chosen by
    timing) gives the bits of the default-width kernel on a sweep and special values, both close
    to float64 torch; ``in_place`` uses one of them."""
    from srcore_trt_like.kernels import activation as A

    narrow = A._KERNELS[act]
    x = np.concatenate([np.linspace(-20, 20, 100_003), [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40]]).astype(np.float32)
    a, b = x.copy(), x.copy()
    narrow(a)
    A.WIDE[narrow](b)
    np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))
    want = ACTS[act](torch.from_numpy(x[:-6].astype(np.float64))).numpy()
    np.testing.assert_allclose(a[:-6], want, rtol=2e-6, atol=1e-6)
    assert A._fastest(narrow) in (narrow, A.WIDE[narrow])

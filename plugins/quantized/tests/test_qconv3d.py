"""Quantized 3-d convolutions and 1-d / 3-d transposed ones (``quantized::conv3d(_relu)``,
``conv_transpose1d``, ``conv_transpose3d``; ``nn.quantized.Conv3d``, ``ConvReLU3d``, ``ConvTranspose1d/3d``):
the kernels bit for bit against ``torch.ops.quantized.*`` (fbgemm; conv3d with oneDNN too), and whole
models imported frozen, scripted and FX-quantized.

Activations stay within 7 bits (0..127) as in ``test_kernels.py``: fbgemm's AVX2 kernels saturate int16
pairs of products beyond that, srcore accumulates exactly.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore_quantized.kernels import conv
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]
EXAMPLES = settings(max_examples=10, deadline=None)


def _same(got, ref):
    assert got.qparams == srq(ref).qparams
    np.testing.assert_array_equal(got.int_repr(), ref.int_repr().numpy())


def _x(shape, seed, zp):
    g = torch.Generator().manual_seed(seed)
    return torch._make_per_tensor_quantized_tensor(torch.randint(0, 128, shape, dtype=torch.uint8, generator=g),
                                                   0.05, zp)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.usefixtures("fbgemm")
@EXAMPLES
@given(groups=st.sampled_from([1, 2, "dw"]), mult=st.integers(1, 2), dhw=st.tuples(*[st.integers(2, 6)] * 3),
       k=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2)), stride=st.integers(1, 2),
       pad=st.integers(0, 1), dil=st.integers(1, 2), relu=st.booleans(), per_channel=st.booleans(),
       seed=st.integers(0, 2 ** 16), x_zp=st.integers(0, 60))
def test_conv3d(groups, mult, dhw, k, stride, pad, dil, relu, per_channel, seed, x_zp):
    c = 4
    g = c if groups == "dw" else groups
    cout = g * mult
    if any(s + 2 * pad - dil * (kk - 1) - 1 < 0 for s, kk in zip(dhw, k)):
        return
    gen = torch.Generator().manual_seed(seed)
    x = _x((2, c) + dhw, seed, x_zp)
    wf = torch.randn((cout, c // g) + k, generator=gen)
    if per_channel:
        w = torch.quantize_per_channel(wf, torch.rand(cout, generator=gen, dtype=torch.float64) * 0.05 + 0.005,
                                       torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
    else:
        w = torch.quantize_per_tensor(wf, 0.02, 0, torch.qint8)
    b = torch.randn(cout, generator=gen)
    settings_ = ([stride] * 3, [pad] * 3, [dil] * 3)
    packed = torch.ops.quantized.conv3d_prepack(w, b, *settings_, g)
    fn, ref = (conv.qconv_relu_out, torch.ops.quantized.conv3d_relu) if relu else \
        (conv.qconv_out, torch.ops.quantized.conv3d)
    _same(fn(srq(x), srq(w), b.numpy(), *settings_, g, 0.3, 40), ref(x, packed, 0.3, 40))


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_conv3d_with_onednn_arithmetic():
    """oneDNN requantizes otherwise (``arith="onednn"``); a conv3d packed for it matches too."""
    if "onednn" not in torch.backends.quantized.supported_engines:
        pytest.skip("torch has no onednn quantized engine")
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "onednn"
    try:
        for seed in range(4):
            gen = torch.Generator().manual_seed(seed)
            x = _x((2, 4, 5, 6, 7), seed, 0)
            w = torch.quantize_per_channel(torch.randn(6, 2, 3, 2, 2, generator=gen),
                                           torch.rand(6, generator=gen, dtype=torch.float64) * 0.05 + 0.01,
                                           torch.zeros(6, dtype=torch.long), 0, torch.qint8)
            b = torch.randn(6, generator=gen)
            packed = torch.ops.quantized.conv3d_prepack(w, b, [1, 2, 1], [1, 0, 1], [1, 1, 2], 2)
            _same(conv.qconv_out(srq(x), srq(w), b.numpy(), [1, 2, 1], [1, 0, 1], [1, 1, 2], 2, 0.2, 7, "onednn"),
                  torch.ops.quantized.conv3d(x, packed, 0.2, 7))
    finally:
        torch.backends.quantized.engine = old


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.usefixtures("fbgemm")
@EXAMPLES
@given(dims=st.sampled_from([1, 3]), groups=st.sampled_from([1, 2]), stride=st.integers(1, 2),
       pad=st.integers(0, 1), out_pad=st.integers(0, 1), dil=st.integers(1, 2), seed=st.integers(0, 2 ** 16),
       x_zp=st.integers(0, 60))
def test_conv_transpose1d_and_3d(dims, groups, stride, pad, out_pad, dil, seed, x_zp):
    if out_pad >= max(stride, dil):    # torch: output padding must be smaller than stride or dilation
        return
    gen = torch.Generator().manual_seed(seed)
    sp = (7,) if dims == 1 else (3, 4, 2)
    k = (3,) if dims == 1 else (2, 3, 1)
    if any((i - 1) * stride - 2 * pad + dil * (kk - 1) + 1 + out_pad <= 0 for i, kk in zip(sp, k)):
        return                         # an empty output: torch refuses it
    x = _x((2, 4) + sp, seed, x_zp)
    w = torch.quantize_per_tensor(torch.randn((4, 6 // groups) + k, generator=gen), 0.02, 0, torch.qint8)
    b = torch.randn(6, generator=gen)
    s = ([stride] * dims, [pad] * dims, [out_pad] * dims, [dil] * dims)
    prepack = getattr(torch.ops.quantized, f"conv_transpose{dims}d_prepack")
    packed = prepack(w, b, s[0], s[1], s[2], s[3], groups)
    ref = getattr(torch.ops.quantized, f"conv_transpose{dims}d")(x, packed, 0.3, 40)
    _same(conv.qconv_transpose_out(srq(x), srq(w), b.numpy(), *s, groups, 0.3, 40), ref)


class _Net(torch.nn.Module):
    """A video-like block: conv3d + relu, conv3d, a 3-d transposed conv; a 1-d transposed conv beside."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv3d(3, 6, 3, padding=1)
        self.relu = torch.nn.ReLU()
        self.c2 = torch.nn.Conv3d(6, 6, (1, 3, 3), stride=(1, 2, 2), groups=3)
        self.up = torch.nn.ConvTranspose3d(6, 4, 2, stride=2)
        self.t1 = torch.nn.ConvTranspose1d(5, 3, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x, s):
        return self.up(self.c2(self.relu(self.c1(x)))), self.t1(s)


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(2, 3, 4, 8, 8, generator=g) * 2 - 1, torch.rand(2, 5, 9, generator=g) * 2 - 1


def _eager(net):
    import torch.ao.quantization as tq

    class Q(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q1, self.q2, self.net = tq.QuantStub(), tq.QuantStub(), net
            self.d1, self.d2 = tq.DeQuantStub(), tq.DeQuantStub()

        def forward(self, x, s):
            a, b = self.net(self.q1(x), self.q2(s))
            return self.d1(a), self.d2(b)

    m = Q().eval()
    m.qconfig = tq.get_default_qconfig("x86")
    for name in ("up", "t1"):      # torch quantizes transposed-conv weights per tensor
        getattr(net, name).qconfig = tq.QConfig(activation=m.qconfig.activation, weight=tq.default_weight_observer)
    tq.fuse_modules(net, [["c1", "relu"]], inplace=True)
    tq.prepare(m, inplace=True)
    for seed in range(3):
        m(*_inputs(seed))
    return tq.convert(m, inplace=True)


def _fx(net):
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    prepared = prepare_fx(net, tq.get_default_qconfig_mapping("x86"), _inputs(0))
    for seed in range(3):
        prepared(*_inputs(seed))
    return convert_fx(prepared)


@pytest.mark.usefixtures("x86_engine")
@pytest.mark.parametrize("how", ["eager-frozen", "eager-scripted", "fx-frozen"])
def test_models_import_and_match_torch(how):
    """Refused at import before (``Conv3dPackedParamsBase``, ``conv_transpose1d with packed parameters``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)   # the weights: not whatever RNG state the tests before left (CI saw one step off once)
        net = (_fx if how.startswith("fx") else _eager)(_Net().eval())
        m = torch.jit.script(net)
        if how.endswith("frozen"):
            m = torch.jit.freeze(m.eval())
        x, s = _inputs(7)
        sm = srcore.StaticModule(srcore.from_torchscript(m, (x, s)))
        with torch.no_grad():
            want = net(x, s)
    ran = {pn.node.kind for pn in sm.top.nodes if pn.fn is not None and pn.fn.backend == "quantized_cpu"}
    assert {"quantized::qconv3d_relu", "quantized::qconv3d", "quantized::qconv_transpose3d",
            "quantized::qconv_transpose1d"} <= ran, ran
    for got, ref in zip(sm(x.numpy(), s.numpy()), want):
        np.testing.assert_array_equal(got, ref.numpy())


@pytest.mark.full
@pytest.mark.usefixtures("fbgemm")
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), transposed=st.booleans(), per_channel=st.booleans(), relu=st.booleans(),
       k=st.tuples(*[st.integers(1, 3)] * 3), stride=st.integers(1, 2), bias_mag=st.sampled_from([0.01, 1.0, 30.0]),
       xs=st.floats(0.005, 0.1), ys=st.floats(0.005, 0.3), yz=st.integers(0, 255))
def test_conv3d_and_transposed_many_draws(seed, transposed, per_channel, relu, k, stride, bias_mag, xs, ys, yz):
    """CI on this AMD machine once saw one conv3d model output one step off torch (1 of 2,304, weights from
    an unseeded draw). Not reproduced: 300 draws here (and, by hand, 1,100 kernel draws and 140 seeds of
    the model test) are bit for bit; requantization scales, bias magnitudes and weights vary more than in
    the tests above. 7-bit activations, as the x86 qconfigs make them (fbgemm's AVX2 int16 pair sums)."""
    rng = np.random.default_rng(seed)
    cin, cout = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    x = torch._make_per_tensor_quantized_tensor(
        torch.from_numpy(rng.integers(0, 128, (2, cin, 3, 5, 4)).astype(np.uint8)), xs, int(rng.integers(0, 128)))
    shape = (cin, cout) + k if transposed else (cout, cin) + k
    wf = torch.from_numpy(rng.standard_normal(shape).astype(np.float32) * 0.3)
    if per_channel and not transposed:
        w = torch.quantize_per_channel(wf, torch.from_numpy(rng.uniform(0.001, 0.01, cout)),
                                       torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
    else:
        w = torch.quantize_per_tensor(wf, float(rng.uniform(0.001, 0.01)), 0, torch.qint8)
    b = torch.from_numpy((rng.standard_normal(cout) * bias_mag).astype(np.float32))
    pad = [kk // 2 for kk in k]
    if transposed:
        packed = torch.ops.quantized.conv_transpose3d_prepack(w, b, [stride] * 3, pad, [0] * 3, [1] * 3, 1)
        ref = torch.ops.quantized.conv_transpose3d(x, packed, ys, yz)
        got = conv.qconv_transpose_out(srq(x), srq(w), b.numpy(), [stride] * 3, pad, [0] * 3, [1] * 3, 1, ys, yz)
    else:
        packed = torch.ops.quantized.conv3d_prepack(w, b, [stride] * 3, pad, [1] * 3, 1)
        ref = (torch.ops.quantized.conv3d_relu if relu else torch.ops.quantized.conv3d)(x, packed, ys, yz)
        got = (conv.qconv_relu_out if relu else conv.qconv_out)(srq(x), srq(w), b.numpy(), [stride] * 3, pad,
                                                                [1] * 3, 1, ys, yz)
    _same(got, ref)

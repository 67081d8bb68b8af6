"""torch's qnnpack quantized engine (``kernels/qnnpack.py``): what torch computes when
``torch.backends.quantized.engine == "qnnpack"`` (QNNPACK's kernels, on x86 too), bit for bit against
torch under that engine: conv (groups, depthwise, per channel, relu, 1-d), transposed conv, linear,
the dynamic linear, add, average pools and mean, the lookup-table activations; the importer choosing
those forms by the engine in force; what is refused; and a torch bug srcore does not copy.

Found by the quantized zoo (tests/parity/test_quantzoo.py): srcore computed fbgemm's arithmetic for
models quantized and run with qnnpack, one step off torch on a few elements of conv / linear outputs,
on many exact ties of add, and on average pools and hardswish.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore.plugin import KernelError
from srcore_quantized.kernels import conv, linear, qnnpack
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]
EXAMPLES = settings(max_examples=25, deadline=None)
F32 = np.float32


@pytest.fixture(autouse=True)
def qnnpack_engine():
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "qnnpack"
    yield
    torch.backends.quantized.engine = old


def _same(got, ref):
    assert got.qparams == srq(ref).qparams
    np.testing.assert_array_equal(np.asarray(got.int_repr()), ref.int_repr().numpy())


def _qx(shape, seed, scale, zp):
    g = torch.Generator().manual_seed(seed)
    return torch.quantize_per_tensor(torch.randn(*shape, generator=g) * 2, scale, zp, torch.quint8)


def _weight(shape, seed, per_channel):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(*shape, generator=g) * 0.2
    if per_channel:
        scales = torch.rand(shape[0], generator=g, dtype=torch.float64) * 0.01 + 0.001
        return torch.quantize_per_channel(w, scales, torch.zeros(shape[0], dtype=torch.long), 0, torch.qint8)
    return torch.quantize_per_tensor(w, 0.004, 0, torch.qint8)


_SCALE = st.floats(0.004, 0.2)
_ZP = st.integers(0, 255)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@EXAMPLES
@given(seed=st.integers(0, 999), groups=st.sampled_from([1, 2, "dw"]), k=st.sampled_from([1, 3, 5]),
       stride=st.integers(1, 2), per_channel=st.booleans(), relu=st.booleans(), xs=_SCALE, xz=_ZP, ys=_SCALE,
       yz=st.integers(0, 254), bias_mag=st.sampled_from([0.01, 1.0, 30.0]))
def test_conv2d_is_qnnpacks(seed, groups, k, stride, per_channel, relu, xs, xz, ys, yz, bias_mag):
    """QNNPACK's conv: the bias quantized to int32 with scale s_w * s_x and added to the exact sums, then
    ``nearbyint(float(acc) * (s_w * s_x) * (1 / s_y))``, int16-saturated, the zero point, clamped."""
    cin = 4
    g = cin if groups == "dw" else groups
    cout = cin * (1 if groups == "dw" else 2)
    x = _qx((2, cin, 7, 6), seed, xs, xz)
    w = _weight((cout, cin // g, k, k), seed + 1, per_channel)
    b = torch.randn(cout, generator=torch.Generator().manual_seed(seed + 2)) * bias_mag
    packed = torch.ops.quantized.conv2d_prepack(w, b, [stride] * 2, [k // 2] * 2, [1, 1], g)
    ref = (torch.ops.quantized.conv2d_relu if relu else torch.ops.quantized.conv2d)(x, packed, ys, yz)
    fn = conv.qconv_relu_out if relu else conv.qconv_out
    _same(fn(srq(x), srq(w), b.numpy(), [stride] * 2, [k // 2] * 2, [1, 1], g, ys, yz, "qnnpack"), ref)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@EXAMPLES
@given(seed=st.integers(0, 999), n=st.integers(1, 24), k=st.integers(1, 40), per_channel=st.booleans(),
       relu=st.booleans(), xs=_SCALE, xz=_ZP, ys=_SCALE, yz=st.integers(0, 254))
def test_linear_and_dynamic_linear_are_qnnpacks(seed, n, k, per_channel, relu, xs, xz, ys, yz):
    x = _qx((3, 5, k), seed, xs, xz)
    w = _weight((n, k), seed + 1, per_channel)
    b = torch.randn(n, generator=torch.Generator().manual_seed(seed + 2))
    packed = torch.ops.quantized.linear_prepack(w, b)
    ref = (torch.ops.quantized.linear_relu if relu else torch.ops.quantized.linear)(x, packed, ys, yz)
    fn = linear.qlinear_relu_out if relu else linear.qlinear_out
    _same(fn(srq(x), srq(w), b.numpy(), ys, yz, "qnnpack"), ref)
    # dynamic: QNNPACK quantizes the float input to all 8 bits (reduce_range ignored), float32 mul then add
    xf = x.dequantize() * 1.7
    dyn = (torch.ops.quantized.linear_relu_dynamic if relu else torch.ops.quantized.linear_dynamic)(xf, packed, True)
    fn = linear.qlinear_relu_dynamic_out if relu else linear.qlinear_dynamic_out
    np.testing.assert_array_equal(fn(xf.numpy(), srq(w), b.numpy(), True, "qnnpack"), dyn.numpy())


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@EXAMPLES
@given(seed=st.integers(0, 999), stride=st.integers(1, 2), k=st.sampled_from([2, 3]), groups=st.sampled_from([1, 2]),
       xs=_SCALE, xz=_ZP, ys=_SCALE, yz=st.integers(0, 254))
def test_conv_transpose2d_is_qnnpacks(seed, stride, k, groups, xs, xz, ys, yz):
    x = _qx((2, 4, 5, 4), seed, xs, xz)
    w = _weight((4, 6 // groups, k, k), seed + 1, False)
    b = torch.randn(6, generator=torch.Generator().manual_seed(seed + 2))
    packed = torch.ops.quantized.conv_transpose2d_prepack(w, b, [stride] * 2, [0, 0], [0, 0], [1, 1], groups)
    ref = torch.ops.quantized.conv_transpose2d(x, packed, ys, yz)
    _same(conv.qconv_transpose_out(srq(x), srq(w), b.numpy(), [stride] * 2, [0, 0], [0, 0], [1, 1], groups, ys, yz,
                                   "qnnpack"), ref)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 999), shape=st.sampled_from([(2, 3, 5, 7), (1, 1, 1, 5), (4, 9), (3, 70)]),
       sa=_SCALE, za=_ZP, sb=_SCALE, zb=_ZP, so=_SCALE, zo=st.integers(0, 253), relu=st.booleans(),
       ties=st.booleans())
def test_add_is_qnnpacks_fixed_point(seed, shape, sa, za, sb, zb, so, zo, relu, ties):
    """QNNPACK's add: 2^21-scaled integer multipliers, one shift rounding half away from zero (with
    ``ties``: output scale twice the inputs', odd zero point, where fbgemm's rounding differs)."""
    if ties:
        sb, so, zo = sa, 2 * sa, zo | 1
    a, b = _qx(shape, seed, sa, za), _qx(shape, seed + 1, sb, zb)
    ref = (torch.ops.quantized.add_relu if relu else torch.ops.quantized.add)(a, b, so, zo)
    fn = qnnpack.add_relu_out if relu else qnnpack.add_out
    _same(fn(srq(a), srq(b), so, zo), ref)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 999), hw=st.tuples(st.integers(2, 11), st.integers(2, 11)), k=st.tuples(
    st.sampled_from([1, 2, 3, 4]), st.sampled_from([1, 2, 3, 4])), stride=st.integers(1, 3), pad=st.booleans(),
    cip=st.booleans(), s=_SCALE, z=_ZP, channels_last=st.booleans())
def test_average_pools_and_mean_are_qnnpacks(seed, hw, k, stride, pad, cip, s, z, channels_last):
    """QNNPACK's average pool (padding counted as the zero point whatever count_include_pad says), its
    adaptive form (kernel = stride = input / output) and mean over (2, 3) (its global pool): the window
    sums less ``n zp`` times ``1 / n`` in float32, rounded half to even. Windows of 2^k or an odd
    number of elements (others are refused: below)."""
    kh, kw = min(k[0], hw[0]), min(k[1], hw[1])
    x = _qx((2, 3) + hw, seed, s, z)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    n = kh * kw
    if n > 1 and (n % 2 or n & (n - 1) == 0):
        p = [kh // 2, kw // 2] if pad else [0, 0]
        _same(qnnpack.avg_pool2d_out(srq(x), [kh, kw], [stride] * 2, p, False, cip),
              torch.nn.functional.avg_pool2d(x, (kh, kw), stride, p, count_include_pad=cip))
    oh, ow = hw[0] // kh, hw[1] // kw
    na = (hw[0] // oh) * (hw[1] // ow)
    if hw[0] % oh == 0 and hw[1] % ow == 0 and (oh, ow) != hw and (na % 2 or na & (na - 1) == 0):
        _same(qnnpack.adaptive_avg_pool2d_out(srq(x), [oh, ow]), torch.nn.functional.adaptive_avg_pool2d(x, (oh, ow)))
    m = hw[0] * hw[1]
    if m % 2 or m & (m - 1) == 0:
        for keep in (True, False):
            _same(qnnpack.mean_out(srq(x), [2, 3], keep), x.mean((2, 3), keepdim=keep))


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_average_pool_of_a_window_whose_ties_torch_rounds_otherwise_is_refused():
    """At exact ties of windows of 6, 10, 12, ... elements torch's QNNPACK result follows neither
    half-to-even nor half-away-from-zero of the float32 product (measured): a KernelError naming the op
    and the way out, never a silent one-step difference."""
    x = srq(_qx((1, 2, 6, 6), 0, 0.05, 100))
    with pytest.raises(KernelError, match=r"avg_pool2d_qnnpack: .*12-element windows .*x86 or fbgemm engine"):
        qnnpack.avg_pool2d_out(x, [3, 4], [1, 1])
    with pytest.raises(KernelError, match="36-element windows"):
        qnnpack.mean_out(x, [2, 3], True)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@settings(max_examples=40, deadline=None)
@given(s=st.floats(1e-4, 0.3), z=_ZP, so=st.floats(1e-4, 0.3), zo=_ZP)
def test_table_activations_are_qnnpacks_on_every_level(s, z, so, zo):
    """hardswish / hardsigmoid in C float arithmetic, sigmoid and tanh through the C library's expf and
    tanh, as QNNPACK tabulates them: all 256 input levels."""
    x = torch._make_per_tensor_quantized_tensor(torch.arange(256, dtype=torch.uint8), s, z)
    _same(qnnpack.lut_out(srq(x), "hardswish", so, zo), torch.ops.quantized.hardswish(x, so, zo))
    for fn in ("sigmoid", "tanh", "hardsigmoid"):
        _same(qnnpack.lut_out(srq(x), fn), getattr(torch.nn.functional, fn)(x))


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        import torch.ao.quantization as tq
        from torch.ao.nn.quantized import FloatFunctional

        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.c1, self.c2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.act, self.skip = torch.nn.Hardswish(), FloatFunctional()
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        y = self.act(self.c1(self.q(x)))
        y = self.skip.add(y, self.c2(y))
        y = torch.nn.functional.avg_pool2d(y, 2)
        return self.dq(self.fc(torch.sigmoid(y).mean((2, 3))))


def test_a_model_imported_under_qnnpack_takes_qnnpacks_forms_and_matches_torch():
    """Eager PTQ with the qnnpack engine and qconfig, imported frozen while the engine is qnnpack: conv and
    linear record ``arith="qnnpack"``, add / pools / mean / table activations take their ``*_qnnpack``
    forms; bit for bit with torch. The same model imported with the x86 engine takes none of them."""
    import torch.ao.quantization as tq

    torch.manual_seed(0)
    m = _Block().eval()
    m.qconfig = tq.get_default_qconfig("qnnpack")
    tq.prepare(m, inplace=True)
    for s in range(3):
        m(torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(s)))
    tq.convert(m, inplace=True)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(9))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = m(x).numpy()
        frozen = torch.jit.freeze(torch.jit.script(m))
    model = srcore.from_torchscript(frozen, (x,))
    kinds = [n.kind for n in model.graph.all_nodes()]
    for k in ("quantized::add_qnnpack", "quantized::avg_pool2d_qnnpack", "quantized::mean_qnnpack",
              "quantized::lut_qnnpack"):
        assert k in kinds, (k, kinds)
    ariths = {n.inputs[-1].node.attrs.get("value") for n in model.graph.all_nodes()
              if n.kind in ("quantized::qconv2d", "quantized::qlinear")}
    assert ariths == {"qnnpack"}
    np.testing.assert_array_equal(srcore.StaticModule(model)(x.numpy()), want)
    torch.backends.quantized.engine = "x86"
    kinds = [n.kind for n in srcore.from_torchscript(frozen, (x,)).graph.all_nodes()]
    assert not [k for k in kinds if k.endswith("_qnnpack")], kinds


class _Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 6, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def test_a_dynamic_lstm_imported_under_qnnpack_is_refused():
    """torch's qnnpack engine runs quantize_dynamic's LSTM / GRU on QNNPACK's dynamic linear (srcore's
    recurrent kernels have fbgemm's): refused at import, naming the way out."""
    import torch.ao.quantization as tq

    m = tq.quantize_dynamic(_Tagger().eval(), {torch.nn.LSTM})
    with pytest.raises(srcore.ConversionError, match="qnnpack engine runs a dynamic LSTM / GRU"):
        srcore.from_torchscript(m, (torch.randn(1, 3, 4),))


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("op", ["relu6", "hardtanh", "clamp"])
def test_torch_qnnpack_clamps_a_channels_last_tensor_as_if_it_were_nchw(op):
    """torch 2.13 with the qnnpack engine clamps a channels-last quint8 tensor (a quantized conv's output)
    in memory order but writes an NCHW result: its values land at the wrong positions (found by the
    zoo's MobileNetV2 with ReLU6). srcore clamps each value where it is, as torch does for the same
    tensor made contiguous (the reference here), and as torch's other engines do."""
    from srcore_quantized.kernels import activation

    x = _qx((2, 8, 4, 4), 0, 0.02, 130).contiguous(memory_format=torch.channels_last)
    f = {"relu6": lambda t: torch.ops.quantized.relu6(t, False), "hardtanh": lambda t: torch.nn.functional.hardtanh(
        t, 0.0, 6.0), "clamp": lambda t: torch.clamp(t, 0.0, 6.0)}[op]
    right = f(x.contiguous())
    assert (f(x).int_repr() != right.int_repr()).any(), "torch computes this right now: the note can go"
    _same(activation.hardtanh_out(srq(x), 0.0, 6.0), right)


class _CeilPool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        import torch.ao.quantization as tq

        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.c = torch.nn.Conv2d(3, 12, 3, padding=1)

    def forward(self, x):
        y = self.c(self.q(x))
        return self.dq(torch.nn.functional.avg_pool2d(y, 2, ceil_mode=True)), self.dq(
            torch.nn.functional.adaptive_avg_pool2d(y, (2, 3)))


def test_pools_torch_does_not_give_qnnpack_keep_the_conv_outputs_channels_last_rounding():
    """With ``ceil_mode`` (or an adaptive output that does not divide the input) torch takes its own pool
    even under qnnpack: on a conv's output its channels-last kernel, whose ties round otherwise than the
    NCHW one (2x2 windows: a quarter of the values are ties). The ``*_qnnpack`` forms remember the layout."""
    import torch.ao.quantization as tq

    torch.manual_seed(1)
    m = _CeilPool().eval()
    m.qconfig = tq.get_default_qconfig("qnnpack")
    tq.prepare(m, inplace=True)
    m(torch.randn(2, 3, 7, 7))
    tq.convert(m, inplace=True)
    m.c.zero_point = 127   # odd: the two layouts' roundings differ at ties only then
    x = torch.randn(2, 3, 7, 7, generator=torch.Generator().manual_seed(4))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = [t.numpy() for t in m(x)]
        model = srcore.from_torchscript(torch.jit.freeze(torch.jit.script(m)), (x,))
    assert {"quantized::avg_pool2d_qnnpack", "quantized::adaptive_avg_pool2d_qnnpack"} <= {
        n.kind for n in model.graph.all_nodes()}
    for g, w in zip(srcore.StaticModule(model)(x.numpy()), want):
        np.testing.assert_array_equal(g, w)

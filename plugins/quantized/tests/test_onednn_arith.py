"""Machine-dependent quantized arithmetic: which library torch packs a conv/linear weight for (fbgemm or
oneDNN, by engine and CPU features), srcore's record of it (the ops' ``arith``), its oneDNN kernels,
and the vector width of the elementwise loops, against torch bit for bit.

This machine may lack AVX512-VNNI: the tests stand for a VNNI machine by monkeypatching
``srcore.cpu_features.cpu_features`` (adding only that feature, so ATen's real vector width stays
what torch uses here) and take torch's oneDNN results from engine ``onednn``, which packs every conv
and linear for oneDNN on any CPU. Activations stay within 7 bits: oneDNN on CPUs without VNNI
saturates pairs of 8-bit products at int16, as fbgemm does (torch's x86 qconfigs use reduce_range).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcore
from srcore import cpu_features
from srcore.frontends import _quantized
from srcore.ir.quant import QParams
from srcore.qarray import QuantizedArray
from srcore_quantized.kernels import _common, conv, linear
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)

torch = pytest.importorskip("torch")
nn, tq = torch.nn, torch.ao.quantization
pytestmark = [pytest.mark.one_pass, pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def engine():
    """Set torch's quantized engine for a test; restored afterwards."""
    old = torch.backends.quantized.engine

    def set_engine(name):
        torch.backends.quantized.engine = name
    yield set_engine
    torch.backends.quantized.engine = old


def vnni(monkeypatch, on: bool):
    real = cpu_features._detected()
    monkeypatch.setattr(cpu_features, "cpu_features",
                        lambda: (real | {"AVX512VNNI"}) if on else (real - {"AVX512VNNI"}))


def _case(seed):
    g = torch.Generator().manual_seed(seed)
    sx = float(torch.rand(1, generator=g)) * 0.1 + 1e-3
    x_zp = int(torch.randint(0, 128, (1,), generator=g))
    y_scale = float(torch.rand(1, generator=g)) * 0.3 + 1e-3
    y_zp = int(torch.randint(0, 256, (1,), generator=g))
    return g, sx, x_zp, y_scale, y_zp


@pytest.mark.parametrize("relu", [False, True])
def test_conv_kernels_like_torchs_onednn_packing(engine, relu):
    """conv1d / conv2d (groups, depthwise, stride, padding, dilation; per-channel and per-tensor
    symmetric weights) with ``arith="onednn"`` against torch's oneDNN-packed convolution."""
    engine("onednn")
    compared = 0
    for seed in range(24):
        g, sx, x_zp, y_scale, y_zp = _case(seed)
        groups = (1, 2, 4, 8)[seed % 4]
        c, cout = 8, groups * (1 + seed % 3)
        dims = 1 if seed % 6 == 5 else 2
        x = torch._make_per_tensor_quantized_tensor(
            torch.randint(0, 128, (4, c, 12, 11)[:2 + dims], dtype=torch.uint8, generator=g), sx, x_zp)
        w_scales = torch.rand(cout, generator=g).double() * 0.05 + 1e-3
        wf = torch.randn(cout, c // groups, *(3,) * dims, generator=g)
        w = (torch.quantize_per_channel(wf, w_scales, torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
             if seed % 3 else torch.quantize_per_tensor(wf, float(w_scales[0]), 0, torch.qint8))
        b = torch.randn(cout, generator=g)
        st, pad, dil = [1 + seed % 2] * dims, [seed % 2] * dims, [1 + (seed // 2) % 2] * dims
        prepack = torch.ops.quantized.conv2d_prepack if dims == 2 else torch.ops.quantized.conv1d_prepack
        packed = prepack(w, b, st, pad, dil, groups)
        ref_fn = getattr(torch.ops.quantized, f"conv{dims}d" + ("_relu" if relu else ""))
        ref = ref_fn(x, packed, y_scale, y_zp)
        fn = conv.qconv_relu_out if relu else conv.qconv_out
        got = fn(srq(x), srq(w), b.numpy(), st, pad, dil, groups, y_scale, y_zp, "onednn")
        np.testing.assert_array_equal(got.int_repr(), ref.int_repr().numpy(), err_msg=f"seed {seed}")
        compared += ref.numel()
    assert compared > 10_000


@pytest.mark.parametrize("relu", [False, True])
def test_linear_kernels_like_torchs_onednn_packing(engine, relu):
    engine("onednn")
    for seed in range(24):
        g, sx, x_zp, y_scale, y_zp = _case(seed)
        k, n = 3 + 5 * seed, 4 + seed % 9
        x = torch._make_per_tensor_quantized_tensor(
            torch.randint(0, 128, (2, 16, k), dtype=torch.uint8, generator=g), sx, x_zp)
        w_scales = torch.rand(n, generator=g).double() * 0.05 + 1e-3
        wf = torch.randn(n, k, generator=g)
        w = (torch.quantize_per_channel(wf, w_scales, torch.zeros(n, dtype=torch.long), 0, torch.qint8)
             if seed % 2 else torch.quantize_per_tensor(wf, float(w_scales[0]), 0, torch.qint8))
        b = torch.randn(n, generator=g) if seed % 4 else None
        packed = torch.ops.quantized.linear_prepack(w, b)
        ref = (torch.ops.quantized.linear_relu if relu else torch.ops.quantized.linear)(x, packed, y_scale, y_zp)
        fn = linear.qlinear_relu_out if relu else linear.qlinear_out
        got = fn(srq(x), srq(w), None if b is None else b.numpy(), y_scale, y_zp, "onednn")
        np.testing.assert_array_equal(got.int_repr(), ref.int_repr().numpy(), err_msg=f"seed {seed}")


def _both_engines(make_packed, run, x_q, w_q, bias, y_scale, y_zp):
    """torch's result with the weight packed for fbgemm and for oneDNN."""
    out = {}
    for name in ("fbgemm", "onednn"):
        torch.backends.quantized.engine = name
        out[name] = run(x_q, make_packed(w_q, bias), y_scale, y_zp).int_repr().numpy()
    return out


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_where_fbgemm_and_onednn_round_differently_each_is_torchs(engine, kind):
    """The two requantizations differ only where a value sits within float error of a half: over a grid
    of every 7-bit activation times 512 weights with random scales and biases, find the elements where
    srcore's fbgemm and oneDNN results differ and check each against torch's engine of that name."""
    rng = np.random.default_rng(0)
    N = 512   # output channels
    differing = 0
    for it in range(200):
        sx, x_zp = float(rng.uniform(1e-3, 0.1)), int(rng.integers(0, 128))
        w_scales = rng.uniform(1e-3, 0.05, N)
        w_int = torch.from_numpy(rng.integers(-127, 128, (N, 1)).astype(np.int8))
        bias = torch.from_numpy(rng.normal(size=N).astype(np.float32))
        y_scale, y_zp = float(rng.uniform(1e-3, 0.3)), int(rng.integers(0, 256))
        x_int = torch.arange(128, dtype=torch.uint8)[:, None]
        w = torch._make_per_channel_quantized_tensor(w_int, torch.from_numpy(w_scales), torch.zeros(N, dtype=torch.long), 0)
        if kind == "conv":   # a 1x1 convolution over 128 pixels of one channel
            x = torch._make_per_tensor_quantized_tensor(x_int.reshape(1, 1, 128, 1), sx, x_zp)
            w = w.reshape(N, 1, 1, 1)
            ref = _both_engines(lambda w_, b_: torch.ops.quantized.conv2d_prepack(w_, b_, [1, 1], [0, 0], [1, 1], 1),
                                torch.ops.quantized.conv2d, x, w, bias, y_scale, y_zp)
            got = {a: conv.qconv_out(srq(x), srq(w), bias.numpy(), [1, 1], [0, 0], [1, 1], 1, y_scale, y_zp,
                                     a).int_repr() for a in ref}
        else:
            x = torch._make_per_tensor_quantized_tensor(x_int, sx, x_zp)
            ref = _both_engines(torch.ops.quantized.linear_prepack, torch.ops.quantized.linear, x, w, bias,
                                y_scale, y_zp)
            got = {a: linear.qlinear_out(srq(x), srq(w), bias.numpy(), y_scale, y_zp, a).int_repr() for a in ref}
        for a in ref:
            np.testing.assert_array_equal(got[a], ref[a], err_msg=a)
        differing += int((got["fbgemm"] != got["onednn"]).sum())
        if differing >= 2:
            break
    assert differing >= 2, "no element where the two requantizations differ: the test shows nothing"


def test_unknown_arith_is_refused():
    x = QuantizedArray(np.array([[7]], np.uint8), "quint8", QParams(0.1, 0))
    w = QuantizedArray(np.array([[1]], np.int8), "qint8", QParams(0.3, 0))
    with pytest.raises(srcore.SrcoreError, match="arith='mkl'"):
        linear.qlinear_out(x, w, None, 0.01, 0, "mkl")


def test_packed_arith_is_torchs_rule(monkeypatch):
    sym = torch.quantize_per_channel(torch.randn(4, 2, 3, 3), torch.rand(4).double() + 0.1,
                                     torch.zeros(4, dtype=torch.long), 0, torch.qint8)
    asym = torch.quantize_per_tensor(torch.randn(4, 2, 3, 3), 0.1, 3, torch.qint8)
    rule = _quantized.packed_arith
    vnni(monkeypatch, True)
    assert rule("x86", "conv", sym) == "onednn"
    assert rule("x86", "conv", asym) == "fbgemm"                      # oneDNN wants zero points 0
    assert rule("x86", "conv", sym, groups=101) == "fbgemm"
    assert rule("x86", "conv", sym, output_padding=(1, 0)) == "fbgemm"
    assert rule("x86", "linear", sym) == "fbgemm"                     # x86 packs linears for fbgemm
    assert rule("fbgemm", "conv", sym) == "fbgemm"
    assert rule("qnnpack", "conv", sym) == rule("qnnpack", "linear", asym) == "qnnpack"   # test_qnnpack.py
    assert rule("onednn", "linear", sym) == rule("onednn", "conv", sym) == "onednn"
    vnni(monkeypatch, False)
    assert rule("x86", "conv", sym) == "fbgemm"


class _Net(nn.Module):
    """conv+relu, depthwise conv, flatten, linear+relu, linear: what eager x86 PTQ makes of a small CNN."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.relu = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()
        self.dw = nn.Conv2d(8, 8, 3, stride=2, groups=8)
        self.fc1, self.relu1, self.fc2 = nn.Linear(8 * 3 * 3, 16), nn.ReLU(), nn.Linear(16, 4)

    def forward(self, x):
        x = self.dw(self.relu(self.conv(self.quant(x))))
        return self.dequant(self.fc2(self.relu1(self.fc1(x.flatten(1)))))


def _eager_x86(seed):
    torch.manual_seed(seed)
    net = _Net().eval()
    net.qconfig = tq.get_default_qconfig("x86")
    tq.fuse_modules(net, [["conv", "relu"], ["fc1", "relu1"]], inplace=True)
    tq.prepare(net, inplace=True)
    for _ in range(4):
        net(torch.randn(8, 3, 8, 8))
    tq.convert(net, inplace=True)
    return net


def _repack(net, kinds, engine_name):
    """Re-pack the weights of ``net``'s quantized modules of ``kinds`` with engine ``engine_name``
    (as torch's x86 engine packs convs for oneDNN on a VNNI machine)."""
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine_name
    try:
        for m in net.modules():
            if isinstance(m, kinds):
                m.set_weight_bias(m.weight(), m.bias())
    finally:
        torch.backends.quantized.engine = old


def _run_both(net, x):
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        model = srcore.from_torchscript(net, (x,))
        ref = net(x).numpy()
    return model, srcore.StaticModule(model)(x.numpy()), ref


def _ariths(model):
    return sorted((n.kind.split("::")[1], n.inputs[-1].node.attrs["value"]) for n in model.graph.all_nodes()
                  if n.kind.startswith(("quantized::qconv", "quantized::qlinear")))


@pytest.mark.parametrize("vnni_on", [True, False])
def test_eager_x86_model_matches_torch_on_either_machine(engine, monkeypatch, vnni_on):
    """The whole eager-x86 model imported with engine x86: with VNNI its convs take oneDNN's arithmetic
    (torch's reference: the same model with its convs re-packed for oneDNN), linears fbgemm's;
    without VNNI everything is fbgemm's (reference: packed with engine fbgemm)."""
    engine("fbgemm")
    net = _eager_x86(0)
    if vnni_on:
        _repack(net, (torch.ao.nn.quantized.Conv2d,), "onednn")
    vnni(monkeypatch, vnni_on)
    engine("x86")
    x = torch.randn(8, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    model, got, ref = _run_both(net, x)
    conv_arith = "onednn" if vnni_on else "fbgemm"
    assert _ariths(model) == [("qconv2d", conv_arith), ("qconv2d_relu", conv_arith), ("qlinear", "fbgemm"),
                              ("qlinear_relu", "fbgemm")]
    np.testing.assert_array_equal(got, ref)


def test_model_packed_with_engine_onednn_matches_torch(engine):
    engine("onednn")
    net = _eager_x86(2)
    x = torch.randn(8, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    model, got, ref = _run_both(net, x)
    assert {a for _, a in _ariths(model)} == {"onednn"}
    np.testing.assert_array_equal(got, ref)


def test_elementwise_block_follows_atens_vector_width(monkeypatch):
    """torch's vectorized quantized loops step by 2 x Vectorized<T>::size() of their AVX2 build on
    every x86 CPU (no AVX512 build: 64 8-bit elements with or without AVX-512); the kernels registered
    for AVX512 (the channels-last avg_pool2d) use 64-byte vectors under ATen's AVX512 capability."""
    monkeypatch.setattr(cpu_features, "cpu_features", lambda: frozenset({"AVX", "AVX2", "FMA3"}))
    assert [_common.vec_block(d) for d in ("quint8", "qint8", "qint32")] == [64, 64, 16]
    assert _common.split_tail(200, "quint8") == 192
    assert cpu_features.vector_bytes() == 32
    monkeypatch.setattr(cpu_features, "cpu_features", lambda: frozenset(
        {"AVX", "AVX2", "FMA3", "AVX512F", "AVX512BW", "AVX512VL", "AVX512DQ"}))
    assert [_common.vec_block(d) for d in ("quint8", "qint8", "qint32")] == [64, 64, 16]
    assert _common.split_tail(200, "quint8") == 192
    assert cpu_features.vector_bytes() == 64 and cpu_features.vector_bytes(avx512_kernel=False) == 32
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")   # torch's own switch lowers it
    assert cpu_features.vector_bytes() == 32
    # and the real machine agrees with torch's choice here
    monkeypatch.undo()
    assert cpu_features.aten_capability() == torch.backends.cpu.get_cpu_capability().replace("ZVECTOR", "DEFAULT")


def test_mean_of_a_conv_output_is_torchs_channels_last_path():
    """torch holds a quantized conv's output channels-last, and its mean over (H, W) then takes the
    float path, whose rounding at exact ties depends on ATen's summation order: the kernel against
    torch on channels-last tensors, ties included, and the importer choosing it after a conv."""
    from srcore_quantized.kernels import channels_last, pool

    ties = 0
    differs_from_integer_path = 0
    for seed in range(60):
        g = torch.Generator().manual_seed(seed)
        c = (1, 3, 5, 7, 8, 13, 16, 24, 32, 40, 64, 100)[seed % 12]
        hw = ((4, 4), (8, 8), (7, 7), (2, 40), (1, 1))[seed % 5]
        s, zp = float(torch.rand(1, generator=g)) * 0.1 + 1e-3, int(torch.randint(0, 128, (1,), generator=g))
        q = torch.randint(0, 256, (1 + seed % 3, c, *hw), dtype=torch.uint8, generator=g)
        x = torch._make_per_tensor_quantized_tensor(q, s, zp).contiguous(memory_format=torch.channels_last)
        ref = x.mean((2, 3)).int_repr().numpy()
        got = channels_last.mean_channels_last_out(srq(x), [2, 3])
        np.testing.assert_array_equal(got.int_repr(), ref, err_msg=f"seed {seed}")
        n = hw[0] * hw[1]
        ties += int((q.numpy().astype(np.int64).sum((2, 3)) % n * 2 == n).sum())
        differs_from_integer_path += int((pool.mean_out(srq(x), [2, 3]).int_repr() != ref).sum())
    assert ties > 20 and differs_from_integer_path > 0   # the ties are there, and the paths do differ on them


def test_importer_takes_torchs_paths_for_a_conv_output(engine):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.conv, self.relu = nn.Conv2d(3, 16, 3, padding=1), nn.ReLU()

        def forward(self, x):
            x = self.quant(x)
            y = self.relu(self.conv(x))
            return (self.dequant(y.mean((2, 3))), self.dequant(x.mean((2, 3))),
                    self.dequant(nn.functional.avg_pool2d(y, 2)), self.dequant(nn.functional.avg_pool2d(x, 2)),
                    self.dequant(nn.functional.max_pool2d(y, 2).mean((2, 3))),   # max pool keeps channels-last
                    self.dequant(y.contiguous().mean((2, 3))),                    # .contiguous() does not
                    self.dequant(nn.functional.adaptive_avg_pool2d(y, 1)),
                    self.dequant(nn.functional.adaptive_avg_pool2d(x, 1)))

    engine("fbgemm")
    torch.manual_seed(0)
    net = Net().eval()
    net.qconfig = tq.get_default_qconfig("fbgemm")
    tq.fuse_modules(net, [["conv", "relu"]], inplace=True)
    tq.prepare(net, inplace=True)
    net(torch.randn(4, 3, 8, 8))
    tq.convert(net, inplace=True)
    x = torch.randn(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        model = srcore.from_torchscript(net, (x,))
        ref = [r.numpy() for r in net(x)]
    kinds = [n.kind for n in model.graph.all_nodes() if "mean" in n.kind or "avg_pool" in n.kind]
    assert sorted(kinds) == ["aten::adaptive_avg_pool2d", "aten::avg_pool2d", "aten::mean", "aten::mean",
                             "quantized::adaptive_avg_pool2d_channels_last", "quantized::avg_pool2d_channels_last",
                             "quantized::mean_channels_last", "quantized::mean_channels_last"]
    for got, want in zip(srcore.StaticModule(model)(x.numpy()), ref):
        np.testing.assert_array_equal(got, want)


def test_avg_pool2d_of_a_conv_output_is_torchs_nhwc_kernel():
    """torch's NHWC average pool rounds a tie before adding the zero point in whole vectors of
    channels, after it in the rest; windows, padding, ceil mode, count_include_pad, divisor_override."""
    from srcore_quantized.kernels import channels_last, pool

    F = torch.nn.functional
    compared = differs_from_contiguous = 0
    for seed in range(48):
        g = torch.Generator().manual_seed(seed)
        c = (3, 8, 16, 40, 64, 7, 12, 1)[seed % 8]
        s, zp = float(torch.rand(1, generator=g)) * 0.1 + 1e-3, int(torch.randint(0, 128, (1,), generator=g))
        q = torch.randint(0, 256, (1 + seed % 2, c, 9, 8), dtype=torch.uint8, generator=g)
        x = torch._make_per_tensor_quantized_tensor(q, s, zp).contiguous(memory_format=torch.channels_last)
        k = ((2, 2), (3, 3), (3, 2), (1, 1))[seed % 4]
        st = ((2, 2), (1, 1), (2, 1))[seed % 3]
        pad = ((0, 0), (1, 1), (1, 0))[seed % 3] if min(k) >= 2 else (0, 0)
        args = (list(k), list(st), list(pad), seed % 5 == 0, seed % 7 != 0, 5 if seed % 11 == 0 else None)
        ref = F.avg_pool2d(x, *args).int_repr().numpy()
        got = channels_last.avg_pool2d_channels_last_out(srq(x), *args)
        np.testing.assert_array_equal(got.int_repr(), ref, err_msg=f"seed {seed}")
        compared += ref.size
        differs_from_contiguous += int((pool.avg_pool2d_out(srq(x), *args).int_repr() != ref).sum())
    assert differs_from_contiguous > 0.01 * compared

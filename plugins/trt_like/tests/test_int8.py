"""INT8 engines: quantized segments build into int8 layers (precision "int8" in the plan records)
whose integers are the quantized_cpu backend's (itself torch's x86 backend, bit for bit); what has
no int8 layer stays on quantized_cpu with a reason naming it.

The reference of every comparison is srcore's quantized_cpu backend (tested bit for bit against
``torch.ops.quantized`` in plugins/quantized/tests) and, for whole models, torch's quantized
model where quantized_cpu itself is exact.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import pathlib
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import srcore
from srcore.plugin import QParams, QuantizedArray, int8_gemm
from srcore_quantized.kernels import binary as ref_binary
from srcore_quantized.kernels import conv as ref_conv
from srcore_quantized.kernels import convert as ref_convert
from srcore_quantized.kernels import linear as ref_linear
from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.builder.plan import Plan
from srcore_trt_like.tactics import int8 as t8
from srcore_trt_like.tactics.choose import choose_tactics

# engines are one node whatever the executor and memory planner
pytestmark = [pytest.mark.one_pass, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TRT = srcore.Options(backends=("trt_like", "quantized_cpu", "cpu"))
_ZOO = pathlib.Path(__file__).resolve().parents[3] / "tests" / "parity" / "quantized_models.py"


def _zoo():
    spec = importlib.util.spec_from_file_location("trt_int8_quantized_models", _ZOO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.lru_cache(maxsize=None)
def _torchscript(name: str, kind: str):
    """The zoo's quantized model as TorchScript (built once per session: quantizing and scripting
    are most of these tests' time)."""
    qm = _zoo()
    model, x, engine = qm.build(name)
    torch.backends.quantized.engine = engine
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if kind == "trace":
            ts = torch.jit.trace(model, x)
        else:
            ts = torch.jit.script(model)
            ts = torch.jit.freeze(ts.eval()) if kind == "frozen" else ts
    return ts, x, engine


def _import(name: str, kind: str, **kwargs):
    ts, x, engine = _torchscript(name, kind)
    torch.backends.quantized.engine = engine
    return srcore.from_torchscript(ts, (x,), **kwargs), ts, x


def _engines(sm):
    return [pn.fn.fn for pn in sm.top.nodes if pn.fn is not None and pn.fn.backend == "trt_like"]


def _int8_layers(sm) -> list[str]:
    return [f"{s.layer.kind}:{s.tactic}" for e in _engines(sm) for p in e.engine.plans.values() for s in p.steps
            if s.precision == "int8"]


@pytest.mark.parametrize("name, kind", [("resnet_eager_x86", "frozen"), ("mlp_fx_x86", "script")])
def test_quantized_models_run_in_int8_engines_bit_for_bit(name, kind):
    model, ts, x = _import(name, kind)
    ref = srcore.StaticModule(model)                      # quantized_cpu + cpu
    sm = srcore.StaticModule(model, TRT)
    layers = _int8_layers(sm)
    assert any(k.startswith(("qconv", "qgemm")) for k in layers), layers
    rng = np.random.default_rng(0)
    for xx in (x.numpy(), *(rng.standard_normal(x.shape).astype(np.float32) * s for s in (0.3, 4.0))):
        np.testing.assert_array_equal(sm(xx), ref(xx))
    with torch.no_grad():
        np.testing.assert_array_equal(sm(x.numpy()), ts(x).numpy())   # quantized_cpu is exact on this input


def test_ops_without_int8_layer_stay_on_quantized_cpu_with_a_reason():
    model, _, x = _import("dwsep_fx_x86", "frozen")
    ref = srcore.StaticModule(model)
    sm = srcore.StaticModule(model, TRT)
    reasons = {r.node.split(" = ")[-1]: r.reason for r in sm.partition.refused}
    assert reasons["aten::sigmoid"] == ("not supported by trt_like: argument 'self' is quint8; engines compute in "
                                        "float32 (aten::sigmoid has no int8 layer)")
    assert reasons["quantized::hardswish"].startswith("not supported by trt_like: quantized::hardswish is not in")
    on_q = {pn.fn.op for pn in sm.top.nodes if pn.fn is not None and pn.fn.backend == "quantized_cpu"}
    assert {"aten::sigmoid", "quantized::hardswish"} <= on_q
    np.testing.assert_array_equal(sm(x.numpy()), ref(x.numpy()))


def test_a_quantized_resnet_is_one_int8_engine():
    model, _, x = _import("resnet_eager_x86", "frozen")
    sm = srcore.StaticModule(model, TRT)
    assert [pn.fn.backend for pn in sm.top.nodes if pn.fn is not None] == ["trt_like"]
    desc = _engines(sm)[0].describe()
    assert "qconv -> 2x16x8x8 [int8_" in desc and "qmean -> 2x16x1x1 [numpy, int8]" in desc
    assert "dequantize -> " in desc and "qgemm -> " in desc


def test_int8_engine_with_a_symbolic_batch_plans_its_profiles():
    model, _, x = _import("resnet_eager_x86", "frozen", dynamic_dims={"x": {0: "batch"}})
    ref = srcore.StaticModule(model)
    options = srcore.Options(backends=TRT.backends,
                             engine_options={"profiles": {"x": {"min": (1, 3, 16, 16), "max": (3, 3, 16, 16)}}})
    sm = srcore.StaticModule(model, options)
    (engine,) = _engines(sm)
    assert set(engine.engine.origin) == {((1, 3, 16, 16),), ((3, 3, 16, 16),)}   # planned at load
    for b in (1, 2, 3):
        xx = np.random.default_rng(b).standard_normal((b, 3, 16, 16)).astype(np.float32)
        np.testing.assert_array_equal(sm(xx), ref(xx))
    assert not engine.engine.unplanned


def test_int8_plan_serializes_with_its_dtypes_and_reloads_bit_for_bit(tmp_path):
    model, _, x = _import("mlp_fx_x86", "script")
    sm = srcore.StaticModule(model, TRT)
    path = tmp_path / "mlp.engine.srm"
    sm.save(path)
    loaded = srcore.StaticModule(srcore.load(path), TRT)
    (engine,) = _engines(loaded)
    assert set(engine.engine.origin.values()) == {"serialized"}
    assert _int8_layers(loaded) == _int8_layers(sm)
    xx = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    np.testing.assert_array_equal(loaded(xx), sm(xx))


def test_tampered_int8_tensor_dtype_is_a_format_error():
    from srcore.errors import SrcoreFormatError
    from srcore_trt_like.serialize import dump_plan, load_network

    net, steps = _relu_net()
    meta, arrays = dump_plan(Plan(net, steps), ((2, 3),), {})
    meta = json.loads(json.dumps(meta))
    meta["tensors"][0][3][0] = "qint4"
    with pytest.raises(SrcoreFormatError, match="unknown dtype 'qint4'"):
        load_network(meta, arrays, "plan 0")


def _relu_net():
    net = Network()
    x = net.new_tensor((2, 3), "x", "quint8", QParams(0.1, 3))
    y = net.add("qrelu", [x], (2, 3), "test", zero_point=3)
    net.tensors[y].dtype, net.tensors[y].qparams = "quint8", QParams(0.1, 3)
    net.inputs, net.outputs = [x], [y]
    return net, choose_tactics(net, {"timing": False})


def test_quantized_engine_input_must_have_the_parameters_baked_in():
    from srcore.errors import KernelError

    net, steps = _relu_net()
    plan = Plan(net, steps)
    q = QuantizedArray(np.array([[0, 3, 9], [2, 4, 255]], np.uint8), "quint8", QParams(0.1, 3))
    y = plan(q)
    assert isinstance(y, QuantizedArray) and y.qparams == QParams(0.1, 3)
    np.testing.assert_array_equal(y.int_repr(), [[3, 3, 9], [3, 4, 255]])
    with pytest.raises(KernelError, match=r"expected quint8 with .*0\.1.*got quint8 with .*0\.2"):
        plan(QuantizedArray(q.int_repr(), "quint8", QParams(0.2, 3)))
    with pytest.raises(KernelError, match="expected quint8"):
        plan(np.zeros((2, 3), np.uint8))


# -- layers against the quantized_cpu kernels, over shapes, parameters and data ------------------------------
def _qweight(rng, shape, per_channel: bool, spread: int):
    w = rng.integers(-spread, spread + 1, shape).astype(np.int8)
    if per_channel:
        q = QParams(tuple(float(s) for s in rng.uniform(1e-3, 2e-2, shape[0])),
                    tuple(0 for _ in range(shape[0])), axis=0)
    else:
        q = QParams(float(rng.uniform(1e-3, 2e-2)), int(rng.integers(-5, 6)))
    return QuantizedArray(w, "qint8", q)


def _kernels(kind: str, layer, x_shape, y_shape):
    # the float conv wing's tactics need the layer's shapes, int8_simd the input's dtype
    net = Network()
    net.new_tensor(x_shape, "x", "quint8", QParams(*layer.attrs["x_q"]))
    net.new_tensor(y_shape, "y", "quint8", QParams(*layer.attrs["y_q"]))
    cands = (t8.qconv_candidates if kind == "qconv" else t8.qgemm_candidates)(layer, net)
    return {c.name: c.build().fn for c in cands}


def _simd_expected(depth: int, groups: int = 1) -> set[str]:
    """``int8_simd`` where srcore's int8 GEMM runs here (AVX2 and numba; groups 1)."""
    return {"int8_simd"} if groups == 1 and int8_gemm.applies(depth) else set()


def _attrs(w, bias, xq, yq, relu, x_range, arith="fbgemm"):
    q = w.qparams
    n = w.shape[0]
    scales = np.full(n, q.scale, np.float32) if q.axis is None else np.asarray(q.scale, np.float64).astype(np.float32)
    zps = np.full(n, q.zero_point, np.int64) if q.axis is None else np.asarray(q.zero_point, np.int64)
    return dict(weight=w.view(np.ndarray), w_scales=scales, w_zero_points=zps, bias=bias,
                x_q=(xq.scale, xq.zero_point), y_q=(yq.scale, yq.zero_point), range=(0, 255), relu=relu,
                x_range=x_range, arith=arith, y_dtype="quint8")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 31), c=st.sampled_from([1, 2, 5, 120]), groups=st.sampled_from([1, 2, 3]),
       k=st.integers(1, 3), stride=st.integers(1, 2), pad=st.integers(0, 2), dil=st.integers(1, 2),
       per_channel=st.booleans(), relu=st.booleans(), spread=st.sampled_from([3, 127]),
       arith=st.sampled_from(["fbgemm", "onednn"]))
# 120 channels of 3x3 with 8-bit weights: the float32 tactics sum the input channels in 2-3 blocks
@example(seed=5, c=120, groups=1, k=3, stride=1, pad=1, dil=1, per_channel=True, relu=False, spread=127,
         arith="fbgemm")
# weights torch packed for oneDNN: its requantization on every tactic (int8_simd's sums from the int8 GEMM)
@example(seed=5, c=120, groups=1, k=3, stride=1, pad=1, dil=1, per_channel=True, relu=True, spread=127,
         arith="onednn")
# grouped and 1080 deep: too deep for exact float32 sums in one group, so only the two GEMMs
@example(seed=0, c=120, groups=2, k=3, stride=1, pad=0, dil=1, per_channel=False, relu=False, spread=127,
         arith="fbgemm")
def test_int8_conv_tactics_match_quantized_cpu(seed, c, groups, k, stride, pad, dil, per_channel, relu, spread, arith):
    rng = np.random.default_rng(seed)
    cin, cout = c * groups, 2 * groups
    h = w_ = 4 + (k - 1) * dil
    xq = QParams(float(rng.uniform(0.01, 0.1)), int(rng.integers(0, 256)))
    yq = QParams(float(rng.uniform(0.01, 0.5)), int(rng.integers(0, 256)))
    x = QuantizedArray(rng.integers(0, 256, (2, cin, h, w_)).astype(np.uint8), "quint8", xq)
    w = _qweight(rng, (cout, c, k, k), per_channel, spread)
    bias = rng.standard_normal(cout).astype(np.float32) if seed % 3 else None
    args = (w, bias, [stride] * 2, [pad] * 2, [dil] * 2, groups, yq.scale, yq.zero_point, arith)
    ref = (ref_conv.qconv_relu_out if relu else ref_conv.qconv_out)(x, *args)
    attrs = _attrs(w, bias, xq, yq, relu, max(xq.zero_point, 255 - xq.zero_point), arith)
    attrs.update(stride=(stride,) * 2, padding=(pad,) * 2, dilation=(dil,) * 2, groups=groups)
    kernels = _kernels("qconv", Layer("qconv", [0], [1], attrs), x.shape, ref.shape)
    assert {"int8_sgemm", "int8_dgemm"} <= set(kernels)
    assert ("int8_simd" in kernels) == bool(_simd_expected(c * k * k, groups))
    # the float conv wing's tactics only where a group's whole depth (or, ungrouped, a block of input
    # channels) keeps float32 sums exact: a grouped conv deeper than that has the two GEMMs only
    from srcore_trt_like.kernels.int8 import float32_chunk

    shifted = w.view(np.ndarray).astype(np.int64) - attrs["w_zero_points"].reshape(-1, 1, 1, 1)
    float_wing = groups == 1 or c * k * k <= float32_chunk(attrs["x_range"], shifted)
    assert ("int8_im2col_gemm" in kernels) == float_wing
    assert ("int8_packed_gemm" in kernels) == (groups == 1)
    for name, fn in kernels.items():
        y = np.empty(ref.shape, np.uint8)
        fn(x.view(np.ndarray), y)
        np.testing.assert_array_equal(y, ref.int_repr(), err_msg=name)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 31), k=st.sampled_from([1, 7, 64, 300, 1100]), n=st.integers(1, 9),
       per_channel=st.booleans(), relu=st.booleans(), arith=st.sampled_from(["fbgemm", "onednn"]))
def test_int8_linear_tactics_match_quantized_cpu(seed, k, n, per_channel, relu, arith):
    rng = np.random.default_rng(seed)
    xq = QParams(float(rng.uniform(0.01, 0.1)), int(rng.integers(0, 256)))
    yq = QParams(float(rng.uniform(0.05, 2.0)), int(rng.integers(0, 256)))
    x = QuantizedArray(rng.integers(0, 256, (3, k)).astype(np.uint8), "quint8", xq)
    w = _qweight(rng, (n, k), per_channel, 127)
    bias = rng.standard_normal(n).astype(np.float32)
    ref = (ref_linear.qlinear_relu_out if relu else ref_linear.qlinear_out)(x, w, bias, yq.scale, yq.zero_point, arith)
    x_range = max(xq.zero_point, 255 - xq.zero_point)
    kernels = _kernels("qgemm", Layer("qgemm", [0], [1], _attrs(w, bias, xq, yq, relu, x_range, arith)), x.shape,
                       ref.shape)
    # k = 1100: the float32 sums go in 3 blocks
    assert set(kernels) == {"int8_sgemm", "int8_dgemm"} | _simd_expected(k)
    for name, fn in kernels.items():
        y = np.empty(ref.shape, np.uint8)
        fn(x.view(np.ndarray), y)
        np.testing.assert_array_equal(y, ref.int_repr(), err_msg=name)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 31), k=st.integers(1, 3000), n=st.integers(1, 5), xr=st.integers(1, 255),
       wr=st.integers(1, 255))
def test_blocked_float32_matmul_is_exact(seed, k, n, xr, wr):
    from srcore_trt_like.kernels.int8 import float32_chunk, matmul_exact

    rng = np.random.default_rng(seed)
    a = rng.choice([-xr, xr, 0, 1], (3, k)).astype(np.int64)   # the extremes, where a float32 sum would round
    w = rng.choice([-wr, wr, 0, -1], (k, n)).astype(np.int64)
    chunk = float32_chunk(xr, w)
    assert chunk * xr * int(np.abs(w).max()) < 2 ** 24
    got = matmul_exact(a.astype(np.float32), w.astype(np.float32), chunk)
    np.testing.assert_array_equal(got, a @ w)


@pytest.mark.parametrize("layout", ["nchw", "channels_last", "mixed"])
@pytest.mark.parametrize("shape", [(2, 8, 5, 7), (1, 5, 3, 5), (1, 1, 9, 9)])
def test_int8_add_takes_torchs_path_for_the_inputs_layouts(layout, shape):
    """Exact ties (output scale twice the inputs', odd zero point): torch's result depends on whether it
    holds the inputs NCHW, both channels-last, or one of each (docs/quantization.md); the importer says
    which (``quantized::add_channels_last`` / ``add_mixed_layout``), the int8 add follows it."""
    rng = np.random.default_rng(sum(shape))
    ta, tb = (torch._make_per_tensor_quantized_tensor(torch.from_numpy(rng.integers(0, 256, shape).astype(np.uint8)),
                                                      0.5, zp) for zp in (3, 8))
    cl = torch.channels_last
    xa, xb = {"nchw": (ta, tb), "channels_last": (ta.contiguous(memory_format=cl), tb.contiguous(memory_format=cl)),
              "mixed": (ta.contiguous(memory_format=cl), tb)}[layout]
    want = torch.ops.quantized.add(xa, xb, 1.0, 3).int_repr().numpy()
    layer = Layer("qadd", [0, 1], [2], dict(a_q=(0.5, 3), b_q=(0.5, 8), y_q=(1.0, 3), range=(0, 255), relu=False,
                                            layout=layout))
    y = np.empty(shape, np.uint8)
    t8.qadd(layer, None)[0].build().fn(ta.int_repr().numpy(), tb.int_repr().numpy(), y)
    np.testing.assert_array_equal(y, want)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 31), size=st.sampled_from([5, 64, 130, 1000]), relu=st.booleans())
def test_int8_add_quantize_dequantize_match_quantized_cpu(seed, size, relu):
    rng = np.random.default_rng(seed)
    qa, qb, qy = (QParams(float(rng.uniform(0.01, 0.2)), int(rng.integers(0, 256))) for _ in range(3))
    a = QuantizedArray(rng.integers(0, 256, size).astype(np.uint8), "quint8", qa)
    b = QuantizedArray(rng.integers(0, 256, size).astype(np.uint8), "quint8", qb)
    ref = (ref_binary.add_relu_out if relu else ref_binary.add_out)(a, b, qy.scale, qy.zero_point)
    layer = Layer("qadd", [0, 1], [2], dict(a_q=(qa.scale, qa.zero_point), b_q=(qb.scale, qb.zero_point),
                                            y_q=(qy.scale, qy.zero_point), range=(0, 255), relu=relu))
    y = np.empty(size, np.uint8)
    t8.qadd(layer, None)[0].build().fn(a.view(np.ndarray), b.view(np.ndarray), y)
    np.testing.assert_array_equal(y, ref.int_repr())

    # ties included: values on the half steps of the scale
    x = (rng.integers(-300, 300, size) * (qy.scale / 2)).astype(np.float32)
    refq = ref_convert.quantize_per_tensor_out(x, qy.scale, qy.zero_point, 13)
    layer = Layer("quantize", [0], [1], dict(y_q=(qy.scale, qy.zero_point), range=(0, 255)))
    t8.quantize(layer, None)[0].build().fn(x, y)
    np.testing.assert_array_equal(y, refq.int_repr())
    f = np.empty(size, np.float32)
    t8.dequantize(Layer("dequantize", [0], [1], dict(x_q=(qa.scale, qa.zero_point))), None)[0].build().fn(
        a.view(np.ndarray), f)
    np.testing.assert_array_equal(f, ref_convert.dequantize_out(a))


def _tied(rng, shape) -> np.ndarray:
    """quint8 values whose sums over the last two dims are exact ties where the count is even
    (``sum % n == n / 2``: the mean an odd multiple of one half)."""
    n = shape[-1] * shape[-2]
    x = rng.integers(0, 170, shape).astype(np.int64)
    if n % 2 == 0:
        flat = x.reshape(-1, n)
        flat[:, 0] += (n // 2 - flat.sum(axis=1)) % n
    return x.astype(np.uint8)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 31), c=st.sampled_from([1, 3]), h=st.integers(1, 9), w=st.integers(1, 9),
       zp=st.integers(0, 255))
@example(seed=0, c=1, h=4, w=7, zp=3).via("the one-channel tie hypothesis found in quantized_cpu")
def test_int8_global_pool_and_mean_match_torch_at_ties(seed, c, h, w, zp):
    """The int8 mean layer against torch, on sums that are exact ties: the adaptive pool to 1x1 of
    a contiguous tensor (NCHW kernel; NHWC kernel with one channel, as the converter picks) and of a
    channels-last one (NHWC kernel), and the fast mean."""
    x = _tied(np.random.default_rng(seed), (2, c, h, w))
    tq = torch._make_per_tensor_quantized_tensor(torch.from_numpy(x), 0.05, zp)

    def run(mode, shape):
        y = np.empty(shape, np.uint8)
        layer = Layer("qmean", [0], [1], dict(inner_shape=(h, w), mode=mode, range=(0, 255), zero_point=zp))
        t8.qmean(layer, None)[0].build().fn(x, y)
        return y

    pool = torch.nn.functional.adaptive_avg_pool2d
    np.testing.assert_array_equal(run("adaptive_nhwc" if c == 1 else "adaptive", (2, c, 1, 1)),
                                  pool(tq, 1).int_repr().numpy())
    np.testing.assert_array_equal(run("adaptive_nhwc", (2, c, 1, 1)),
                                  pool(tq.contiguous(memory_format=torch.channels_last), 1).int_repr().numpy())
    np.testing.assert_array_equal(run("mean", (2, c)), tq.mean((2, 3)).int_repr().numpy())


@pytest.mark.skipif("onednn" not in torch.backends.quantized.supported_engines, reason="torch without oneDNN")
def test_convs_torch_packed_for_onednn_take_its_requantization_in_the_int8_engine():
    """Weights torch packs for oneDNN (engine ``onednn``; ``x86`` does so on a VNNI CPU) are requantized
    as oneDNN does (the importer's ``arith``): the int8 engine's result is torch's, bit for bit (with
    fbgemm's requantization it differed in 3 of 131072 values). Without VNNI oneDNN's sums saturate in
    int16 where activations exceed 127: every activation is observed in 7 bits (``reduce_range``), the input
    and the ReLU'd conv output alike, so torch's result is exact on every CPU."""
    import torch.ao.quantization as tq
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
            self.c1, self.r, self.c2 = nn.Conv2d(8, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 1)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            y = self.c2(self.r(self.c1(self.q(x))))
            # torch's NHWC global pool of a conv output (the importer's channels-last form)
            return self.dq(self.fc(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))), self.dq(y)

    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = "onednn"
    try:
        torch.manual_seed(0)
        net = Net().eval()
        onednn = tq.get_default_qconfig("onednn")
        net.qconfig = tq.QConfig(activation=onednn.activation.with_args(reduce_range=True), weight=onednn.weight)
        tq.fuse_modules(net, [["c1", "r"]], inplace=True)
        tq.prepare(net, inplace=True)
        for _ in range(4):
            net(torch.randn(8, 8, 16, 16))
        tq.convert(net, inplace=True)
        x = torch.randn(16, 8, 16, 16, generator=torch.Generator().manual_seed(1))
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            model = srcore.from_torchscript(net, (x,))
            ref = [r.numpy() for r in net(x)]
    finally:
        torch.backends.quantized.engine = previous
    arith = {n.kind: n.inputs[-1].node.attrs.get("value") for n in model.graph.all_nodes()
             if n.kind.startswith("quantized::q")}
    assert set(arith.values()) == {"onednn"}, arith
    sm = srcore.StaticModule(model, TRT)
    assert [pn.fn.backend for pn in sm.top.nodes if pn.fn is not None] == ["trt_like"]
    desc = _engines(sm)[0].describe()
    assert desc.count("qconv -> ") == 2 and "qgemm -> " in desc
    for got, want in zip(sm(x.numpy()), ref):
        np.testing.assert_array_equal(got, want)

"""The fuse pass's ``quantized::qconv2d_then_add`` (a quantized conv whose only use is a
``quantized::add`` variant): the conv requantized to its own parameters and the add applied in its
epilogue, with both of torch's roundings (the conv's, then the add's vectorized or scalar path in
the add's loop order). Bit for bit with ``torch.ops.quantized`` conv2d then add, over shapes,
scales, zero points, relus and the three add layouts, with exact ties (the add's output scale
twice the inputs', an odd zero point: the vectorized and scalar paths round them differently)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import srcore
from srcore.cpu_features import cpu_features
from srcore.plugin import QParams, QuantizedArray, int8_gemm
from srcore_quantized.kernels import binary
from srcore_quantized.kernels import conv as qconv
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)

torch = pytest.importorskip("torch")
CL = torch.channels_last
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.usefixtures("fbgemm")]


def _torch_ref(tx, tw, b, stride, pad, sc, zc, conv_relu, to, so, zo, relu, layout):
    packed = torch.ops.quantized.conv2d_prepack(tw, b, [stride] * 2, [pad] * 2, [1, 1], 1)
    conv = torch.ops.quantized.conv2d_relu if conv_relu else torch.ops.quantized.conv2d
    y = conv(tx, packed, sc, zc)
    y, to = {"nchw": (y.contiguous(), to.contiguous()),
             "channels_last": (y.contiguous(memory_format=CL), to.contiguous(memory_format=CL)),
             "mixed_layout": (y.contiguous(memory_format=CL), to.contiguous())}[layout]
    add = torch.ops.quantized.add_relu if relu else torch.ops.quantized.add
    return add(y, to, so, zo).int_repr().numpy()


@pytest.mark.one_pass
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 31), c=st.integers(1, 12), cout=st.integers(1, 20), hw=st.integers(1, 9),
       k=st.sampled_from([1, 3]), stride=st.sampled_from([1, 2]), scale=st.sampled_from([0.02, 0.05, 0.13]),
       zps=st.tuples(st.integers(0, 40), st.integers(0, 127), st.integers(0, 127)),
       flags=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
       layout=st.sampled_from(["nchw", "channels_last", "mixed_layout"]))
def test_conv_then_add_is_torchs(monkeypatch, seed, c, cout, hw, k, stride, scale, zps, flags, layout):
    conv_relu, relu, other_cl, planned = flags
    monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: True)
    rng = np.random.default_rng(seed)
    pad = k // 2
    tx = torch._make_per_tensor_quantized_tensor(torch.from_numpy(rng.integers(0, 128, (2, c, hw, hw + 1))
                                                                  .astype(np.uint8)), 0.02, 7)
    wf = torch.from_numpy(rng.normal(0, 0.1, (cout, c, k, k)).astype(np.float32))
    tw = torch.quantize_per_channel(wf, torch.from_numpy(rng.uniform(0.001, 0.003, cout)),
                                    torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
    b = torch.from_numpy(rng.normal(0, 0.1, cout).astype(np.float32))
    oh, ow = (hw + 2 * pad - k) // stride + 1, (hw + 1 + 2 * pad - k) // stride + 1
    zc, zb, zo = zps[0], zps[1], zps[2] | 1          # odd output zero point: exact ties differ by path
    to = torch._make_per_tensor_quantized_tensor(torch.from_numpy(rng.integers(0, 256, (2, cout, oh, ow))
                                                                  .astype(np.uint8)), scale, zb)
    want = _torch_ref(tx, tw, b, stride, pad, scale, zc, conv_relu, to, 2 * scale, zo, relu, layout)
    x, w = srq(tx), srq(tw)
    other = srq(to)
    if other_cl:     # other's bytes channels-last (another conv's output)
        mem = np.ascontiguousarray(other.view(np.ndarray).transpose(0, 2, 3, 1))
        other = QuantizedArray.wrap(mem.transpose(0, 3, 1, 2), "quint8", other.qparams)
    out = np.empty(want.shape, np.uint8) if planned else None
    args = (x, other, w, b.numpy(), stride, pad, 1, 1, scale, zc, conv_relu, 2 * scale, zo, relu, layout)
    fused = []
    real = int8_gemm.conv_add_requantize
    monkeypatch.setattr(int8_gemm, "conv_add_requantize", lambda *a: fused.append(real(*a)) or fused[-1])
    got = qconv.qconv_then_add_out(*args, out=out)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert fused and fused[0] is not None       # the add ran in the conv's epilogue
    # without the int8 GEMM: the conv kernel then the add kernel, the same bytes
    monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: False)
    np.testing.assert_array_equal(np.asarray(qconv.qconv_then_add_out(*args)), want)


@pytest.mark.one_pass
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 31), outliers=st.sampled_from([0, 5, 60]), layout=st.sampled_from(
    ["nchw", "channels_last", "mixed_layout"]), relu=st.booleans())
def test_conv_then_add_with_bytes_above_the_int16_limit(monkeypatch, seed, outliers, layout, relu):
    """Input bytes above the int16 pair's limit (the scan's corrections) before the fused add: equal
    to the conv kernel then the add kernel (each bit for bit with torch in their own tests)."""
    monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: True)
    rng = np.random.default_rng(seed)
    x = QuantizedArray(rng.integers(0, 128, (1, 8, 9, 9)).astype(np.uint8), "quint8", QParams(0.02, 3))
    flat = np.asarray(x).reshape(-1)
    flat[rng.integers(0, flat.size, outliers)] = rng.integers(130, 256, outliers)
    w = QuantizedArray(np.full((12, 8, 3, 3), 127, np.int8), "qint8", QParams((0.002,) * 12, (0,) * 12, axis=0))
    bias = rng.normal(0, 0.1, 12).astype(np.float32)
    other = QuantizedArray(rng.integers(0, 256, (1, 12, 9, 9)).astype(np.uint8), "quint8", QParams(0.1, 9))
    got = qconv.qconv_then_add_out(x, other, w, bias, 1, 1, 1, 1, 0.1, 4, False, 0.2, 11, relu, layout)
    y = qconv.qconv_out(x, w, bias, 1, 1, 1, 1, 0.1, 4)
    add = {"nchw": binary._add, "channels_last": binary._add_in_channels_last,
           "mixed_layout": binary._add_in_mixed_layout}[layout]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(add(y, other, 0.2, 11, relu, None, "add")))


class _Block(torch.nn.Module):
    """A stem conv, then resnet's basic block: conv -> relu -> conv, + the block's input."""

    def __init__(self):
        super().__init__()
        self.c0 = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.c1 = torch.nn.Conv2d(6, 6, 3, padding=1)
        self.c2 = torch.nn.Conv2d(6, 6, 3, padding=1)

    def forward(self, x):
        h = torch.relu(self.c0(x))
        return torch.relu(self.c2(torch.relu(self.c1(h))) + h)


class _BlockTwice(_Block):
    """The second conv's result also returned (used twice: the fusion must leave it)."""

    def forward(self, x):
        h = torch.relu(self.c0(x))
        y = self.c2(torch.relu(self.c1(h)))
        return torch.relu(y + h), y


@pytest.mark.parametrize("twice", [False, True])
def test_the_fuse_pass_on_a_quantized_residual_block(monkeypatch, twice):
    """srcore.quantize's residual add after a conv becomes ``quantized::qconv2d_then_add`` when the
    conv's result has no other use, and the model's results are those of the unfused graph."""
    from srcore.passes import fuse

    torch.manual_seed(0)
    x = torch.randn(1, 3, 7, 9)
    model = srcore.from_torchscript(torch.jit.script((_BlockTwice if twice else _Block)().eval()), (x,))
    rng = np.random.default_rng(0)
    q = srcore.quantize(model, [(x.numpy() + np.float32(0.1) * rng.standard_normal(x.shape).astype(np.float32),)
                                for _ in range(2)])
    sm = srcore.StaticModule(q)
    kinds = [n.kind for n in sm.graph.all_nodes()]
    assert ("quantized::qconv2d_then_add" in kinds) == (not twice)
    got = sm(x.numpy())
    monkeypatch.setattr(fuse, "FUSIONS", [f for f in fuse.FUSIONS if f.match is not fuse.qconv_then_add])
    plain = srcore.StaticModule(q)
    assert "quantized::qconv2d_then_add" not in [n.kind for n in plain.graph.all_nodes()]
    for a, b in zip(got if twice else [got], plain(x.numpy()) if twice else [plain(x.numpy())]):
        np.testing.assert_array_equal(a, b)

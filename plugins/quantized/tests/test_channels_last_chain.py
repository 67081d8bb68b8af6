"""Chains of quantized convolutions, adds and max pools stay channels-last (docs/quantization.md, fast
int8): each result is an (N, C, H, W) view of channels-last bytes, the next kernel reads it without a
transposing copy, and every result is still torch's (fbgemm), bit for bit, in the planned buffer or a
new one. Shapes whose element count is not a multiple of torch's vector block put elements on its
scalar path, which the channels-last add redoes in NCHW order."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore.ir.quant import QParams
from srcore.qarray import QuantizedArray
from srcore_quantized.kernels import binary, conv, pool
from srcore_quantized.kernels._common import channels_last
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.one_pass, pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.usefixtures("fbgemm")]


def same(got, ref):
    assert isinstance(got, QuantizedArray)
    assert got.qparams == srq(ref).qparams
    np.testing.assert_array_equal(got.int_repr(), ref.int_repr().numpy())


def is_channels_last(y) -> bool:
    a = y.view(np.ndarray)
    return channels_last(a) is not None and not a.flags.c_contiguous


def _weight(rng, cout, cin, k):
    """|w| <= 63: fbgemm's AVX2 int16 pairs cannot saturate on 8-bit activations (conv outputs are)."""
    w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
    scales = torch.from_numpy(np.abs(w).reshape(cout, -1).max(axis=1).astype(np.float64) / 63)
    return torch.quantize_per_channel(torch.from_numpy(w), scales, torch.zeros(cout, dtype=torch.long), 0, torch.qint8)


def _conv(x_sr, x_t, w, b, stride, pad, groups, scale, zp, relu, out=None):
    packed = torch.ops.quantized.conv2d_prepack(w, b, [stride] * 2, [pad] * 2, [1, 1], groups)
    ref = (torch.ops.quantized.conv2d_relu if relu else torch.ops.quantized.conv2d)(x_t, packed, scale, zp)
    fn = conv.qconv_relu_out if relu else conv.qconv_out
    got = fn(x_sr, srq(w), b.numpy(), [stride] * 2, [pad] * 2, [1, 1], groups, scale, zp, out=out)
    same(got, ref)
    return got, ref


def _planned(shape, planned: bool):
    return np.empty(shape, np.uint8) if planned else None


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2 ** 31), c=st.sampled_from([3, 6, 16]), h=st.integers(4, 9), w=st.integers(4, 9),
       scales=st.lists(st.floats(0.02, 0.3), min_size=4, max_size=4),
       zps=st.lists(st.integers(0, 128), min_size=4, max_size=4), ceil=st.booleans(), planned=st.booleans())
def test_conv_add_pool_chain_is_torchs_and_stays_channels_last(seed, c, h, w, scales, zps, ceil, planned):
    rng = np.random.default_rng(seed)
    n = 2
    xt = torch._make_per_tensor_quantized_tensor(torch.from_numpy(rng.integers(0, 128, (n, 3, h, w), dtype=np.uint8)),
                                                 0.05, 20)
    # 3x3 conv + relu (an NCHW input: the rows are gathered from it), then a 1x1 conv of its output
    y1, t1 = _conv(srq(xt), xt, _weight(rng, c, 3, 3), torch.randn(c), 1, 1, 1, scales[0], zps[0], True,
                   _planned((n, c, h, w), planned))
    assert is_channels_last(y1) or c * h * w == 1
    y2, t2 = _conv(y1, t1, _weight(rng, c, c, 1), torch.randn(c), 1, 0, 1, scales[1], zps[1], False,
                   _planned((n, c, h, w), planned))
    assert is_channels_last(y2)
    # the residual add (+relu) of two channels-last tensors; torch's reference on NCHW tensors (the
    # scalar tail in NCHW order, as srcore's add on contiguous inputs)
    out = _planned((n, c, h, w), planned)
    y3 = binary.add_relu_out(y2, y1, scales[2], zps[2], out=out)
    t3 = torch.ops.quantized.add_relu(t2.contiguous(), t1.contiguous(), scales[2], zps[2])
    same(y3, t3)
    assert is_channels_last(y3)
    if planned:
        assert np.shares_memory(y3.view(np.ndarray), out)
    # max pool of it, then a depthwise conv and a strided 3x3 conv of the pooled tensor
    oh = int(torch.nn.functional.max_pool2d(torch.zeros(1, 1, h, w), 3, 2, 1, ceil_mode=ceil).shape[2])
    ow = int(torch.nn.functional.max_pool2d(torch.zeros(1, 1, h, w), 3, 2, 1, ceil_mode=ceil).shape[3])
    y4 = pool.max_pool2d_out(y3, [3, 3], [2, 2], [1, 1], [1, 1], ceil, out=_planned((n, c, oh, ow), planned))
    t4 = torch.nn.functional.max_pool2d(t3, 3, 2, 1, ceil_mode=ceil)
    same(y4, t4)
    assert is_channels_last(y4) or oh * ow == 1 or c == 1
    y5, t5 = _conv(y4, t4, _weight(rng, c, 1, 3), torch.randn(c), 1, 1, c, scales[3], zps[3], True,
                   _planned((n, c, oh, ow), planned))
    y6, _ = _conv(y5, t5, _weight(rng, 4, c, 3), torch.randn(4), 2, 1, 1, 0.1, zps[3], False)
    # what the next kernel sees does not depend on the layout: the same on an NCHW copy
    np.testing.assert_array_equal(
        conv.qconv_out(QuantizedArray(np.ascontiguousarray(y5.view(np.ndarray)), "quint8", y5.qparams),
                       srq(_weight(np.random.default_rng(seed), 4, c, 3)), None, [2, 2], [1, 1], [1, 1], 1, 0.1,
                       zps[3]).int_repr(),
        conv.qconv_out(y5, srq(_weight(np.random.default_rng(seed), 4, c, 3)), None, [2, 2], [1, 1], [1, 1], 1, 0.1,
                       zps[3]).int_repr())


@pytest.mark.parametrize("shape", [(1, 5, 3, 5), (2, 8, 2, 4), (1, 3, 7, 7)])
def test_channels_last_add_rounds_the_nchw_tail_as_torch(shape):
    """Exact ties (output scale = twice the inputs'): torch's vector and scalar paths round them
    differently; on channels-last inputs the elements of the scalar path are still the last in NCHW order."""
    rng = np.random.default_rng(sum(shape))
    nhwc = (shape[0], shape[2], shape[3], shape[1])
    a = np.moveaxis(rng.integers(0, 256, nhwc).astype(np.uint8), -1, 1)
    b = np.moveaxis(rng.integers(0, 256, nhwc).astype(np.uint8), -1, 1)
    qa, qb = QuantizedArray(a, "quint8", QParams(0.13, 131)), QuantizedArray(b, "quint8", QParams(0.13, 63))
    got = binary.add_out(qa, qb, 0.26, 79)
    ta = torch._make_per_tensor_quantized_tensor(torch.from_numpy(np.ascontiguousarray(a)), 0.13, 131)
    tb = torch._make_per_tensor_quantized_tensor(torch.from_numpy(np.ascontiguousarray(b)), 0.13, 63)
    same(got, torch.ops.quantized.add(ta, tb, 0.26, 79))
    assert is_channels_last(got)
    # in place (the planner may give the add its first input's buffer): the same bytes
    inplace = binary.add_out(qa, qb, 0.26, 79, out=np.ascontiguousarray(a).reshape(-1).reshape(a.shape) * 0)
    np.testing.assert_array_equal(inplace.int_repr(), got.int_repr())

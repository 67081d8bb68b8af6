"""quantized_cpu kernels against torch.ops.quantized.* (fbgemm engine), bit for bit, with hypothesis
over shapes, scales and zero points.

Activations of linear/conv stay within 7 bits (0..127): fbgemm's AVX2 kernels saturate pairs of
8-bit products at int16 beyond that (torch's x86 qconfigs use reduce_range for this reason), while
srcore accumulates exactly; ``test_linear_accumulates_exactly_where_fbgemm_avx2_saturates`` pins
srcore's behaviour there against a hand-computed value.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore.ir.quant import QParams
from srcore.qarray import QuantizedArray
from srcore_quantized.kernels import activation, binary, conv, convert, linear, norm, pool, shape, upsample
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.one_pass, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.usefixtures("fbgemm")]
F = torch.nn.functional
TQ = {"quint8": torch.quint8, "qint8": torch.qint8, "qint32": torch.qint32}
RANGE = {"quint8": (0, 255), "qint8": (-128, 127), "qint32": (-1000, 1000)}
EXAMPLES = settings(max_examples=12, deadline=None)


def same(got, ref):
    """Bit for bit: the stored integers and the parameters (or the float values)."""
    if ref.is_quantized:
        assert isinstance(got, QuantizedArray)
        assert got.qparams == srq(ref).qparams
        np.testing.assert_array_equal(got.int_repr(), ref.int_repr().numpy())
    else:
        np.testing.assert_array_equal(got, ref.numpy())


@st.composite
def qtensor(draw, shape=None, qdtype=None, lo=None, hi=None):
    qdtype = qdtype or draw(st.sampled_from(["quint8", "qint8"]))
    shape = shape if shape is not None else tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    qmin, qmax = RANGE[qdtype]
    lo, hi = qmin if lo is None else lo, qmax if hi is None else hi
    seed = draw(st.integers(0, 2 ** 31))
    ints = np.random.default_rng(seed).integers(lo, hi + 1, shape).astype({"quint8": np.uint8, "qint8": np.int8,
                                                                           "qint32": np.int32}[qdtype])
    scale = draw(st.floats(1e-3, 2.0))
    zp = draw(st.integers(qmin // 2 if qdtype != "qint32" else -50, qmax // 2 if qdtype != "qint32" else 50))
    return torch._make_per_tensor_quantized_tensor(torch.from_numpy(ints), scale, zp)


_scale = st.floats(1e-3, 2.0)


# -- conversion ---------------------------------------------------------------------------------------
@EXAMPLES
@given(shape=st.lists(st.integers(1, 70), min_size=1, max_size=3), scale=_scale, data=st.data(),
       qdtype=st.sampled_from(["quint8", "qint8", "qint32"]))
def test_quantize_dequantize_per_tensor(shape, scale, data, qdtype):
    qmin, qmax = RANGE[qdtype]
    zp = data.draw(st.integers(max(qmin, -200), min(qmax, 200)))
    x = torch.from_numpy((np.random.default_rng(len(shape)).standard_normal(shape) * 50).astype(np.float32))
    x.view(-1)[::3] = (torch.arange(x.numel())[::3] % 7 - 3 + 0.5) * scale  # exact ties
    ref = torch.quantize_per_tensor(x, scale, zp, TQ[qdtype])
    got = convert.quantize_per_tensor_out(x.numpy(), scale, zp, {"quint8": 13, "qint8": 12, "qint32": 14}[qdtype])
    same(got, ref)
    same(convert.dequantize_out(got), ref.dequantize())
    out = np.empty(x.shape, np.float32)
    assert convert.dequantize_out(got, out=out) is out


@EXAMPLES
@given(shape=st.lists(st.integers(1, 6), min_size=2, max_size=4), data=st.data())
def test_quantize_per_channel_and_dequantize(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    scales = np.array(data.draw(st.lists(_scale, min_size=n, max_size=n)))
    zps = np.array(data.draw(st.lists(st.integers(-20, 20), min_size=n, max_size=n)))
    x = torch.from_numpy((np.random.default_rng(n).standard_normal(shape) * 5).astype(np.float32))
    ref = torch.quantize_per_channel(x, torch.from_numpy(scales), torch.from_numpy(zps), axis, torch.qint8)
    got = convert.quantize_per_channel_out(x.numpy(), scales, zps, axis, 12)
    same(got, ref)
    same(convert.dequantize_out(got), ref.dequantize())


@EXAMPLES
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3), spread=st.floats(1e-6, 1e3),
       reduce_range=st.booleans(), shift=st.floats(-1, 1))
def test_dynamic_quantization_chooses_torchs_parameters(shape, spread, reduce_range, shift):
    x = torch.from_numpy(((np.random.default_rng(3).standard_normal(shape) + shift) * spread).astype(np.float32))
    same(convert.quantize_per_tensor_dynamic_out(x.numpy(), 13, reduce_range),
         torch.quantize_per_tensor_dynamic(x, torch.quint8, reduce_range))


# -- elementwise --------------------------------------------------------------------------------------
@EXAMPLES
@given(a=qtensor(), data=st.data(), scale=_scale, relu=st.booleans())
def test_add_and_mul(a, data, scale, relu):
    qdtype = "quint8" if a.dtype == torch.quint8 else "qint8"
    b = data.draw(qtensor(shape=tuple(a.shape), qdtype=qdtype))
    zp = data.draw(st.integers(*RANGE[qdtype]))
    if relu:
        same(binary.add_relu_out(srq(a), srq(b), scale, zp), torch.ops.quantized.add_relu(a, b, scale, zp))
        same(binary.mul_relu_out(srq(a), srq(b), scale, zp), torch.ops.quantized.mul_relu(a, b, scale, zp))
    else:
        same(binary.add_out(srq(a), srq(b), scale, zp), torch.ops.quantized.add(a, b, scale, zp))
        same(binary.mul_out(srq(a), srq(b), scale, zp), torch.ops.quantized.mul(a, b, scale, zp))


@pytest.mark.parametrize("n", [1, 63, 64, 65, 200])
def test_add_rounds_the_vectorized_blocks_and_the_tail_as_torch(n):
    """Exact ties (output scale = twice the inputs'): torch's vector path (fma dequantize, round, then
    add the zero point) and its scalar tail (zero point added before rounding) round them differently."""
    rng = np.random.default_rng(n)
    a = torch._make_per_tensor_quantized_tensor(torch.from_numpy(rng.integers(0, 256, n).astype(np.uint8)), 0.13, 131)
    b = torch._make_per_tensor_quantized_tensor(torch.from_numpy(rng.integers(0, 256, n).astype(np.uint8)), 0.13, 63)
    same(binary.add_out(srq(a), srq(b), 0.26, 79), torch.ops.quantized.add(a, b, 0.26, 79))


@EXAMPLES
@given(a=qtensor(), c=st.one_of(st.floats(-50, 50), st.sampled_from([0.0, 1e4, -1e4])))
def test_scalar_add_and_mul(a, c):
    same(binary.add_scalar_out(srq(a), c), torch.ops.quantized.add_scalar(a, c))
    same(binary.add_scalar_relu_out(srq(a), c), torch.ops.quantized.add_scalar_relu(a, c))
    same(binary.mul_scalar_out(srq(a), c), torch.ops.quantized.mul_scalar(a, c))
    same(binary.mul_scalar_relu_out(srq(a), c), torch.ops.quantized.mul_scalar_relu(a, c))


@EXAMPLES
@given(a=qtensor(shape=(2, 3, 4)), data=st.data(), dim=st.integers(0, 2))
def test_cat(a, data, dim):
    qdtype = "quint8" if a.dtype == torch.quint8 else "qint8"
    b = data.draw(qtensor(shape=(2, 3, 4), qdtype=qdtype))
    scale, zp = data.draw(_scale), data.draw(st.integers(*RANGE[qdtype]))
    same(binary.cat_out([srq(a), srq(b)], dim, scale, zp), torch.ops.quantized.cat([a, b], dim, scale, zp))
    same(binary.cat_relu_out([srq(a), srq(b)], dim, scale, zp), torch.ops.quantized.cat_relu([a, b], dim, scale, zp))
    same(binary.aten_cat_out([srq(a), srq(b)], dim), torch.cat([a, b], dim))


@EXAMPLES
@given(a=qtensor(), data=st.data())
def test_activations(a, data):
    qdtype = "quint8" if a.dtype == torch.quint8 else "qint8"
    scale, zp = data.draw(_scale), data.draw(st.integers(*RANGE[qdtype]))
    slope = data.draw(st.floats(0.001, 0.5))
    same(activation.relu_out(srq(a)), torch.relu(a))
    same(activation.relu6_out(srq(a)), F.relu6(a))
    same(activation.hardtanh_out(srq(a), -0.7, 0.9), F.hardtanh(a, -0.7, 0.9))
    same(activation.clamp_out(srq(a), -0.2, None), a.clamp(-0.2))
    same(activation.leaky_relu_out(srq(a), slope), F.leaky_relu(a, slope))
    same(activation.quantized_leaky_relu(srq(a), slope, False, scale, zp),
         torch.ops.quantized.leaky_relu(a, slope, False, scale, zp))
    same(activation.hardswish_out(srq(a), scale, zp), torch.ops.quantized.hardswish(a, scale, zp))
    same(activation.sigmoid_out(srq(a)), torch.sigmoid(a))
    same(activation.hardsigmoid_out(srq(a)), F.hardsigmoid(a))
    same(activation.tanh_out(srq(a)), torch.tanh(a))


# -- pools and views ------------------------------------------------------------------------------------
@EXAMPLES
@given(dims=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(3, 12), st.integers(3, 12)),
       k=st.integers(1, 3), s=st.integers(1, 3), data=st.data())
def test_pools_and_means(dims, k, s, data):
    x = data.draw(qtensor(shape=dims))
    p = data.draw(st.integers(0, k // 2))
    d, ceil, cip = data.draw(st.integers(1, 2)), data.draw(st.booleans()), data.draw(st.booleans())
    if min(dims[2:]) + 2 * p - d * (k - 1) - 1 < 0:
        return  # no output (torch refuses it too)
    same(pool.max_pool2d_out(srq(x), [k, k], [s, s], [p, p], [d, d], ceil), F.max_pool2d(x, k, s, p, d, ceil))
    same(pool.avg_pool2d_out(srq(x), [k, k], [s, s], [p, p], ceil, cip), F.avg_pool2d(x, k, s, p, ceil, cip))
    size = [data.draw(st.integers(1, x.shape[2])), data.draw(st.integers(1, x.shape[3]))]
    same(pool.adaptive_avg_pool2d_out(srq(x), size), F.adaptive_avg_pool2d(x, size))
    # the global pool, on NCHW and on channels-last memory (a conv's output)
    ref = F.adaptive_avg_pool2d(x, [1, 1])
    same(pool.adaptive_avg_pool2d_out(srq(x), [1, 1]), ref)
    xq = srq(x)
    cl = QuantizedArray(np.ascontiguousarray(np.asarray(xq).transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2), xq.qdtype,
                        xq.qparams)
    same(pool.adaptive_avg_pool2d_out(cl, [1, 1]), ref)
    same(pool.max_pool2d_out(cl, [k, k], [s, s], [p, p], [d, d], ceil), F.max_pool2d(x, k, s, p, d, ceil))
    same(pool.mean_out(srq(x), [2, 3], True), x.mean((2, 3), keepdim=True))
    same(upsample.upsample_nearest2d_out(srq(x), [x.shape[2] * 2, x.shape[3] + 3]),
         F.interpolate(x, size=[x.shape[2] * 2, x.shape[3] + 3], mode="nearest"))
    same(shape.flatten(srq(x), 1, -1), x.flatten(1))
    same(shape.permute(srq(x), [0, 2, 3, 1]), x.permute(0, 2, 3, 1).contiguous())


# -- linear / conv / norms ----------------------------------------------------------------------------------
@EXAMPLES
@given(dims=st.lists(st.integers(1, 40), min_size=2, max_size=3), n=st.integers(1, 24), per_channel=st.booleans(),
       bias=st.booleans(), relu=st.booleans(), y_scale=_scale, data=st.data())
def test_linear(dims, n, per_channel, bias, relu, y_scale, data):
    x = data.draw(qtensor(shape=tuple(dims), qdtype="quint8", lo=0, hi=127))
    k = x.shape[-1]
    wf = torch.from_numpy(np.random.default_rng(n).standard_normal((n, k)).astype(np.float32))
    if per_channel:
        scales = torch.from_numpy(np.array(data.draw(st.lists(st.floats(1e-3, 0.1), min_size=n, max_size=n))))
        w = torch.quantize_per_channel(wf, scales, torch.zeros(n, dtype=torch.long), 0, torch.qint8)
    else:
        w = torch.quantize_per_tensor(wf, data.draw(st.floats(1e-3, 0.1)), 0, torch.qint8)
    b = torch.randn(n) if bias else None
    y_zp = data.draw(st.integers(0, 255))
    packed = torch.ops.quantized.linear_prepack(w, b)
    fn, ref_fn = (linear.qlinear_relu_out, torch.ops.quantized.linear_relu) if relu else \
        (linear.qlinear_out, torch.ops.quantized.linear)
    same(fn(srq(x), srq(w), None if b is None else b.numpy(), y_scale, y_zp), ref_fn(x, packed, y_scale, y_zp))
    xf = torch.from_numpy((np.random.default_rng(k).standard_normal(tuple(x.shape)) * 3).astype(np.float32))
    same(linear.qlinear_dynamic_out(xf.numpy(), srq(w), None if b is None else b.numpy(), True),
         torch.ops.quantized.linear_dynamic(xf, packed, True))


def test_linear_accumulates_exactly_where_fbgemm_avx2_saturates():
    x = QuantizedArray(np.full((1, 4), 255, np.uint8), "quint8", QParams(1.0, 0))
    w = QuantizedArray(np.full((1, 4), 127, np.int8), "qint8", QParams(1.0, 0))
    y = linear.qlinear_out(x, w, None, 1000.0, 0)
    assert int(y.int_repr()[0, 0]) == round(4 * 255 * 127 / 1000)   # 130; AVX2 fbgemm saturates to 66


@EXAMPLES
@given(groups=st.sampled_from([1, 2, "dw"]), cin=st.integers(1, 3), mult=st.integers(1, 2), hw=st.integers(3, 9),
       k=st.integers(1, 3), stride=st.integers(1, 2), pad=st.integers(0, 1), dil=st.integers(1, 2),
       relu=st.booleans(), data=st.data())
def test_conv2d(groups, cin, mult, hw, k, stride, pad, dil, relu, data):
    c = cin * 2
    g = c if groups == "dw" else groups
    cout = g * mult
    if (hw + 2 * pad - dil * (k - 1) - 1) < 0:
        return
    x = data.draw(qtensor(shape=(2, c, hw, hw + 1), qdtype="quint8", lo=0, hi=127))
    scales = torch.from_numpy(np.array(data.draw(st.lists(st.floats(1e-3, 0.1), min_size=cout, max_size=cout))))
    w = torch.quantize_per_channel(torch.randn(cout, c // g, k, k), scales, torch.zeros(cout, dtype=torch.long), 0,
                                   torch.qint8)
    b = torch.randn(cout)
    y_scale, y_zp = data.draw(_scale), data.draw(st.integers(0, 255))
    packed = torch.ops.quantized.conv2d_prepack(w, b, [stride] * 2, [pad] * 2, [dil] * 2, g)
    fn, ref_fn = (conv.qconv_relu_out, torch.ops.quantized.conv2d_relu) if relu else \
        (conv.qconv_out, torch.ops.quantized.conv2d)
    same(fn(srq(x), srq(w), b.numpy(), [stride] * 2, [pad] * 2, [dil] * 2, g, y_scale, y_zp),
         ref_fn(x, packed, y_scale, y_zp))


@pytest.mark.parametrize("relu", [False, True])
def test_conv2d_add_like_torchs_onednn_kernel(relu):
    """torch has conv2d_add (+relu) only in its oneDNN engine (x86 PT2E's fused residual block)."""
    torch.backends.quantized.engine = "onednn"
    try:
        for seed in range(5):
            g = torch.Generator().manual_seed(seed)
            x = torch._make_per_tensor_quantized_tensor(torch.randint(0, 128, (2, 4, 7, 8), dtype=torch.uint8,
                                                                      generator=g), 0.05, 0)
            w = torch.quantize_per_channel(torch.randn(6, 4, 3, 3, generator=g), torch.rand(6, generator=g) * 0.05 + 0.01,
                                           torch.zeros(6, dtype=torch.long), 0, torch.qint8)
            b = torch.randn(6, generator=g)
            acc = torch._make_per_tensor_quantized_tensor(torch.randint(0, 256, (2, 6, 7, 8), dtype=torch.uint8,
                                                                        generator=g), 0.07, 5)
            packed = torch.ops.quantized.conv2d_prepack(w, b, [1, 1], [1, 1], [1, 1], 1)
            fn, ref_fn = (conv.qconv_add_relu_out, torch.ops.quantized.conv2d_add_relu) if relu else \
                (conv.qconv_add_out, torch.ops.quantized.conv2d_add)
            same(fn(srq(x), srq(acc), srq(w), b.numpy(), [1, 1], [1, 1], [1, 1], 1, 0.2, 12),
                 ref_fn(x, acc, packed, 0.2, 12))
    finally:
        torch.backends.quantized.engine = "fbgemm"


def test_conv1d():
    x = torch._make_per_tensor_quantized_tensor(torch.randint(0, 128, (2, 4, 11), dtype=torch.uint8), 0.05, 3)
    w = torch.quantize_per_channel(torch.randn(6, 2, 3), torch.rand(6) * 0.05 + 0.01, torch.zeros(6, dtype=torch.long),
                                   0, torch.qint8)
    b = torch.randn(6)
    packed = torch.ops.quantized.conv1d_prepack(w, b, [2], [1], [1], 2)
    same(conv.qconv_out(srq(x), srq(w), b.numpy(), [2], [1], [1], 2, 0.2, 100),
         torch.ops.quantized.conv1d(x, packed, 0.2, 100))


@EXAMPLES
@given(dims=st.tuples(st.integers(1, 2), st.integers(1, 40), st.integers(1, 4), st.integers(1, 4)), relu=st.booleans(),
       scale=_scale, zp=st.integers(-20, 20), data=st.data())
def test_batch_norm_and_layer_norm(dims, relu, scale, zp, data):
    x = data.draw(qtensor(shape=dims))
    qdtype = "quint8" if x.dtype == torch.quint8 else "qint8"
    zp = zp + (100 if qdtype == "quint8" else 0)
    c = x.shape[1]
    w, b, m, v = torch.randn(c), torch.randn(c), torch.randn(c), torch.rand(c) + 0.1
    fn, ref_fn = (norm.batch_norm2d_relu_out, torch.ops.quantized.batch_norm2d_relu) if relu else \
        (norm.batch_norm2d_out, torch.ops.quantized.batch_norm2d)
    same(fn(srq(x), w.numpy(), b.numpy(), m.numpy(), v.numpy(), 1e-5, scale, zp), ref_fn(x, w, b, m, v, 1e-5, scale, zp))
    shape = list(x.shape[2:])
    lw, lb = torch.randn(shape), torch.randn(shape)
    same(norm.layer_norm_out(srq(x), shape, lw.numpy(), lb.numpy(), 1e-5, scale, zp),
         torch.ops.quantized.layer_norm(x, shape, lw, lb, 1e-5, scale, zp))


def test_kernels_write_into_the_planned_buffer_and_refuse_plain_arrays():
    from srcore.errors import KernelError

    x = torch.quantize_per_tensor(torch.randn(2, 5), 0.1, 10, torch.quint8)
    out = np.empty((2, 5), np.uint8)
    y = activation.relu_out(srq(x), out=out)
    assert y.base is out or np.shares_memory(y, out)
    with pytest.raises(KernelError, match="not a quantized tensor"):
        activation.relu_out(np.ones(3, np.uint8))
    with pytest.raises(KernelError, match="outside the range of quint8"):
        binary.add_out(srq(x), srq(x), 0.1, 300)


@pytest.mark.parametrize("channels, memory", [(1, torch.contiguous_format), (3, torch.channels_last),
                                               (3, torch.contiguous_format)])
@pytest.mark.parametrize("size", [[1, 1], [2, 1]])
def test_adaptive_avg_pool_ties_take_the_kernel_of_the_memory_format(channels, memory, size):
    """Windows whose mean of stored values is an exact half (118.5 = 3318 / 28 per 4 x 7 window):
    torch's NHWC kernel (channels-last input, or one channel: torch counts it channels-last)
    rounds ``zp + (sum - n zp) / n`` = 34 + 84.5 to 118, its NCHW kernel ``sum * (1 / kH / kW)``
    (a float32 product just above the half) to 119."""
    q = np.tile(np.repeat(np.array([119, 118], np.uint8), 14).reshape(4, 7), (2 if size == [2, 1] else 1, 1))
    q = np.broadcast_to(q, (1, channels) + q.shape).copy()
    x = torch._make_per_tensor_quantized_tensor(torch.from_numpy(q), 1.0, 34).contiguous(memory_format=memory)
    ref = F.adaptive_avg_pool2d(x, size)
    nhwc = channels == 1 or memory == torch.channels_last
    assert (ref.int_repr().numpy() == (118 if nhwc else 119)).all()      # the two kernels differ here
    same(pool.adaptive_avg_pool2d_out(srq(x), size), ref)


@pytest.mark.parametrize("channels, want", [(1, 11), (3, 12)])
def test_adaptive_avg_pool_reciprocals_of_each_kernel(channels, want):
    """An 11 x 10 qint8 window (zero point -4) of 55 elevens and 55 twelves, mean 11.5: torch's NHWC
    kernel (one channel) computes -4 + 1705 * (1/110 divided in double, rounded to float32) =
    11.499999 -> 11; its NCHW kernel 1265 * ((1/11)/10 in float32, one bit larger) = 11.500001 -> 12.
    (hypothesis found it: the NHWC formula had taken the NCHW kernel's reciprocal)."""
    q = np.repeat(np.array([11, 12], np.int8), 55).reshape(11, 10)
    x = torch._make_per_tensor_quantized_tensor(torch.from_numpy(np.broadcast_to(q, (1, channels, 11, 10)).copy()),
                                                1.0, -4)
    ref = F.adaptive_avg_pool2d(x, [1, 1])
    assert (ref.int_repr().numpy() == want).all()
    same(pool.adaptive_avg_pool2d_out(srq(x), [1, 1]), ref)

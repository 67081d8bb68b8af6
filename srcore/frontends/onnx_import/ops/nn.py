"""Neural-network ONNX ops: Gemm, MatMul, convolutions, pooling, normalizations, softmax, dropout."""
from __future__ import annotations

import numpy as np

from ....ir.types import TensorType
from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS, scalar_type
from ..values import Val
from ._util import dim_item, norm_axis, table


def gemm(cx: NodeContext):
    alpha, beta = float(cx.attr("alpha", 1.0)), float(cx.attr("beta", 1.0))
    ta, tb = cx.attr("transA", 0), cx.attr("transB", 0)
    cx.require_dtype(0, FLOATS)
    if cx.rank(0) != 2 or cx.rank(1) != 2:
        raise Unsupported("A and B must be 2-D")
    a = cx.op("aten::t", cx.x(0)) if ta else cx.x(0)
    has_c = cx.has(2) and beta != 0.0
    b_const = cx.const(1)
    if not tb and b_const is not None:  # a constant B becomes a linear weight (out, in), as torch holds it
        wname = f"{cx.val(1).param_name or cx.val(1).name}.T"
        b = cx.conv.tensor_of(Val(wname, const=np.ascontiguousarray(b_const.T), param_name=wname))
        tb = 1
    else:
        b = cx.x(1)
    if tb and alpha == 1.0 and (not has_c or (beta == 1.0 and cx.rank(2) == 1)):
        return cx.op("aten::linear", a, b, cx.x(2) if has_c else None)
    b = b if not tb else cx.op("aten::t", b)
    if has_c:
        return cx.op("aten::addmm", cx.x(2), a, b, beta, alpha)
    y = cx.op("aten::mm", a, b)
    return y if alpha == 1.0 else cx.op("aten::mul", y, alpha)


def matmul(cx: NodeContext):
    cx.require_dtype(0, FLOATS | {"int32", "int64"})
    return cx.op("aten::matmul", cx.x(0), cx.x(1))


def _spatial(cx: NodeContext, name: str, n: int, default: int) -> list[int]:
    v = cx.attr(name, None)
    v = [default] * n if v is None else list(v)
    if len(v) != n:
        raise Unsupported(f"{name} {v} has {len(v)} entries for {n} spatial dims")
    return v


def _pads(cx: NodeContext, n: int, kernel: list[int], strides: list[int], dilations: list[int]):
    """(begin pads, end pads) from ``pads`` or ``auto_pad``; SAME needs the input's spatial dims."""
    auto = cx.attr("auto_pad", "NOTSET")
    pads = cx.attr("pads", None)
    if auto in ("NOTSET", ""):
        pads = [0] * (2 * n) if pads is None else list(pads)
        if len(pads) != 2 * n:
            raise Unsupported(f"pads {pads} has {len(pads)} entries for {n} spatial dims")
        return pads[:n], pads[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={auto!r}")
    shape = cx.shape(0)
    begin, end = [], []
    for i in range(n):
        d = shape[2 + i] if shape is not None and len(shape) == n + 2 else None
        if not isinstance(d, int):
            raise Unsupported(f"auto_pad={auto} needs spatial dims known at conversion")
        out = -(-d // strides[i])
        total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - d, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin, end


def _torch_pad_list(begin: list[int], end: list[int]) -> list[int]:
    """ONNX (begin..., end...) -> torch's pad list (last dim first: left, right, ...)."""
    out = []
    for b, e in zip(reversed(begin), reversed(end)):
        out += [b, e]
    return out


def _weight_kernel(cx: NodeContext, n: int) -> list[int]:
    wshape = cx.shape(1)
    k = cx.attr("kernel_shape", None)
    if wshape is not None and len(wshape) == n + 2 and all(isinstance(d, int) for d in wshape[2:]):
        if k is not None and list(k) != list(wshape[2:]):
            raise Unsupported(f"kernel_shape {k} differs from the weight's {list(wshape[2:])}")
        return list(wshape[2:])
    if k is None:
        raise Unsupported("the kernel shape is unknown")
    return list(k)


def conv(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    r = cx.rank(0)
    n = r - 2
    if n not in (1, 2, 3):
        raise Unsupported(f"{n}-D convolution")
    kernel = _weight_kernel(cx, n)
    strides = _spatial(cx, "strides", n, 1)
    dil = _spatial(cx, "dilations", n, 1)
    group = cx.attr("group", 1)
    begin, end = _pads(cx, n, kernel, strides, dil)
    x = cx.x(0)
    if begin != end:  # asymmetric: pad explicitly with zeros
        x = cx.op("aten::constant_pad_nd", x, _torch_pad_list(begin, end), 0.0)
        begin = [0] * n
    bias = cx.x(2) if cx.has(2) else None
    return cx.op(f"aten::conv{n}d", x, cx.x(1), bias, strides, begin, dil, group)


def conv_transpose(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    r = cx.rank(0)
    n = r - 2
    if n not in (1, 2, 3):
        raise Unsupported(f"{n}-D transposed convolution")
    kernel = _weight_kernel(cx, n)
    strides = _spatial(cx, "strides", n, 1)
    dil = _spatial(cx, "dilations", n, 1)
    out_pad = _spatial(cx, "output_padding", n, 0)
    group = cx.attr("group", 1)
    auto = cx.attr("auto_pad", "NOTSET")
    out_shape = cx.attr("output_shape", None)
    pads = cx.attr("pads", None)
    shape = cx.shape(0)
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        if shape is None or any(not isinstance(d, int) for d in shape[2:]):
            raise Unsupported("output_shape / SAME padding needs spatial dims known at conversion")
        ins = list(shape[2:])
        target = list(out_shape)[-n:] if out_shape is not None else [ins[i] * strides[i] for i in range(n)]
        begin, end = [], []
        for i in range(n):
            total = strides[i] * (ins[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - target[i]
            if total < 0:
                out_pad[i] -= total  # the output grows past the full size: extra output padding
                total = 0
            small, big = total // 2, total - total // 2
            upper = auto == "SAME_UPPER"
            begin.append(small if upper else big)
            end.append(big if upper else small)
    elif auto == "VALID" or pads is None:
        begin, end = [0] * n, [0] * n
    else:
        if auto not in ("NOTSET", ""):
            raise Unsupported(f"auto_pad={auto!r}")
        begin, end = list(pads[:n]), list(pads[n:])
    sym = [min(b, e) for b, e in zip(begin, end)]
    bias = cx.x(2) if cx.has(2) else None
    kind = f"aten::conv_transpose{n}d"
    if any(p >= max(s, d) for p, s, d in zip(out_pad, strides, dil)):
        raise Unsupported(f"output_padding {out_pad} must be smaller than stride or dilation")
    y = cx.op(kind, cx.x(0), cx.x(1), bias, strides, sym, out_pad, group, dil)
    for i, (b, e, s) in enumerate(zip(begin, end, sym)):  # asymmetric pads: crop the rest
        if b > s or e > s:
            dim = 2 + i
            y = cx.op("aten::slice", y, dim, b - s, -(e - s) if e > s else None, 1)
    return y


def _pool_common(cx: NodeContext, n: int):
    kernel = list(cx.attr("kernel_shape"))
    if len(kernel) != n:
        raise Unsupported(f"kernel_shape {kernel} for {n} spatial dims")
    strides = _spatial(cx, "strides", n, 1)
    dil = _spatial(cx, "dilations", n, 1)
    ceil = bool(cx.attr("ceil_mode", 0))
    begin, end = _pads(cx, n, kernel, strides, dil)
    return kernel, strides, dil, ceil, begin, end


def max_pool(cx: NodeContext):
    cx.require_dtype(0, FLOATS | {"int8", "uint8"})
    n = cx.rank(0) - 2
    if n not in (1, 2, 3):
        raise Unsupported(f"{n}-D pooling")
    order = cx.attr("storage_order", 0)
    kernel, strides, dil, ceil, begin, end = _pool_common(cx, n)
    x = cx.x(0)
    half_ok = all(b <= ((k - 1) * d + 1) // 2 for b, k, d in zip(begin, kernel, dil))
    if len(cx.node.output) > 1 and cx.node.output[1]:
        if begin != end or not half_ok:
            raise Unsupported("the Indices output with asymmetric or large pads")
        y, idx = cx.op(f"aten::max_pool{n}d_with_indices", x, kernel, strides, begin, dil, ceil, n_out=2)
        return y, _onnx_indices(cx, idx, n, order)
    if order != 0:
        raise Unsupported("storage_order=1 without the Indices output")
    if begin != end or not half_ok:
        if ceil:
            raise Unsupported("ceil_mode with asymmetric or large pads")
        x = cx.op("aten::constant_pad_nd", x, _torch_pad_list(begin, end), float("-inf"))
        begin = [0] * n
    return cx.op(f"aten::max_pool{n}d", x, kernel, strides, begin, dil, ceil)


def _onnx_indices(cx: NodeContext, idx, n: int, order: int):
    """torch's indices (flat within each (n, c) plane, row-major) as ONNX's: flat over the whole
    tensor, the spatial part column-major with ``storage_order=1``."""
    shape = cx.shape(0)
    if shape is None or not all(isinstance(d, int) for d in shape[1:]):
        raise Unsupported("the Indices output needs the input's channels and spatial dims known at conversion")
    spatial = shape[2:]
    plane = int(np.prod(spatial))
    if order:
        if n != 2:
            raise Unsupported("storage_order=1 with other than 2-D pooling")
        h, w = spatial
        idx = cx.op("aten::add", cx.op("aten::mul", cx.op("aten::remainder", idx, w), h),
                    cx.op("aten::floor_divide", idx, w))
    if isinstance(shape[0], int):
        base = (np.arange(shape[0] * shape[1], dtype=np.int64) * plane).reshape(shape[0], shape[1], *[1] * n)
        return cx.op("aten::add", idx, cx.conv.param("max_pool_plane_offset", base, TensorType("int64", base.shape)))
    # a dynamic batch: the channel offsets are constant, the sample offsets an arange of the batch
    chan = (np.arange(shape[1], dtype=np.int64) * plane).reshape(1, shape[1], *[1] * n)
    idx = cx.op("aten::add", idx, cx.conv.param("max_pool_plane_offset", chan, TensorType("int64", chan.shape)))
    batch = cx.op("aten::arange", dim_item(cx, 0, cx.x(0), 0), scalar_type("int64"), None, None, None)
    sample = cx.op("aten::reshape", cx.op("aten::mul", batch, shape[1] * plane), [-1, *[1] * (n + 1)])
    return cx.op("aten::add", idx, sample)


def average_pool(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    n = cx.rank(0) - 2
    if n not in (1, 2, 3):
        raise Unsupported(f"{n}-D pooling")
    kernel, strides, dil, ceil, begin, end = _pool_common(cx, n)
    include = bool(cx.attr("count_include_pad", 0))
    x = cx.x(0)
    half_ok = all(b <= k // 2 for b, k in zip(begin, kernel))
    if any(d != 1 for d in dil) or ((begin != end or not half_ok) and (not include or ceil)):
        return _average_pool_as_conv(cx, n, kernel, strides, dil, ceil, begin, end, include)
    if begin != end or not half_ok:
        x = cx.op("aten::constant_pad_nd", x, _torch_pad_list(begin, end), 0.0)
        begin = [0] * n
    extra = () if n == 1 else (None,)
    return cx.op(f"aten::avg_pool{n}d", x, kernel, strides, begin, ceil, include, *extra)


def _average_pool_as_conv(cx: NodeContext, n, kernel, strides, dil, ceil, begin, end, include, x=None,
                          divide: bool = True):
    """What torch's avg_pool cannot take (dilations; asymmetric or large pads without
    count_include_pad or with ceil_mode): a depthwise convolution with ones, divided by how many
    positions each window counts (a constant: windows are boxes, so per-axis counts multiply).
    ``x`` (default input 0) and ``divide=False``: the window sums (LpPool's)."""
    shape = cx.shape(0)
    if shape is None or not all(isinstance(d, int) for d in shape[1:]):
        raise Unsupported("dilated or asymmetrically padded average pooling needs the channels and spatial dims "
                          "known at conversion")
    c, spatial = shape[1], shape[2:]
    out_t = cx.out_types[0] if cx.out_types else None
    known = out_t.shape if isinstance(out_t, TensorType) and out_t.shape is not None else None
    outs, right, div = [], [], np.ones((), np.float64)
    for a in range(n):
        span = (kernel[a] - 1) * dil[a] + 1
        full = spatial[a] + begin[a] + end[a] - span
        o = (-(-full // strides[a]) if ceil else full // strides[a]) + 1
        if ceil and (o - 1) * strides[a] >= spatial[a] + begin[a]:
            o -= 1   # a last window starting in the end padding is dropped
        if known is not None and isinstance(known[2 + a], int):
            o = known[2 + a]
        outs.append(o)
        right.append(max((o - 1) * strides[a] + span - spatial[a] - begin[a], 0))
        pos = np.arange(o)[:, None] * strides[a] - begin[a] + np.arange(kernel[a])[None, :] * dil[a]
        lo, hi = (-begin[a], spatial[a] + end[a]) if include else (0, spatial[a])
        cnt = ((pos >= lo) & (pos < hi)).sum(1).astype(np.float64)
        div = np.multiply.outer(div, cnt)
    dt = cx.dtype(0)
    x = cx.op("aten::constant_pad_nd", cx.x(0) if x is None else x, _torch_pad_list(begin, right), 0.0)
    w = np.ones((c, 1, *kernel), dt)
    wv = cx.conv.param("avg_pool_ones", w, TensorType(dt, w.shape))
    y = cx.op(f"aten::conv{n}d", x, wv, None, strides, [0] * n, dil, c)
    for a, o in enumerate(outs):   # windows past the last counted one (the right padding was rounded up)
        if (spatial[a] + begin[a] + right[a] - (kernel[a] - 1) * dil[a] - 1) // strides[a] + 1 != o:
            y = cx.op("aten::narrow", y, 2 + a, 0, o)
    if not divide:
        return y
    d = div.reshape(1, 1, *outs).astype(dt)
    return cx.op("aten::div", y, cx.conv.param("avg_pool_count", d, TensorType(dt, d.shape)))


def _lp_power(cx: NodeContext, p) -> tuple:
    """``|x| ** p`` and the root to take of its sums (ONNX's ``p`` is an int attribute)."""
    p = float(p)
    if p <= 0:
        raise Unsupported(f"p={p}")
    return cx.op("aten::pow", cx.op("aten::abs", cx.x(0)), p), 1.0 / p


def lp_pool(cx: NodeContext):
    """``(sum over each window of |x| ** p) ** (1 / p)``: padding adds zeros to the sums."""
    cx.require_dtype(0, FLOATS)
    n = cx.rank(0) - 2
    if n not in (1, 2, 3):
        raise Unsupported(f"{n}-D pooling")
    kernel, strides, dil, ceil, begin, end = _pool_common(cx, n)
    xp, root = _lp_power(cx, cx.attr("p", 2))
    sums = _average_pool_as_conv(cx, n, kernel, strides, dil, ceil, begin, end, True, x=xp, divide=False)
    return cx.op("aten::pow", sums, root)


def global_lp_pool(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    r = cx.rank(0)
    if r < 3:
        raise Unsupported(f"rank {r}")
    xp, root = _lp_power(cx, cx.attr("p", 2))
    return cx.op("aten::pow", cx.op("aten::sum", xp, list(range(2, r)), True, None), root)


def mean_variance_normalization(cx: NodeContext):
    """ONNX's function body: ``(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)`` over ``axes``."""
    cx.require_dtype(0, FLOATS)
    r = cx.rank(0)
    axes = sorted({norm_axis(a, r) for a in cx.attr("axes", [0, 2, 3])})
    x = cx.x(0)
    mean = cx.op("aten::mean", x, axes, True, None)
    var = cx.op("aten::sub", cx.op("aten::mean", cx.op("aten::mul", x, x), axes, True, None),
                cx.op("aten::mul", mean, mean), 1)
    return cx.op("aten::div", cx.op("aten::sub", x, mean, 1), cx.op("aten::add", cx.op("aten::sqrt", var), 1e-9, 1))


def global_pool(kind: str):
    def convert(cx: NodeContext):
        cx.require_dtype(0, FLOATS)
        r = cx.rank(0)
        if r < 3:
            raise Unsupported(f"rank {r}")
        x = cx.x(0)
        if kind == "mean" and r == 4:
            return cx.op("aten::adaptive_avg_pool2d", x, [1, 1])
        dims = list(range(2, r))
        if kind == "mean":
            return cx.op("aten::mean", x, dims, True, None)
        return cx.op("aten::amax", x, dims, True)
    return convert


def batch_norm(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    eps = float(cx.attr("epsilon", 1e-5))
    momentum = float(cx.attr("momentum", 0.9))
    if cx.attr("training_mode", 0):
        return _batch_norm_training(cx, eps, momentum)
    if sum(1 for o in cx.node.output if o) > 1:
        raise Unsupported("running mean/var outputs (training mode)")
    return cx.op("aten::batch_norm", cx.x(0), cx.x(1), cx.x(2), cx.x(3), cx.x(4), False, 1.0 - momentum, eps,
                 False)


def _batch_norm_training(cx: NodeContext, eps: float, momentum: float):
    """BatchNormalization-14/15 with ``training_mode=1``: normalized by the batch's own mean and
    (biased) variance over every dim but the channels; the running mean/var outputs are
    ``running * momentum + batch * (1 - momentum)``."""
    if cx.version < 14:
        raise Unsupported("training_mode before BatchNormalization-14 (saved mean/var outputs)")
    r = cx.rank(0)
    if r is None or r < 2:
        raise Unsupported("training mode needs the input's rank (at least 2)")
    x = cx.x(0)
    dims = [0] + list(range(2, r))
    mean = cx.op("aten::mean", x, dims, False, None)
    var = cx.op("aten::var", x, dims, False, False)
    y = cx.op("aten::batch_norm", x, cx.x(1), cx.x(2), mean, var, False, 0.0, eps, False)

    def running(i, batch):
        return cx.op("aten::add", cx.op("aten::mul", cx.x(i), momentum), cx.op("aten::mul", batch, 1.0 - momentum), 1)

    outs = [y]
    for j, (i, batch) in enumerate(((3, mean), (4, var)), start=1):
        wanted = j < len(cx.node.output) and cx.node.output[j]
        outs.append(running(i, batch) if wanted else None)
    return tuple(outs)


def instance_norm(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    eps = float(cx.attr("epsilon", 1e-5))
    return cx.op("aten::instance_norm", cx.x(0), cx.x(1), cx.x(2), None, None, True, 0.1, eps, False)


def layer_norm(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    r = cx.rank(0)
    axis = norm_axis(cx.attr("axis", -1), r)
    eps = float(cx.attr("epsilon", 1e-5))
    if cx.attr("stash_type", 1) != 1:
        raise Unsupported("stash_type other than float32")
    x = cx.x(0)
    norm_shape = [dim_item(cx, 0, x, d) for d in range(axis, r)]
    scale_full = cx.shape(1) is not None and list(cx.shape(1)) == list(cx.shape(0))[axis:]
    bias_full = not cx.has(2) or (cx.shape(2) is not None and list(cx.shape(2)) == list(cx.shape(0))[axis:])
    w = cx.x(1) if scale_full else None
    b = cx.x(2) if cx.has(2) and scale_full and bias_full else None
    extra = [o for o in cx.node.output[1:] if o]
    if extra:
        y, mean, rstd = cx.op("aten::native_layer_norm", x, cx.list_value(norm_shape), w, b, eps, n_out=3)
    else:
        y = cx.op("aten::layer_norm", x, cx.list_value(norm_shape), w, b, eps, True)
        mean = rstd = None
    if w is None:  # a scale/bias that only broadcasts to the normalized shape
        y = cx.op("aten::mul", y, cx.x(1))
    if cx.has(2) and b is None:
        y = cx.op("aten::add", y, cx.x(2), 1)
    return y, mean, rstd


def group_norm(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    eps = float(cx.attr("epsilon", 1e-5))
    groups = cx.attr("num_groups")
    if cx.version >= 21 and cx.attr("stash_type", 1) != 1:
        raise Unsupported("stash_type other than float32")
    scale, bias = cx.x(1), cx.x(2)
    if cx.version < 21:  # GroupNormalization-18: one scale/bias per group; torch takes one per channel
        shape = cx.shape(0)
        c = shape[1] if shape is not None and len(shape) > 1 else None
        if not isinstance(c, int) or c % groups:
            raise Unsupported("per-group scale needs the channel count known at conversion")
        scale = cx.op("aten::repeat_interleave", scale, c // groups, 0, None)
        bias = cx.op("aten::repeat_interleave", bias, c // groups, 0, None)
    return cx.op("aten::group_norm", cx.x(0), groups, scale, bias, eps, False)


def softmax(kind: str):
    def convert(cx: NodeContext):
        cx.require_dtype(0, FLOATS)
        axis = norm_axis(cx.attr("axis", -1), cx.rank(0))
        return cx.op(kind, cx.x(0), axis, None)
    return convert


def hardmax(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    axis = norm_axis(cx.attr("axis", -1), cx.rank(0))
    x = cx.x(0)
    idx = cx.op("aten::argmax", x, axis, True)
    return cx.op("aten::scatter", cx.op("aten::zeros_like", x, None, None, None, None, None), axis, idx, 1.0)


def dropout(cx: NodeContext):
    cx.attr("seed", None)  # randomness only matters in training mode
    if cx.has(2):
        mode = cx.const(2)
        if mode is None:
            raise Unsupported("training_mode must be a constant")
        if bool(mode.reshape(-1)[0]):
            ratio = cx.const(1) if cx.has(1) else np.array(0.5)
            if ratio is None:
                raise Unsupported("ratio must be a constant in training mode")
            if float(ratio.reshape(-1)[0]) != 0.0:
                raise Unsupported("training_mode=True with a ratio > 0 drops random elements (srcore runs "
                                  "inference; only ratio 0, which keeps every element, is supported)")
    x = cx.x(0)
    y = cx.op("aten::clone", x, None)
    if len(cx.node.output) > 1 and cx.node.output[1]:
        return y, cx.op("aten::ones_like", x, 11, None, None, None, None)
    return y


def lrn(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    alpha, beta = float(cx.attr("alpha", 1e-4)), float(cx.attr("beta", 0.75))
    bias, size = float(cx.attr("bias", 1.0)), cx.attr("size")
    if cx.rank(0) < 3:
        raise Unsupported("rank < 3")
    x = cx.x(0)
    sq = cx.op("aten::mul", x, x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    pad = [0, 0] * (cx.rank(0) - 2) + [before, after]
    padded = cx.op("aten::constant_pad_nd", sq, pad, 0.0)
    c = dim_item(cx, 0, x, 1)
    acc = None
    for k in range(size):
        part = cx.op("aten::narrow", padded, 1, k, c)
        acc = part if acc is None else cx.op("aten::add", acc, part, 1)
    denom = cx.op("aten::pow", cx.op("aten::add", cx.op("aten::mul", acc, alpha / size), bias, 1), beta)
    return cx.op("aten::div", x, denom)


def einsum(cx: NodeContext):
    eq = cx.attr("equation").replace(" ", "")
    return cx.op("aten::einsum", eq, [cx.x(i) for i in range(cx.n_inputs)], None)


def lp_normalization(cx: NodeContext):
    cx.require_dtype(0, FLOATS)
    axis = norm_axis(cx.attr("axis", -1), cx.rank(0))
    p = cx.attr("p", 2)
    if p not in (1, 2):
        raise Unsupported(f"p={p}")
    x = cx.x(0)
    norm = cx.op("aten::linalg_vector_norm", x, p, [axis], True, None)
    norm = cx.op("aten::where", cx.op("aten::eq", norm, 0.0), 1.0, norm)  # ONNX: a zero vector stays zero
    return cx.op("aten::div", x, norm)


#: GridSample's modes (opset 16 names, then opset 20's) -> aten::grid_sampler's interpolation codes
_GRID_MODES = {"bilinear": 0, "linear": 0, "nearest": 1, "bicubic": 2, "cubic": 2}
_GRID_PADDING = {"zeros": 0, "border": 1, "reflection": 2}


def grid_sample(cx: NodeContext):
    """``GridSample`` -> ``aten::grid_sampler`` (the same sampling, padding and corner rules as torch's
    ``F.grid_sample``, which torch.onnx exports to it)."""
    cx.require_dtype(0, FLOATS)
    mode, padding = cx.attr("mode", "bilinear" if cx.version < 20 else "linear"), cx.attr("padding_mode", "zeros")
    if mode not in (("bilinear", "nearest", "bicubic") if cx.version < 20 else ("linear", "nearest", "cubic")):
        raise Unsupported(f"mode {mode!r} (opset {cx.version})")
    if padding not in _GRID_PADDING:
        raise Unsupported(f"padding_mode {padding!r}")
    align = bool(cx.attr("align_corners", 0))
    return cx.op("aten::grid_sampler", cx.x(0), cx.x(1), _GRID_MODES[mode], _GRID_PADDING[padding], align)


def affine_grid(cx: NodeContext):
    """``AffineGrid(theta, size)`` -> ``aten::affine_grid_generator`` (``size`` known at conversion)."""
    cx.require_dtype(0, FLOATS)
    size = cx.int_items(1, "size")
    return cx.op("aten::affine_grid_generator", cx.x(0), cx.list_value(size), bool(cx.attr("align_corners", 0)))


CONVERTERS = table(
    Gemm=(gemm, 13), MatMul=(matmul, 13), Conv=(conv, 11, 22), ConvTranspose=(conv_transpose, 11, 22),
    MaxPool=(max_pool, 12, 22), AveragePool=(average_pool, 11, 19, 22),
    GlobalAveragePool=(global_pool("mean"), 1, 22), GlobalMaxPool=(global_pool("max"), 1, 22),
    LpPool=(lp_pool, 11, 18, 22), GlobalLpPool=(global_lp_pool, 2, 22),
    MeanVarianceNormalization=(mean_variance_normalization, 13),
    BatchNormalization=(batch_norm, 9, 14, 15), InstanceNormalization=(instance_norm, 6, 22),
    LayerNormalization=(layer_norm, 17), GroupNormalization=(group_norm, 18, 21),
    Softmax=(softmax("aten::softmax"), 13), LogSoftmax=(softmax("aten::log_softmax"), 13),
    Hardmax=(hardmax, 13), Dropout=(dropout, 13, 22), LRN=(lrn, 13), Einsum=(einsum, 12, 28),
    LpNormalization=(lp_normalization, 1, 22), GridSample=(grid_sample, 16, 20, 22), AffineGrid=(affine_grid, 20),
)

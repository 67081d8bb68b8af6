"""Convolutions (1-3 spatial dims, grouped, transposed, with srcore's fused relu / add+relu)
and pooling (max, average, adaptive average)."""
from __future__ import annotations

import numpy as np

from .pointwise import relu
from .table import EngineBuildError, arg_shape, dims, f32, i64, nan_checks, out, rank, rank_of, register


def _tup(v, n: int, what: str) -> list[int]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return [int(v)] * n
    v = [int(a) for a in v]
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise EngineBuildError(f"{what} {v} has {len(v)} values for {n} spatial dims")
    return v


# -- convolution ------------------------------------------------------------------------------------
def _spatial_of(n, weight_index: int = 1) -> int | None:
    r = rank_of(n, weight_index)
    return None if r is None else r - 2


def _conv_ok(n, transposed: bool = False) -> bool:
    """Weight constant (the OpenVINO filter layout is made from it), 1-3 spatial dims, input
    batched or not, positive strides and dilations, non-negative padding; what torch itself
    rejects (``padding="same"`` with strides, output_padding >= stride and dilation) too."""
    k = _spatial_of(n)
    r = rank_of(n, 0)
    if k is None or not 1 <= k <= 3 or r not in (k + 1, k + 2):
        return False
    try:
        transposed = transposed or (n.op == "aten::_convolution" and bool(n.const("transposed")))
        stride = _tup(n.const("stride", 1), k, "stride")
        dil = _tup(n.const("dilation", 1), k, "dilation")
        if any(s <= 0 for s in stride) or any(d <= 0 for d in dil) or n.const("groups", 1) < 1:
            return False
        padding = n.const("padding", 0)
        if transposed:
            outpad = _tup(n.const("output_padding", 0), k, "output_padding")
            return all(p >= 0 for p in _tup(padding, k, "padding")) and \
                all(0 <= op < max(s, d) for op, s, d in zip(outpad, stride, dil))
        if isinstance(padding, str):
            return padding == "valid" or padding == "same" and all(s == 1 for s in stride)
        return all(p >= 0 for p in _tup(padding, k, "padding"))
    except (EngineBuildError, TypeError, KeyError, ValueError):
        return False


def conv_nd(c, x, *, transposed: bool = False, output_padding=None):
    """torch's convolution of ``x`` with the node's weight, bias, stride, padding, dilation, groups."""
    o = c.o
    w = np.asarray(c.const("weight"), np.float32)
    k = w.ndim - 2
    unbatched = rank(x) == k + 1
    if unbatched:
        x = out(o.unsqueeze(x, i64(o, 0)))
    stride = _tup(c.const("stride", 1), k, "stride")
    dil = _tup(c.const("dilation", 1), k, "dilation")
    groups = int(c.const("groups", 1))
    padding = c.const("padding", 0)
    if isinstance(padding, str):
        if padding == "valid":
            begin = end = [0] * k
        else:  # "same": torch puts the odd one at the end
            total = [d * (s - 1) for d, s in zip(dil, w.shape[2:])]
            begin = [t // 2 for t in total]
            end = [t - b for t, b in zip(total, begin)]
    else:
        begin = end = _tup(padding, k, "padding")
    if transposed:
        c_in = w.shape[0]
        if c_in % groups:
            c.fail(f"{c_in} input channels are not divisible by groups={groups}")
        outpad = _tup(output_padding if output_padding is not None else 0, k, "output_padding")
        if groups == 1:
            y = o.convolution_backprop_data(x, o.constant(w), stride, pads_begin=begin, pads_end=end, dilations=dil,
                                            output_padding=outpad)
        else:
            gw = w.reshape(groups, c_in // groups, *w.shape[1:])
            y = o.group_convolution_backprop_data(x, o.constant(gw), stride, pads_begin=begin, pads_end=end,
                                                  dilations=dil, output_padding=outpad)
        c_out = w.shape[1] * groups
    else:
        c_out = w.shape[0]
        if c_out % groups:
            c.fail(f"{c_out} output channels are not divisible by groups={groups}")
        if groups == 1:
            y = o.convolution(x, o.constant(w), stride, begin, end, dil)
        else:
            gw = w.reshape(groups, c_out // groups, *w.shape[1:])
            y = o.group_convolution(x, o.constant(gw), stride, begin, end, dil)
    y = out(y)
    if not c.is_none("bias"):
        b = np.asarray(c.const("bias"), np.float32)
        if b.shape != (c_out,):
            c.fail(f"bias of shape {b.shape} for {c_out} output channels")
        y = out(o.add(y, o.constant(b.reshape(c_out, *([1] * k)))))
    if unbatched:
        y = out(o.squeeze(y, i64(o, [0])))
    return y


_CONV = ("weight", "bias", "stride", "padding", "dilation", "groups")


@register("aten::conv1d", "aten::conv2d", "aten::conv3d", consts=_CONV, check=_conv_ok)
def _conv(c):
    return conv_nd(c, c.x("input"))


@register("aten::conv1d.padding", "aten::conv2d.padding", "aten::conv3d.padding", consts=_CONV, check=_conv_ok)
def _conv_padding(c):
    return conv_nd(c, c.x("input"))


@register("srcore::conv2d_relu", consts=_CONV, check=_conv_ok)
def _conv_relu(c):
    return relu(c.o, conv_nd(c, c.x("input")), after="conv")


@register("srcore::conv2d_add_relu", consts=_CONV, check=_conv_ok)
def _conv_add_relu(c):
    return relu(c.o, out(c.o.add(conv_nd(c, c.x("input")), c.x("other"))), after="conv")


@register("aten::_convolution", consts=(*_CONV, "transposed", "output_padding"), check=_conv_ok)
def _convolution(c):
    t = bool(c.const("transposed"))
    return conv_nd(c, c.x("input"), transposed=t, output_padding=c.const("output_padding", 0) if t else None)


@register("aten::conv_transpose1d", "aten::conv_transpose2d.input",
          consts=(*_CONV, "output_padding"), check=lambda n: _conv_ok(n, transposed=True))
def _conv_transpose(c):
    return conv_nd(c, c.x("input"), transposed=True, output_padding=c.const("output_padding", 0))


# -- pooling ----------------------------------------------------------------------------------------
def _pool_spatial(op: str) -> int:
    return int(op.split("_pool", 1)[1][0])


def _pool_ok(n) -> bool:
    """torch's own limits (it raises otherwise; OpenVINO would compute something): positive
    kernel and stride, padding at most half the (dilated) kernel."""
    k = _pool_spatial(n.op)
    r = rank_of(n, 0)
    if r not in (k + 1, k + 2):
        return False
    try:
        ks = _tup(n.const("kernel_size"), k, "kernel_size")
        st = n.const("stride", None)
        st = ks if st is None or (isinstance(st, (list, tuple)) and len(st) == 0) else _tup(st, k, "stride")
        pad = _tup(n.const("padding", 0), k, "padding")
        dil = _tup(n.const("dilation", 1), k, "dilation") if "max_pool" in n.op else [1] * k
    except (EngineBuildError, TypeError, KeyError):
        return False
    if any(v <= 0 for v in (*ks, *st, *dil)) or any(p < 0 for p in pad):
        return False
    if any(p * 2 > (kk - 1) * d + 1 for p, kk, d in zip(pad, ks, dil)):
        return False
    if "avg_pool" in n.op and n.const("divisor_override", None) is not None:
        return False
    return True


def _pool_args(c, k):
    ks = _tup(c.const("kernel_size"), k, "kernel_size")
    st = c.const("stride", None)
    st = ks if st is None or (isinstance(st, (list, tuple)) and len(st) == 0) else _tup(st, k, "stride")
    pad = _tup(c.const("padding", 0), k, "padding")
    rounding = "ceil_torch" if c.const("ceil_mode", False) else "floor"
    return ks, st, pad, rounding


def _batched(c, x, k, fn):
    o = c.o
    unbatched = rank(x) == k + 1
    if unbatched:
        x = out(o.unsqueeze(x, i64(o, 0)))
    y = fn(x)
    if unbatched:
        y = out(o.squeeze(y, i64(o, [0])))
    return y


_MAXPOOL = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")


#: OpenVINO ops whose output is never -inf nor the lowest float (NaN passes through them): a max
#: pool over one needs no -inf check. torch's relu is Maximum(0, x) or Elu with alpha 0 (pointwise.relu).
_BOUNDED_BELOW = {"Relu", "Sigmoid", "HSigmoid", "Exp", "Abs", "HSwish", "SoftPlus"}
_SAME_VALUES = {"Reshape", "Unsqueeze", "Squeeze"}


def _bounded_below(x) -> bool:
    """Whether OpenVINO's ``x`` holds no -inf and no lowest float whatever the inputs (it comes from
    an op bounded below, maybe through reshapes)."""
    node = x.get_node()
    while node.get_type_name() in _SAME_VALUES:
        node = node.input_value(0).get_node()
    kind = node.get_type_name()
    lowest = float(np.finfo(np.float32).min)
    if kind == "Elu":   # alpha * (exp(x) - 1) >= -alpha
        return 0.0 <= float(node.get_attributes().get("alpha", -1.0)) < -lowest
    if kind == "Maximum":   # pointwise.relu's Maximum(0, x)
        return _is_zero(node.input_value(0)) or _is_zero(node.input_value(1))
    if kind == "Clamp":
        return float(node.get_attributes().get("min", -np.inf)) > lowest
    return kind in _BOUNDED_BELOW


def _is_zero(v) -> bool:
    node = v.get_node()
    return node.get_type_name() == "Constant" and bool(np.all(node.get_data() == 0))


@register("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", consts=_MAXPOOL, check=_pool_ok)
def _max_pool(c):
    """OpenVINO's MaxPool skips NaNs and gives the lowest float for a window of -inf; torch gives
    NaN and -inf: a second pool, of a mask, puts them back."""
    o = c.o
    k = _pool_spatial(c.op)
    ks, st, pad, rounding = _pool_args(c, k)
    dil = _tup(c.const("dilation", 1), k, "dilation")

    def pool(x):
        y = o.max_pool(x, st, dil, pad, pad, ks, rounding).output(0)
        if not nan_checks():
            return y
        # x != x, not IsNaN: OpenVINO fuses the comparison into one pass with the rest of the mask
        # (IsNaN runs as a layer of its own), and the mask is u8: a quarter of a float32 pool's traffic
        u8 = lambda v: o.constant(np.uint8(v)).output(0)   # noqa: E731
        nan = out(o.convert(out(o.not_equal(x, x)), "u8"))
        if _bounded_below(x):
            # after a relu (the usual max pool) no window is all -inf: a pool of the NaN mask is
            # all it takes, half the cost of the full check (resnet_small's stem, 1 thread)
            a = o.max_pool(nan, st, dil, pad, pad, ks, rounding).output(0)
            return out(o.select(out(o.greater(a, u8(0))), f32(o, float("nan")), y))
        # one more pool over 2 * isnan(x) + (x == lowest): a window holding a NaN gives NaN, one
        # whose values are all -inf gives -inf (OpenVINO starts its maximum at the lowest float)
        lowest = f32(o, float(np.finfo(np.float32).min))
        aux = out(o.add(out(o.multiply(nan, u8(2))), out(o.convert(out(o.equal(x, lowest)), "u8"))))
        a = o.max_pool(aux, st, dil, pad, pad, ks, rounding).output(0)
        all_neg_inf = out(o.logical_and(out(o.equal(y, lowest)), out(o.less(a, u8(1)))))
        y = out(o.select(all_neg_inf, f32(o, float("-inf")), y))
        return out(o.select(out(o.greater_equal(a, u8(2))), f32(o, float("nan")), y))
    return _batched(c, c.x("self"), k, pool)


_AVGPOOL = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")


def _avg_pool_ok(n) -> bool:
    """With ceil_mode and count_include_pad, torch's divisor of a window running past the padding
    leaves that part out (OpenVINO counts the whole kernel): the divisors are made for static
    spatial sizes only."""
    if not _pool_ok(n):
        return False
    if n.const("ceil_mode", False) and n.const("count_include_pad", True):
        k = _pool_spatial(n.op)
        return all(isinstance(d, int) for d in arg_shape(n, 0)[-k:])
    return True


@register("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", consts=_AVGPOOL, check=_avg_pool_ok)
def _avg_pool(c):
    o = c.o
    k = _pool_spatial(c.op)
    ks, st, pad, rounding = _pool_args(c, k)
    include = bool(c.const("count_include_pad", True))
    if rounding == "ceil_torch" and include:
        return _batched(c, c.x("self"), k, lambda x: _avg_pool_ceil_include(c, x, ks, st, pad))
    return _batched(c, c.x("self"), k, lambda x: out(o.avg_pool(x, st, pad, pad, ks, not include, rounding)))


def _avg_pool_ceil_include(c, x, ks, st, pad):
    """torch's ceil-mode average counting the padding: the window sums (x zero-padded so that every
    window is whole: a plain average times the kernel size), divided by torch's divisor per output
    position (the window clipped to the padded input)."""
    o = c.o
    k = len(ks)
    sizes = dims(x)[-k:]
    outs, extra, divisors = [], [], []
    for n_in, kk, s, p in zip(sizes, ks, st, pad):
        n_out = -(-(n_in + 2 * p - kk) // s) + 1
        if (n_out - 1) * s >= n_in + p:   # torch drops a last window that starts in the right padding
            n_out -= 1
        outs.append(n_out)
        extra.append(max(0, (n_out - 1) * s + kk - (n_in + 2 * p)))
        starts = np.arange(n_out) * s - p
        divisors.append(np.minimum(starts + kk, n_in + p) - starts)
    div = divisors[0]
    for d in divisors[1:]:
        div = np.multiply.outer(div, d)
    r = rank(x)
    begin = [0] * (r - k) + list(pad)
    end = [0] * (r - k) + [p + e for p, e in zip(pad, extra)]
    padded = out(o.pad(x, i64(o, begin), i64(o, end), "constant", np.float32(0.0)))
    mean = out(o.avg_pool(padded, st, [0] * k, [0] * k, ks, False, "floor"))
    scale = (np.float32(np.prod(ks)) / div.astype(np.float32)).astype(np.float32)
    return out(o.multiply(mean, o.constant(scale)))


def _adaptive_ok(n) -> bool:
    k = _pool_spatial(n.op)
    try:
        size = _tup(n.const("output_size"), k, "output_size")
    except (EngineBuildError, TypeError, KeyError):
        return False
    return rank_of(n, 0) in (k + 1, k + 2) and all(s > 0 for s in size)


@register("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
          consts=("output_size",), check=_adaptive_ok)
def _adaptive_avg_pool(c):
    k = _pool_spatial(c.op)
    size = _tup(c.const("output_size"), k, "output_size")
    return _batched(c, c.x("self"), k, lambda x: out(c.o.adaptive_avg_pool(x, i64(c.o, size))))


"""Convolutions, pools (``ceil_mode``) and upsampling: spatial output sizes."""
from __future__ import annotations

import math

from . import symbolic as sym
from .base import A, Ctx, UNKNOWN, rule, tt


def conv_out(n, k, s, p, d):
    """``floor((n + 2p - d(k-1) - 1) / s) + 1``; None if anything is unknown."""
    if not all(isinstance(x, int) for x in (n, k, s, p, d)):
        return None
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def conv_transpose_out(n, k, s, p, d, op):
    if not all(isinstance(x, int) for x in (n, k, s, p, d, op)):
        return None
    return (n - 1) * s - 2 * p + d * (k - 1) + op + 1


def pool_out(n, k, s, p, d, ceil_mode):
    """ATen's ``pooling_output_shape``: with ceil_mode the last window must start inside the input."""
    if not all(isinstance(x, int) for x in (n, k, s, p, d)) or not isinstance(ceil_mode, bool):
        return None
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _spatial(ctx: Ctx, t, n_sp: int, what: str, weight_rank: int | None = None):
    if t.shape is None:
        return None
    if len(t.shape) not in (n_sp + 1, n_sp + 2):
        raise ctx.fail(f"{what} expects a {n_sp + 1}-D or {n_sp + 2}-D input, got shape {t.shape}")
    return t.shape


def _ints(ctx: Ctx, pos, name, n, default):
    v = ctx.int_list(pos, name, n)
    if v is None:
        a = ctx.arg(pos, name)
        if a is None or a.known is None:
            return [default] * n
        return [None] * n
    if len(v) == 1 and n > 1:
        v = v * n
    if len(v) != n:
        raise ctx.fail(f"{name} must have {n} elements, got {v}")
    return v


def conv_shape(ctx: Ctx, x, w, stride, padding, dilation, groups, transposed=False, output_padding=None):
    """Output shape of an N-d convolution (batched or not)."""
    if w.shape is None:
        return None
    n_sp = len(w.shape) - 2
    s = _spatial(ctx, x, n_sp, "convolution")
    if s is None:
        return None
    batched = len(s) == n_sp + 2
    if not batched:
        s = (1,) + tuple(s)
    cin = s[1]
    if isinstance(groups, int) and groups > 0:
        want = w.shape[0] if transposed else sym.mul(w.shape[1], groups)
        if sym.equal(cin, want) is False:
            raise ctx.fail(f"expected input with {want} channels, got {cin} (input {x.shape}, weight {w.shape})")
        cout = sym.mul(w.shape[1], groups) if transposed else w.shape[0]
    else:
        cout = None if transposed else w.shape[0]
    k = w.shape[2:]
    if padding in ("same", "valid"):
        sp = list(s[2:]) if padding == "same" else [conv_out(n, kk, 1, 0, d) for n, kk, d in
                                                     zip(s[2:], k, dilation)]
    elif transposed:
        sp = [conv_transpose_out(n, kk, st, p, d, op) for n, kk, st, p, d, op in
              zip(s[2:], k, stride, padding, dilation, output_padding)]
    else:
        sp = [conv_out(n, kk, st, p, d) for n, kk, st, p, d in zip(s[2:], k, stride, padding, dilation)]
    for o in sp:
        if isinstance(o, int) and o <= 0:
            raise ctx.fail(f"calculated output size {o} is too small (input {x.shape}, kernel {k})")
    out = (s[0], cout, *sp)
    return out if batched else out[1:]


def _padding(ctx: Ctx, pos, n):
    a = ctx.arg(pos, "padding")
    if a is not None and isinstance(a.known, str):
        return a.known
    return _ints(ctx, pos, "padding", n, 0)


@rule("aten::conv1d", "aten::conv2d", "aten::conv3d", "srcore::conv2d_relu")
def conv(ctx: Ctx):
    x, w = ctx.tensor(0, "input"), ctx.tensor(1, "weight")
    n = len(w.shape) - 2 if w.shape is not None else int(ctx.op.split("conv")[1][0])
    shape = conv_shape(ctx, x, w, _ints(ctx, 3, "stride", n, 1), _padding(ctx, 4, n),
                       _ints(ctx, 5, "dilation", n, 1), ctx.known(6, "groups", 1))
    return [tt(x.dtype or w.dtype, shape)]


@rule("srcore::conv2d_add_relu")
def conv_add_relu(ctx: Ctx):
    """relu(conv2d(input, weight, bias, stride, padding, dilation, groups) + other)."""
    from .elementwise import broadcast_shapes
    names = ctx.names or []
    other_pos = names.index("other") if "other" in names else 3
    rest = [a for i, a in enumerate(ctx.args) if i != other_pos]
    inner = Ctx(ctx.node, rest, [n for n in names if n != "other"] or None, ctx.op)
    out = conv(inner)[0]
    o = ctx.tensor(other_pos)
    if out.shape is not None and o.shape is not None:
        broadcast_shapes([out.shape, o.shape], ctx.fail)
    return [out]


@rule("aten::_convolution", "aten::convolution")
def convolution(ctx: Ctx):
    x, w = ctx.tensor(0), ctx.tensor(1)
    n = len(w.shape) - 2 if w.shape is not None else 2
    transposed = ctx.known(6, "transposed", False)
    if transposed is UNKNOWN:
        return [tt(x.dtype, None)]
    shape = conv_shape(ctx, x, w, _ints(ctx, 3, "stride", n, 1), _padding(ctx, 4, n),
                       _ints(ctx, 5, "dilation", n, 1), ctx.known(8, "groups", 1), transposed,
                       _ints(ctx, 7, "output_padding", n, 0))
    return [tt(x.dtype or w.dtype, shape)]


@rule("aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d")
def conv_transpose(ctx: Ctx):
    x, w = ctx.tensor(0), ctx.tensor(1)
    n = len(w.shape) - 2 if w.shape is not None else 2
    shape = conv_shape(ctx, x, w, _ints(ctx, 3, "stride", n, 1), _ints(ctx, 4, "padding", n, 0),
                       _ints(ctx, 7, "dilation", n, 1), ctx.known(6, "groups", 1), True,
                       _ints(ctx, 5, "output_padding", n, 0))
    return [tt(x.dtype or w.dtype, shape)]


def _n_spatial(op: str) -> int:
    for n in (1, 2, 3):
        if f"{n}d" in op:
            return n
    return 2


def _pool(ctx: Ctx, *, dilation_pos: int | None, ceil_pos: int):
    x = ctx.tensor(0)
    n = _n_spatial(ctx.op)
    s = _spatial(ctx, x, n, ctx.op.split("::")[1].split(".")[0])
    if s is None:
        return None
    k = _ints(ctx, 1, "kernel_size", n, None)
    stride = ctx.int_list(2, "stride", n)
    stride = k if not stride else (stride * n if len(stride) == 1 else stride)
    p = _ints(ctx, 3, "padding", n, 0)
    d = _ints(ctx, dilation_pos, "dilation", n, 1) if dilation_pos is not None else [1] * n
    ceil = ctx.known(ceil_pos, "ceil_mode", False)
    for what, v in (("kernel size", k), ("stride", stride)):   # torch's checks (a 0 kernel made windows of nothing)
        if any(isinstance(i, int) and i <= 0 for i in v):
            raise ctx.fail(f"{what} should be greater than zero, got {list(v)}")
    for kk, pp in zip(k, p):
        if isinstance(kk, int) and isinstance(pp, int) and pp * 2 > kk:
            raise ctx.fail(f"pad should be at most half of effective kernel size, got pad={pp}, kernel={kk}")
    sp = [pool_out(nn, kk, st, pp, dd, ceil) for nn, kk, st, pp, dd in zip(s[-n:], k, stride, p, d)]
    for o in sp:
        if isinstance(o, int) and o <= 0:
            raise ctx.fail(f"pool output size {o} is too small for input {x.shape}")
    return tuple(s[:-n]) + tuple(sp)


@rule("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "aten::max_pool1d_with_indices",
      "aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices", "aten::quantized_max_pool2d",
      "aten::mkldnn_max_pool2d", "quantized::max_pool1d", "quantized::max_pool2d")
def max_pool(ctx: Ctx):
    x = ctx.tensor(0)
    shape = _pool(ctx, dilation_pos=4, ceil_pos=5)
    outs = [tt(x.dtype, shape)]
    if len(ctx.node.outputs) == 2:
        outs.append(tt("int64", shape))
    return outs


@rule("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", "quantized::avg_pool2d_channels_last",
      "quantized::avg_pool2d_qnnpack")
def avg_pool(ctx: Ctx):
    if ctx.known(6, "divisor_override", None) == 0:   # torch's check (the kernels divided by zero)
        raise ctx.fail("divisor must be not zero")
    return [tt(ctx.tensor(0).dtype, _pool(ctx, dilation_pos=None, ceil_pos=4))]


@rule("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
      "aten::_adaptive_avg_pool2d", "aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d",
      "aten::adaptive_max_pool3d", "quantized::adaptive_avg_pool2d_channels_last",
      "quantized::adaptive_avg_pool2d_qnnpack")
def adaptive_pool(ctx: Ctx):
    x = ctx.tensor(0)
    n = _n_spatial(ctx.op)
    s = _spatial(ctx, x, n, ctx.op.split("::")[1])
    size = ctx.int_list(1, "output_size", n)
    if size is not None and len(size) == 1 and n > 1:
        size = size * n
    if s is None:
        shape = None
    elif size is None:
        shape = tuple(s[:-n]) + (None,) * n
    else:
        shape = tuple(s[:-n]) + tuple(o if o is not None else i for o, i in zip(size, s[-n:]))
    outs = [tt(x.dtype, shape)]
    if len(ctx.node.outputs) == 2:
        outs.append(tt("int64", shape))
    return outs


@rule("aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
      "aten::upsample_bilinear2d", "aten::upsample_linear1d", "aten::upsample_bicubic2d",
      "aten::upsample_trilinear3d", "aten::_upsample_nearest_exact1d", "aten::_upsample_nearest_exact2d",
      "aten::_upsample_nearest_exact3d", "aten::_upsample_bilinear2d_aa")
def upsample(ctx: Ctx):
    """Output size given, or ``floor(in * scale)`` per spatial dim."""
    x = ctx.tensor(0)
    n = _n_spatial(ctx.op)
    s = _spatial(ctx, x, n, ctx.op.split("::")[1])
    if s is None:
        return [tt(x.dtype, None)]
    size = ctx.int_list(1, "output_size")
    if size:
        if len(size) != n:
            raise ctx.fail(f"output_size must have {n} elements, got {size}")
        return [tt(x.dtype, tuple(s[:-n]) + tuple(size))]
    # .vec overloads: scale_factors; the classic overloads: scales_h/w trailing floats
    scales = None
    names = ctx.names or []
    if "scale_factors" in names:
        scales = ctx.known(0, "scale_factors")
    else:
        for a in ctx.args[2:]:
            if isinstance(a.known, (list, tuple)) and a.known and isinstance(a.known[0], float):
                scales = a.known
        if scales is None:
            trailing = [a.known for a in ctx.args[2:] if isinstance(a.known, float)]
            scales = trailing[-n:] if len(trailing) >= n else None
    if not isinstance(scales, (list, tuple)) or len(scales) != n:
        return [tt(x.dtype, tuple(s[:-n]) + (None,) * n)]
    sp = [math.floor(i * f) if isinstance(i, int) and isinstance(f, (int, float)) else None
          for i, f in zip(s[-n:], scales)]
    return [tt(x.dtype, tuple(s[:-n]) + tuple(sp))]


@rule("aten::pixel_shuffle", "aten::pixel_unshuffle")
def pixel_shuffle(ctx: Ctx):
    x = ctx.tensor(0)
    r = ctx.known(1)
    if x.shape is None or not isinstance(r, int) or len(x.shape) < 3:
        return [tt(x.dtype, None if x.shape is None else (None,) * len(x.shape))]
    *b, c, h, w = x.shape
    if ctx.op.startswith("aten::pixel_shuffle"):
        out = (sym.exact_div(c, r * r), sym.mul(h, r), sym.mul(w, r))
    else:
        out = (sym.mul(c, r * r), sym.exact_div(h, r), sym.exact_div(w, r))
    return [tt(x.dtype, tuple(b) + out)]


@rule("aten::__interpolate")
def interpolate(ctx: Ctx):
    """TorchScript's ``F.interpolate(input, size, scale_factor, mode, align_corners, ...)``."""
    x = ctx.tensor(0)
    if x.shape is None or len(x.shape) < 3:
        return [tt(x.dtype, None)]
    n = len(x.shape) - 2
    size, scale = ctx.arg(1, "size"), ctx.arg(2, "scale_factor")
    lead = tuple(x.shape[:2])
    if size is not None and size.known is not None:
        dims = ctx.int_list(1, "size", n)
        if dims is not None:
            return [tt(x.dtype, lead + tuple(dims))]
        return [tt(x.dtype, lead + (None,) * n)]
    f = scale.known if scale is not None else UNKNOWN
    if isinstance(f, (int, float)) and not isinstance(f, bool):
        f = [f] * n
    if isinstance(f, (list, tuple)) and len(f) == n:
        return [tt(x.dtype, lead + tuple(math.floor(i * s) if isinstance(i, int) else None
                                         for i, s in zip(x.shape[2:], f)))]
    return [tt(x.dtype, lead + (None,) * n)]


@rule("aten::grid_sampler", "aten::grid_sampler_2d", "aten::grid_sampler_3d")
def grid_sampler(ctx: Ctx):
    """(N, C, *in) sampled at grid (N, *out, k) -> (N, C, *out); k = number of spatial dims."""
    x, g = ctx.tensor(0), ctx.tensor(1)
    if x.shape is None or g.shape is None:
        return [tt(x.dtype, None if x.shape is None else (x.shape[0], x.shape[1]) + (None,) * (len(x.shape) - 2))]
    if len(x.shape) not in (4, 5) or len(g.shape) != len(x.shape):
        raise ctx.fail(f"grid_sampler: expected a 4-D or 5-D input and a grid of the same rank, got "
                       f"{len(x.shape)}-D and {len(g.shape)}-D")
    k = len(x.shape) - 2
    if isinstance(g.shape[-1], int) and g.shape[-1] != k:
        raise ctx.fail(f"grid_sampler: the grid's last dim must be {k}, got {g.shape[-1]}")
    if sym.equal(x.shape[0], g.shape[0]) is False:
        raise ctx.fail(f"grid_sampler: input batch {x.shape[0]} and grid batch {g.shape[0]} differ")
    return [tt(x.dtype, (x.shape[0], x.shape[1]) + tuple(g.shape[1:-1]))]


@rule("aten::affine_grid_generator")
def affine_grid_generator(ctx: Ctx):
    """``size`` (N, C, H, W) -> grid (N, H, W, 2); (N, C, D, H, W) -> (N, D, H, W, 3)."""
    theta = ctx.tensor(0)
    size = ctx.int_list(1, "size")
    if size is None:
        return [tt(theta.dtype, None)]
    if len(size) not in (4, 5):
        raise ctx.fail(f"affine_grid only supports 4D and 5D sizes, got {list(size)}")
    return [tt(theta.dtype, (size[0],) + tuple(size[2:]) + (len(size) - 2,))]

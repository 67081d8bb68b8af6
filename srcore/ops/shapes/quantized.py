"""Rules of the quantization ops: shapes, quantized dtypes and their parameters (QParams).

Each quantized op's output carries its quantization parameters whenever they are known at load:
from constant arguments (``quantize_per_tensor(x, 0.05, 64, quint8)``, ``quantized::add(a, b, 0.1,
3)``), from its input's (``relu``, pools, views: :data:`KEEPS_QPARAMS`), by torch's rule for scalar
add/mul, or fixed (``sigmoid``: :data:`FIXED_QPARAMS`). Parameters computed from data at run time
(dynamic quantization) stay unknown here; the run-time arrays carry them anyway. A constant scale or
zero point that is invalid is a :class:`srcore.QuantizationError` naming the node.
"""
from __future__ import annotations

from typing import Any

from ...errors import QuantizationError
from ...ir.quant import QDTYPES, QParams, add_scalar_qparams, check_qparams, is_quantized, mul_scalar_qparams
from ...ir.types import BOOL, FLOAT, INT, ListType, TensorType
from .base import A, Ctx, UNKNOWN, base_name, dtype_code, rule, tt, where
from .conv import _ints, conv_shape
from .elementwise import broadcast_shapes

_STORAGE_TO_QDTYPE = {"uint8": "quint8", "int8": "qint8", "int32": "qint32"}


def qfail(ctx: Ctx, message: str) -> QuantizationError:
    return QuantizationError(f"{ctx.node.kind}: {message}\n  at {where(ctx.node)}")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def known_qparams(ctx: Ctx, dtype: str | None, shape, scale: Any, zero_point: Any,
                  axis: int | None = None) -> QParams | None:
    """QParams from known values (None when any is unknown); invalid ones fail naming the node."""
    if scale is UNKNOWN or zero_point is UNKNOWN or scale is None or zero_point is None:
        return None
    try:
        q = QParams(scale, zero_point, axis)
        if dtype is not None:
            check_qparams(dtype, q, shape)
    except QuantizationError as exc:
        raise qfail(ctx, str(exc)) from None
    return q


def const_tensor(ctx: Ctx, pos: int):
    """The array of a constant tensor argument (a parameter), or None."""
    if pos >= len(ctx.node.inputs):
        return None
    v = ctx.node.inputs[pos]
    if v.node.kind != "prim::Constant":
        return None
    return v.node.attrs.get("value")


def _out_qdtype(ctx: Ctx, pos: int, name: str) -> str | None:
    code = ctx.known(pos, name)
    dtype = dtype_code(code)
    if dtype is not None and not is_quantized(dtype):
        raise qfail(ctx, f"dtype {dtype} is not a quantized dtype (expected one of {', '.join(QDTYPES)})")
    return dtype


def _input_qparams(ctx: Ctx, pos: int = 0) -> QParams | None:
    return ctx.tensor(pos).qparams


# -- quantize / dequantize ------------------------------------------------------------------------
@rule("aten::quantize_per_tensor")
def quantize_per_tensor(ctx: Ctx):
    x = ctx.tensor(0)
    dtype = _out_qdtype(ctx, 3, "dtype")
    if ctx.is_tensor(1):  # .tensor_qparams: 0-d tensors, known when they are constants
        s, z = const_tensor(ctx, 1), const_tensor(ctx, 2)
        scale = float(s) if s is not None and getattr(s, "size", 0) == 1 else UNKNOWN
        zp = int(z) if z is not None and getattr(z, "size", 0) == 1 else UNKNOWN
    else:
        scale, zp = ctx.known(1, "scale"), ctx.known(2, "zero_point")
    return [TensorType(dtype, x.shape, known_qparams(ctx, dtype, x.shape, scale, zp))]


@rule("aten::quantize_per_channel")
def quantize_per_channel(ctx: Ctx):
    x = ctx.tensor(0)
    dtype = _out_qdtype(ctx, 4, "dtype")
    axis = ctx.known(3, "axis")
    if isinstance(axis, int) and x.rank is not None:
        axis = ctx.norm_dim(axis, x.rank)
    s, z = const_tensor(ctx, 1), const_tensor(ctx, 2)
    q = None
    if s is not None and z is not None and isinstance(axis, int):
        q = known_qparams(ctx, dtype, x.shape, tuple(float(v) for v in s.reshape(-1)),
                          tuple(int(v) for v in z.reshape(-1)), axis)
    return [TensorType(dtype, x.shape, q)]


@rule("aten::quantize_per_tensor_dynamic")
def quantize_per_tensor_dynamic(ctx: Ctx):
    x = ctx.tensor(0)
    return [tt(_out_qdtype(ctx, 1, "dtype"), x.shape)]  # parameters: from the data, at run time


@rule("aten::_make_per_tensor_quantized_tensor")
def make_per_tensor(ctx: Ctx):
    x = ctx.tensor(0)
    dtype = _STORAGE_TO_QDTYPE.get(x.dtype) if x.dtype is not None else None
    if x.dtype is not None and dtype is None:
        raise qfail(ctx, f"stored values must be uint8, int8 or int32, not {x.dtype}")
    return [TensorType(dtype, x.shape, known_qparams(ctx, dtype, x.shape, ctx.known(1), ctx.known(2)))]


@rule("aten::dequantize.self", "aten::dequantize")
def dequantize(ctx: Ctx):
    x = ctx.tensor(0)
    if x.dtype is not None and not is_quantized(x.dtype):
        return [tt(x.dtype, x.shape)]  # a float tensor dequantizes to itself
    return [tt("float32", x.shape)]


@rule("aten::dequantize.tensors", "aten::dequantize.list")
def dequantize_list(ctx: Ctx):
    a = ctx.args[0]
    if a.elems is None:
        return [A(ListType(TensorType("float32")))]
    elems = [A(TensorType("float32", e.type.shape if isinstance(e.type, TensorType) else None)) for e in a.elems]
    return [A(ListType(TensorType("float32")), UNKNOWN, elems)]


@rule("aten::int_repr")
def int_repr(ctx: Ctx):
    x = ctx.tensor(0)
    return [tt(QDTYPES[x.dtype].storage if is_quantized(x.dtype) else None, x.shape)]


@rule("aten::q_scale", "aten::q_zero_point")
def q_param(ctx: Ctx):
    q = _input_qparams(ctx)
    want_scale = ctx.op == "aten::q_scale"
    if q is None or q.axis is not None:
        return [A(FLOAT if want_scale else INT)]
    return [A(FLOAT, q.scale) if want_scale else A(INT, q.zero_point)]


@rule("aten::equal")
def equal(ctx: Ctx):
    return [A(BOOL)]


# -- quantized:: elementwise ----------------------------------------------------------------------
def _same_dtype(ctx: Ctx, *positions) -> str | None:
    dtypes = {ctx.tensor(p).dtype for p in positions} - {None}
    if len(dtypes) > 1:
        raise qfail(ctx, f"operands must have the same quantized dtype, got {', '.join(sorted(dtypes))}")
    dtype = dtypes.pop() if dtypes else None
    if dtype is not None and not is_quantized(dtype):
        raise qfail(ctx, f"expects quantized tensors, got {dtype}")
    return dtype


@rule("quantized::add", "quantized::add_relu", "quantized::mul", "quantized::mul_relu",
      "quantized::add_channels_last", "quantized::add_relu_channels_last", "quantized::add_mixed_layout",
      "quantized::add_relu_mixed_layout", "quantized::add_qnnpack", "quantized::add_relu_qnnpack")
def binary(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = _same_dtype(ctx, 0, 1)
    shape = a.shape
    if a.shape is not None and b.shape is not None:
        shape = broadcast_shapes([a.shape, b.shape], ctx.fail)
    return [TensorType(dtype, shape, known_qparams(ctx, dtype, shape, ctx.known(2), ctx.known(3)))]


@rule("quantized::matmul")
def qmatmul(ctx: Ctx):
    """torch's checks: same rank >= 2, equal batch dims (no broadcasting), inner sizes equal."""
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = _same_dtype(ctx, 0, 1)
    shape = None
    if a.shape is not None and b.shape is not None:
        sa, sb = tuple(a.shape), tuple(b.shape)
        if len(sa) != len(sb) or len(sa) < 2:
            raise ctx.fail(f"operands must have the same rank, at least 2, got shapes {list(sa)} and {list(sb)}")
        for x, y in zip(sa[:-2] + sa[-1:], sb[:-2] + sb[-2:-1]):
            if isinstance(x, int) and isinstance(y, int) and x != y:
                raise ctx.fail(f"shapes {list(sa)} and {list(sb)} do not multiply (batch dims must be equal, "
                               f"no broadcasting)")
        shape = sa[:-1] + sb[-1:]
    return [TensorType(dtype, shape, known_qparams(ctx, dtype, shape, ctx.known(2), ctx.known(3)))]


def scalar_operand(ctx: Ctx, pos: int) -> Any:
    """A known Scalar argument (or a constant 0-d / one-element tensor: traced graphs' ``.Tensor`` overloads)."""
    if ctx.is_tensor(pos):
        v = const_tensor(ctx, pos)
        return float(v.reshape(-1)[0]) if v is not None and getattr(v, "size", 0) == 1 else UNKNOWN
    return ctx.known(pos)


@rule("quantized::add.Scalar", "quantized::add_relu.Scalar", "quantized::add_scalar",
      "quantized::add_scalar_relu", "quantized::add_scalar.Tensor", "quantized::add_scalar_relu.Tensor",
      "quantized::mul.Scalar", "quantized::mul_relu.Scalar", "quantized::mul_scalar",
      "quantized::mul_scalar_relu", "quantized::mul_scalar.Tensor", "quantized::mul_scalar_relu.Tensor")
def binary_scalar(ctx: Ctx):
    x = ctx.tensor(0)
    dtype = _same_dtype(ctx, 0)
    q, c = x.qparams, scalar_operand(ctx, 1)
    out = None
    if dtype is not None and q is not None and q.axis is None and _number(c):
        out = (add_scalar_qparams if "add" in ctx.op else mul_scalar_qparams)(dtype, q, float(c))
    return [TensorType(dtype, x.shape, out)]


@rule("quantized::cat", "quantized::cat_relu")
def cat(ctx: Ctx):
    from .view import cat as float_cat

    out = float_cat(ctx)[0]
    a = ctx.args[0]
    first = a.elems[0].type if a.elems else None
    dtype = out.dtype if out.dtype is not None else getattr(first, "dtype", None)
    scale, zp = ctx.known(2, "scale"), ctx.known(3, "zero_point")
    if scale is None and zp is None:  # the first input's parameters
        q = getattr(first, "qparams", None)
    else:
        q = known_qparams(ctx, dtype, out.shape, scale, zp)
    return [TensorType(dtype, out.shape, q)]


# -- quantized:: unary ops with output parameters -------------------------------------------------
#: op -> positions of (output_scale, output_zero_point)
_OUT_QPARAMS = {
    "quantized::hardswish": (1, 2), "quantized::elu": (1, 2), "quantized::sigmoid": (1, 2), "quantized::leaky_relu": (3, 4),
    "quantized::batch_norm": (6, 7), "quantized::batch_norm1d": (6, 7), "quantized::batch_norm1d_relu": (6, 7),
    "quantized::batch_norm2d": (6, 7), "quantized::batch_norm2d_relu": (6, 7), "quantized::layer_norm": (5, 6),
    "quantized::celu": (1, 2), "quantized::group_norm": (5, 6), "quantized::instance_norm": (4, 5),
    "quantized::softmax": (2, 3),
    "quantized::prelu": (2, 3), "quantized::batch_norm3d": (6, 7), "quantized::batch_norm3d_relu": (6, 7),
    "quantized::batch_norm_relu": (6, 7), "aten::quantized_batch_norm": (6, 7),
}


@rule(*_OUT_QPARAMS)
def unary_requantized(ctx: Ctx):
    x = ctx.tensor(0)
    dtype = _same_dtype(ctx, 0)
    s, z = _OUT_QPARAMS[ctx.op]
    if ctx.op.startswith("quantized::batch_norm") and x.shape is not None:
        want = {"quantized::batch_norm1d": (2, 3), "quantized::batch_norm1d_relu": (2, 3),
                "quantized::batch_norm2d": (4,), "quantized::batch_norm2d_relu": (4,),
                "quantized::batch_norm3d": (5,), "quantized::batch_norm3d_relu": (5,)}.get(ctx.op)
        if want is not None and len(x.shape) not in want:
            raise ctx.fail(f"expects a {' or '.join(f'{r}-D' for r in want)} input, got shape {x.shape}")
    if ctx.op in ("quantized::group_norm", "quantized::instance_norm") and x.shape is not None and len(x.shape) < 3:
        raise ctx.fail(f"expects an input of at least 3 dims (N, C, ...), got shape {x.shape}")
    return [TensorType(dtype, x.shape, known_qparams(ctx, dtype, x.shape, ctx.known(s), ctx.known(z)))]


#: QNNPACK's fixed output parameters of its table activations (quantized::lut_qnnpack's fn)
_LUT_FIXED = {"sigmoid": QParams(1.0 / 256, 0), "hardsigmoid": QParams(1.0 / 256, 0), "tanh": QParams(2.0 / 256, 128)}


@rule("quantized::lut_qnnpack")
def lut_qnnpack(ctx: Ctx):
    """The output parameters: fixed for sigmoid / hardsigmoid / tanh of quint8 (torch's other kernels' for
    qint8), given for hardswish, else the input's."""
    x = ctx.tensor(0)
    dtype = _same_dtype(ctx, 0)
    fn = ctx.known(1, "fn")
    if fn in _LUT_FIXED:
        q = _LUT_FIXED[fn] if dtype == "quint8" else FIXED_QPARAMS[f"aten::{fn}"].get(dtype)
    elif ctx.known(2, "output_scale") is None:
        q = x.qparams
    else:
        q = known_qparams(ctx, dtype, x.shape, ctx.known(2), ctx.known(3))
    return [TensorType(dtype, x.shape, q)]


@rule("quantized::relu6", "quantized::threshold", "quantized::clamp", "quantized::dropout")
def relu6(ctx: Ctx):
    """Ops whose output has the input's parameters."""
    x = ctx.tensor(0)
    return [TensorType(_same_dtype(ctx, 0), x.shape, x.qparams)]


# -- srcore's unpacked linear / conv --------------------------------------------------------------
def _weight(ctx: Ctx, pos: int, rank: tuple[int, ...]) -> TensorType:
    w = ctx.tensor(pos)
    if w.dtype is not None and w.dtype != "qint8":
        raise qfail(ctx, f"the weight must be qint8, got {w.dtype}")
    if w.shape is not None and len(w.shape) not in rank:
        raise ctx.fail(f"the weight must be {' or '.join(f'{r}-D' for r in rank)}, got shape {w.shape}")
    return w


def _linear_shape(ctx: Ctx, x: TensorType, w: TensorType):
    if x.shape is None:
        return None
    out_f = w.shape[0] if w.shape is not None else None
    if w.shape is not None and x.shape and isinstance(x.shape[-1], int) and isinstance(w.shape[1], int) \
            and x.shape[-1] != w.shape[1]:
        raise ctx.fail(f"input features {x.shape[-1]} do not match the weight {w.shape}")
    return tuple(x.shape[:-1]) + (out_f,)


@rule("quantized::qlinear", "quantized::qlinear_relu")
def qlinear(ctx: Ctx):
    x, w = ctx.tensor(0), _weight(ctx, 1, (2,))
    dtype = _same_dtype(ctx, 0)
    shape = _linear_shape(ctx, x, w)
    return [TensorType(dtype, shape, known_qparams(ctx, dtype, shape, ctx.known(3), ctx.known(4)))]


@rule("quantized::qlinear_dynamic", "quantized::qlinear_relu_dynamic")
def qlinear_dynamic(ctx: Ctx):
    x, w = ctx.tensor(0), _weight(ctx, 1, (2,))
    if x.dtype is not None and is_quantized(x.dtype):
        raise qfail(ctx, f"a dynamic linear takes a float input, got {x.dtype}")
    return [tt("float32", _linear_shape(ctx, x, w))]


@rule("quantized::qconv1d", "quantized::qconv1d_relu", "quantized::qconv2d", "quantized::qconv2d_relu",
      "quantized::qconv3d", "quantized::qconv3d_relu", "quantized::qconv2d_add", "quantized::qconv2d_add_relu")
def qconv(ctx: Ctx):
    add = "_add" in ctx.op
    first = 3 if add else 2   # position of the weight - 1
    n = _spatial_dims(ctx.op)
    x, w = ctx.tensor(0), _weight(ctx, first - 1, (n + 2,))
    dtype = _same_dtype(ctx, *((0, 1) if add else (0,)))
    shape = conv_shape(ctx, x, w, _ints(ctx, first + 1, "stride", n, 1), _ints(ctx, first + 2, "padding", n, 0),
                       _ints(ctx, first + 3, "dilation", n, 1), ctx.known(first + 4, "groups", 1))
    if add:
        acc = ctx.tensor(1)
        if shape is not None and acc.shape is not None and len(shape) == len(acc.shape):
            broadcast_shapes([shape, acc.shape], ctx.fail)
    q = known_qparams(ctx, dtype, shape, ctx.known(first + 5, "output_scale"),
                      ctx.known(first + 6, "output_zero_point"))
    return [TensorType(dtype, shape, q)]


def _spatial_dims(op: str) -> int:
    """1, 2 or 3: the spatial dims of a ``q*conv{1,2,3}d*`` op (by its name)."""
    return next(d for d in (1, 2, 3) if f"{d}d" in op)


@rule("quantized::qconv_transpose1d", "quantized::qconv_transpose2d", "quantized::qconv_transpose3d")
def qconv_transpose(ctx: Ctx):
    n = _spatial_dims(ctx.op)
    x, w = ctx.tensor(0), _weight(ctx, 1, (n + 2,))
    dtype = _same_dtype(ctx, 0)
    shape = conv_shape(ctx, x, w, _ints(ctx, 3, "stride", n, 1), _ints(ctx, 4, "padding", n, 0),
                       _ints(ctx, 6, "dilation", n, 1), ctx.known(7, "groups", 1), True,
                       _ints(ctx, 5, "output_padding", n, 0))
    return [TensorType(dtype, shape, known_qparams(ctx, dtype, shape, ctx.known(8, "output_scale"),
                                                   ctx.known(9, "output_zero_point")))]


@rule("quantized::qconv2d_then_add")
def qconv_then_add(ctx: Ctx):
    x, w = ctx.tensor(0), _weight(ctx, 2, (4,))
    dtype = _same_dtype(ctx, 0, 1)
    shape = conv_shape(ctx, x, w, _ints(ctx, 4, "stride", 2, 1), _ints(ctx, 5, "padding", 2, 0),
                       _ints(ctx, 6, "dilation", 2, 1), ctx.known(7, "groups", 1))
    other = ctx.tensor(1)
    if shape is not None and other.shape is not None and tuple(other.shape) != tuple(shape):
        raise ctx.fail(f"the add's other operand has shape {list(other.shape)}, the convolution's result "
                       f"{list(shape)}")
    q = known_qparams(ctx, dtype, shape, ctx.known(11, "output_scale"), ctx.known(12, "output_zero_point"))
    return [TensorType(dtype, shape, q)]


#: fused row-wise embedding ops -> (bits per value, bytes of a row's scale and bias)
_ROWWISE = {"quantized::embedding_bag_byte_rowwise_offsets": (8, 8), "quantized::qembedding_byte": (8, 8),
            "quantized::embedding_bag_4bit_rowwise_offsets": (4, 4), "quantized::qembedding_4bit": (4, 4),
            "quantized::embedding_bag_2bit_rowwise_offsets": (2, 4)}


def _rowwise_dim(ctx: Ctx):
    """The embedding dim D of a fused row-wise uint8 weight (N, D * bits / 8 + scale and bias bytes)."""
    bits, sb = _ROWWISE[ctx.op]
    w = ctx.tensor(0)
    if w.dtype is not None and w.dtype != "uint8":
        raise ctx.fail(f"the weight must be fused row-wise uint8 rows, got {w.dtype}")
    if w.shape is None:
        return None
    if len(w.shape) != 2:
        raise ctx.fail(f"the weight must be 2-D (rows, bytes), got {list(w.shape)}")
    n = w.shape[1]
    if not isinstance(n, int):
        return None
    if n < sb:
        raise ctx.fail(f"a fused row of {n} bytes has no room for its scale and bias ({sb} bytes)")
    return (n - sb) * (8 // bits)


def _index_dtype(ctx: Ctx, pos: int, name: str) -> None:
    t = ctx.tensor(pos)
    if t.dtype is not None and t.dtype not in ("int64", "int32"):
        raise ctx.fail(f"{name} must be int64 or int32, got {t.dtype}")


@rule("quantized::embedding_bag_byte_rowwise_offsets", "quantized::embedding_bag_4bit_rowwise_offsets",
      "quantized::embedding_bag_2bit_rowwise_offsets")
def embedding_bag_rowwise(ctx: Ctx):
    mode = ctx.known(4, "mode", 0)
    if isinstance(mode, int) and mode != 0:
        raise ctx.fail(f"mode={mode} is not supported: torch 2.13 sums the bags whatever the mode (0: sum)")
    dim = _rowwise_dim(ctx)
    _index_dtype(ctx, 1, "indices")
    idx = ctx.tensor(1)
    has_offsets = ctx.is_tensor(2)
    if has_offsets:
        _index_dtype(ctx, 2, "offsets")
    bags = None
    if idx.shape is not None:
        if has_offsets and len(idx.shape) != 1:
            raise ctx.fail(f"with offsets the indices must be 1-D, got shape {list(idx.shape)}")
        if not has_offsets and len(idx.shape) != 2:
            raise ctx.fail(f"without offsets the indices must be 2-D (one bag per row), got shape {list(idx.shape)}")
        if not has_offsets:
            bags = idx.shape[0]
    if has_offsets:
        off = ctx.tensor(2)
        last = ctx.known(8, "include_last_offset", False)
        if off.shape is not None and len(off.shape) == 1 and isinstance(off.shape[0], int) and isinstance(last, bool):
            bags = off.shape[0] - 1 if last else off.shape[0]
    return [tt("float32", (bags, dim))]


@rule("quantized::qembedding_byte", "quantized::qembedding_4bit")
def qembedding(ctx: Ctx):
    if ctx.known(2, "pruned_weights", False) is True:
        raise ctx.fail("pruned weights are not supported (torch's lookup takes no compressed indices mapping)")
    dim = _rowwise_dim(ctx)
    _index_dtype(ctx, 1, "indices")
    idx = ctx.tensor(1)
    return [tt("float32", None if idx.shape is None else tuple(idx.shape) + (dim,))]


# -- quantization parameters of float ops that take quantized tensors ------------------------------
#: aten ops whose quantized output has its (first) quantized input's parameters, as in torch
KEEPS_QPARAMS = frozenset(f"aten::{n}" for n in (
    "relu", "relu_", "gelu", "gelu_", "threshold", "prelu", "relu6", "hardtanh", "hardtanh_", "clamp", "clamp_",
    "clip", "leaky_relu", "leaky_relu_",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "quantized_max_pool2d", "avg_pool1d", "avg_pool2d",
    "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool2d", "mean", "flatten", "reshape", "view", "_reshape_alias", "_unsafe_view", "squeeze",
    "unsqueeze", "permute", "transpose", "t", "contiguous", "clone", "detach", "dropout", "feature_dropout",
    "alpha_dropout", "slice", "select", "narrow", "expand", "expand_as", "view_as", "reshape_as", "repeat",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_bilinear2d",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "reflection_pad1d", "reflection_pad2d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "cat", "concat",
    "stack", "chunk", "split", "unbind", "flip", "roll", "pad", "constant_pad_nd", "max", "min", "amax", "amin", "sort",
    "msort",
    "topk", "index_select", "gather", "masked_fill", "__getitem__", "unflatten", "movedim", "swapaxes",
    "to", "type_as", "copy_", "fill_", "identity", "diagonal", "tensor_split", "repeat_interleave", "index", "unfold",
    "grid_sampler", "grid_sampler_2d", "std",
)) | {"quantized::mean_channels_last", "quantized::avg_pool2d_channels_last", "quantized::std_channels_last",
     "quantized::adaptive_avg_pool2d_channels_last", "quantized::max_pool1d", "quantized::max_pool2d",
     "quantized::avg_pool2d_qnnpack", "quantized::adaptive_avg_pool2d_qnnpack", "quantized::mean_qnnpack"}

#: aten ops whose quantized output has fixed parameters, by dtype (torch's)
FIXED_QPARAMS: dict[str, dict[str, QParams]] = {
    "aten::sigmoid": {"quint8": QParams(1.0 / 256, 0), "qint8": QParams(1.0 / 256, -128)},
    "aten::hardsigmoid": {"quint8": QParams(1.0 / 256, 0), "qint8": QParams(1.0 / 256, -128)},
    "aten::tanh": {"quint8": QParams(2.0 / 256, 128), "qint8": QParams(2.0 / 256, 0)},
}


def complete_qparams(ctx: Ctx, outs: list) -> list:
    """Fill in the parameters of quantized outputs a float op's rule left without (see the tables)."""
    base = base_name(ctx.op)
    fixed = FIXED_QPARAMS.get(base)
    if fixed is None and base not in KEEPS_QPARAMS:
        return outs
    src = next((a.type.qparams for a in ctx.args if isinstance(a.type, TensorType) and a.type.qparams is not None),
               None)
    if src is None:  # cat/stack: the first element of the list
        for a in ctx.args:
            if a.elems:
                t = a.elems[0].type
                src = getattr(t, "qparams", None)
                break
    done = []
    for r in outs:
        a = r if isinstance(r, A) else A(r)
        t = a.type
        if isinstance(t, TensorType) and is_quantized(t.dtype) and t.qparams is None:
            q = fixed.get(t.dtype) if fixed is not None else src
            if q is not None and q.axis is not None and t.rank is not None and q.axis >= t.rank:
                q = None  # a per-channel axis a view no longer has
            if q is not None:
                a = A(t.with_qparams(q), a.known, a.elems)
        elif isinstance(t, ListType) and isinstance(t.elem, TensorType) and is_quantized(t.elem.dtype) \
                and src is not None and src.axis is None:
            elems = [A(e.type.with_qparams(src)) if isinstance(e.type, TensorType) else e for e in a.elems or []]
            a = A(ListType(t.elem.with_qparams(src)), a.known, elems or a.elems)
        done.append(a)
    return done

"""Rules of the special functions, bit/number-theory binaries, real views of complex-aware ops and losses."""
from __future__ import annotations

from .base import A, Ctx, UNKNOWN, rule, tt
from .dtypes import DEFAULT_FLOAT, is_integral
from .elementwise import broadcast_shapes, promote, tensor_shapes

#: x -> float(x): integers compute in the default float dtype
UNARY_FLOAT = """deg2rad rad2deg angle special_entr special_erfcx special_i0e special_i1 special_i1e special_log_ndtr
special_ndtr special_ndtri""".split()
#: (a, b) -> float(promote(a, b))
BINARY_FLOAT = "logaddexp logaddexp2 ldexp igamma igammac special_xlog1py special_zeta nextafter".split()
#: (a, b) -> promote(a, b), integers only (torch rejects floats at run time)
BINARY_INT = "gcd lcm".split()
#: views or copies with self's type (complex-aware ops on real tensors)
SAME = "conj _conj resolve_conj resolve_neg _neg_view real cpu msort renorm".split()


def _float(dtype):
    return DEFAULT_FLOAT if is_integral(dtype) or dtype == "bool" else dtype


@rule(*[f"aten::{n}" for n in UNARY_FLOAT])
def unary_float(ctx: Ctx):
    t = ctx.tensor(0)
    return [tt(_float(t.dtype), t.shape)]


@rule(*[f"aten::{n}" for n in BINARY_FLOAT])
def binary_float(ctx: Ctx):
    shape = broadcast_shapes(tensor_shapes(ctx, (0, 1)), ctx.fail)
    return [tt(_float(promote(ctx.args[:2])), shape)]


@rule(*[f"aten::{n}" for n in BINARY_INT])
def binary_int(ctx: Ctx):
    return [tt(promote(ctx.args[:2]), broadcast_shapes(tensor_shapes(ctx, (0, 1)), ctx.fail))]


@rule(*[f"aten::{n}" for n in SAME])
def same(ctx: Ctx):
    t = ctx.tensor(0)
    return [tt(t.dtype, t.shape)]


@rule("aten::imag")
def imag(ctx: Ctx):
    t = ctx.tensor(0)
    if t.dtype is not None and not t.dtype.startswith("complex"):
        raise ctx.fail("imag is not implemented for tensors with non-complex dtypes.")
    return [tt(None, t.shape)]


@rule("aten::polygamma")
def polygamma(ctx: Ctx):  # polygamma(int n, Tensor self)
    t = ctx.tensor(1)
    return [tt(_float(t.dtype), t.shape)]


@rule("aten::mvlgamma")
def mvlgamma(ctx: Ctx):
    t = ctx.tensor(0)
    if t.dtype is not None and (is_integral(t.dtype) or t.dtype == "bool"):
        raise ctx.fail("mvlgamma is not implemented for integer inputs")
    return [tt(t.dtype, t.shape)]


@rule("aten::isin")
def isin(ctx: Ctx):
    if not ctx.is_tensor(0):  # isin.Scalar_Tensor: a 0-d result
        return [tt("bool", ())]
    return [tt("bool", ctx.tensor(0).shape)]


@rule("aten::_add_relu")
def add_relu(ctx: Ctx):
    return [tt(promote(ctx.args[:2]), broadcast_shapes(tensor_shapes(ctx, (0, 1)), ctx.fail))]


@rule("aten::IntImplicit")
def int_implicit(ctx: Ctx):
    from ...ir.types import INT
    return [A(INT)]


@rule("aten::_autocast_to_reduced_precision")
def autocast_reduced(ctx: Ctx):
    """``(self, cuda_enabled, cpu_enabled, cuda_dtype, cpu_dtype)``: a float32 tensor becomes cpu_dtype when
    cpu autocast is on."""
    from ...ir.types import SCALAR_TYPE_CODES
    t = ctx.tensor(0)
    on, code = ctx.known(2, "cpu_enabled"), ctx.known(4, "cpu_dtype")
    if on is UNKNOWN or code is UNKNOWN:
        return [tt(None, t.shape)]
    return [tt(SCALAR_TYPE_CODES.get(code) if on and t.dtype == "float32" else t.dtype, t.shape)]


@rule("aten::_autocast_to_full_precision")
def autocast_full(ctx: Ctx):
    t = ctx.tensor(0)
    low = t.dtype in ("float16", "bfloat16")
    on = ctx.known(2, "cpu_enabled")
    if on is UNKNOWN and low:
        return [tt(None, t.shape)]
    return [tt("float32" if on and low else t.dtype, t.shape)]


@rule("aten::mse_loss", "aten::soft_margin_loss")
def pointwise_loss(ctx: Ctx):
    """``reduction``: 0 none (the broadcast shape), 1 mean, 2 sum (a 0-d tensor)."""
    shape = broadcast_shapes(tensor_shapes(ctx, (0, 1)), ctx.fail)
    red = ctx.known(2, "reduction", 1)
    dtype = promote(ctx.args[:2])
    if red is UNKNOWN:
        return [tt(dtype, None)]
    return [tt(dtype, shape if red == 0 else ())]


@rule("aten::histc")
def histc(ctx: Ctx):
    bins = ctx.known(1, "bins", 100)
    return [tt(ctx.tensor(0).dtype, (bins if isinstance(bins, int) else None,))]


@rule("aten::take")
def take(ctx: Ctx):
    return [tt(ctx.tensor(0).dtype, ctx.tensor(1).shape)]


@rule("aten::ravel")
def ravel(ctx: Ctx):
    t = ctx.tensor(0)
    if t.shape is None:
        return [tt(t.dtype, (None,))]
    n = 1
    for d in t.shape:
        if not isinstance(d, int):
            return [tt(t.dtype, (None,))]
        n *= d
    return [tt(t.dtype, (n,))]


@rule("aten::diff")
def diff(ctx: Ctx):
    """``diff(self, n=1, dim=-1, prepend=None, append=None)``: dim shrinks by n after prepend/append."""
    t = ctx.tensor(0)
    n, dim = ctx.known(1, "n", 1), ctx.known(2, "dim", -1)
    if t.shape is None or not isinstance(n, int) or not isinstance(dim, int):
        return [tt(t.dtype, None if t.shape is None else (None,) * len(t.shape))]
    if not t.shape:
        raise ctx.fail("diff expects input to be at least one-dimensional")
    d = dim % len(t.shape)
    size = t.shape[d]
    for pos in (3, 4):
        a = ctx.arg(pos)
        if a is not None and isinstance(a.type, type(t)):
            extra = a.type.shape[d] if a.type.shape is not None and len(a.type.shape) == len(t.shape) else None
            size = size + extra if isinstance(size, int) and isinstance(extra, int) else None
    size = max(size - n, 0) if isinstance(size, int) else None
    dtype = "bool" if t.dtype == "bool" else t.dtype
    return [tt(dtype, t.shape[:d] + (size,) + t.shape[d + 1:])]


@rule("aten::quantile", "aten::nanquantile")
def quantile(ctx: Ctx):
    """``(self, q, dim=None, keepdim=False, *, interpolation)``; a tensor ``q`` of n values adds a leading dim."""
    from .reduce import reduce_shape
    t = ctx.tensor(0)
    dim, keep = ctx.known(2, "dim", None), ctx.known(3, "keepdim", False)
    if t.shape is None or dim is UNKNOWN or keep is UNKNOWN:
        return [tt(t.dtype, None)]
    if dim is None:
        rest = tuple([1] * len(t.shape)) if keep else ()
    else:
        rest = reduce_shape(ctx, t.shape, [dim], keep)
    if ctx.is_tensor(1):
        q = ctx.tensor(1)
        if q.shape is None:
            return [tt(t.dtype, None)]
        return [tt(t.dtype, tuple(q.shape) + tuple(rest))]
    return [tt(t.dtype, tuple(rest))]


@rule("aten::nonzero_static")
def nonzero_static(ctx: Ctx):
    """``(self, *, size, fill_value)``: (size, self.dim()) int64 indices, padded with fill_value."""
    t, size = ctx.tensor(0), ctx.known(1, "size")
    return [tt("int64", (size if isinstance(size, int) else None, None if t.shape is None else len(t.shape)))]


@rule("aten::multi_margin_loss", "aten::multilabel_margin_loss")
def margin_loss(ctx: Ctx):
    """Per-sample losses (reduction 0: the batch dims of self without the class dim) or a 0-d mean/sum."""
    t = ctx.tensor(0)
    red = ctx.known(len(ctx.args) - 1, "reduction", 1)
    if red is UNKNOWN or t.shape is None:
        return [tt(t.dtype, None)]
    return [tt(t.dtype, tuple(t.shape[:-1]) if red == 0 else ())]


# -- one-dimensional FFTs ----------------------------------------------------------------------
_TO_COMPLEX = {"float32": "complex64", "float64": "complex128", "complex64": "complex64",
               "complex128": "complex128", "float16": "complex32"}
_TO_REAL = {"complex64": "float32", "complex128": "float64", "float32": "float32", "float64": "float64"}


@rule("aten::fft_fft", "aten::fft_ifft", "aten::fft_rfft", "aten::fft_irfft")
def fft_1d(ctx: Ctx):
    """``n`` points along ``dim`` (default: its size): complex out (``rfft``: ``n // 2 + 1`` bins), or
    real out of ``n`` points (``irfft``: default ``2 * (bins - 1)``); integers compute in float32."""
    x = ctx.tensor(0)
    kind = ctx.op.split("::", 1)[1].split(".")[0]
    d = x.dtype
    if d is not None and is_integral(d):
        d = DEFAULT_FLOAT
    dtype = (_TO_REAL if kind == "fft_irfft" else _TO_COMPLEX).get(d) if d is not None else None
    if x.shape is None:
        return [tt(dtype, None)]
    if len(x.shape) == 0:
        raise ctx.fail(f"{kind} expects a tensor of at least one dimension, got a 0-d tensor")
    n, dim = ctx.known(1, "n", None), ctx.known(2, "dim", -1)
    dim = ctx.norm_dim(dim, len(x.shape))
    if dim is None or n is UNKNOWN or dim is UNKNOWN:
        return [tt(dtype, [None] * len(x.shape))]
    size = x.shape[dim]
    if n is None:
        n = size if kind != "fft_irfft" else (2 * (size - 1) if isinstance(size, int) else None)
    if isinstance(n, int) and n < 1:
        raise ctx.fail(f"{kind}: invalid number of data points ({n}) specified")
    shape = list(x.shape)
    shape[dim] = n // 2 + 1 if kind == "fft_rfft" and isinstance(n, int) else (n if isinstance(n, int) else None)
    return [tt(dtype, shape)]

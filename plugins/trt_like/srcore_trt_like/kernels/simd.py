"""Explicit 16-lane float32 vectors (AVX-512 zmm registers) for numba kernels.

numba compiles for the host CPU, but LLVM's tuning for AVX-512 Intel cores prefers 256-bit
vectors (``prefer-256-bit``): a plain numba loop on this project's Sapphire Rapids machines
uses ymm registers only, half the FMA width. Two tools here:

* :func:`prefer_512` (a no-op call) marks the calling function ``"prefer-vector-width"="512"``
  and ``"min-legal-vector-width"="512"``, so LLVM's vectorizers use zmm in it;
* :data:`f32x16` values (``<16 x float>`` in registers) with loads, stores, broadcasts and
  FMAs as intrinsics, for kernels whose register blocking the vectorizer would not find
  (the packed GEMM of ``gemm_kernels.py``). Each intrinsic also marks its function.

Indices are element offsets into a 1-D float32 array, unchecked (no bounds or negative
wraparound checks: the kernels own their index arithmetic). On a CPU without AVX-512 LLVM
splits the vectors into what the CPU has; the results are the same.

numba's on-disk cache keys a kernel on its own module's source, not on this one's: after
editing this module or ``srcore._vec_ir``, delete the ``__pycache__/*.nbi``/``*.nbc`` files of the kernel modules.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model
from srcore.plugin import simd_vec, vec_ir

# the core's codegen helpers (srcore.plugin.vec_ir): an element's address, a scalar in every lane
elem_ptr, splat = vec_ir.elem_ptr, vec_ir.splat

LANES = 16
_VEC = ir.VectorType(ir.FloatType(), LANES)
_I32 = vec_ir.I32
_ATTRS = ('"prefer-vector-width"="512"', '"min-legal-vector-width"="512"')


class F32x16(types.Type):
    """numba type of a ``<16 x float>`` register value."""

    def __init__(self):
        super().__init__(name="f32x16")


f32x16 = F32x16()


@register_model(F32x16)
class _F32x16Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VEC)


def _mark_512(builder) -> None:
    # llvmlite's attribute set only admits names it knows; these are LLVM string attributes
    # ("key"="value"), emitted verbatim into the function's attribute list
    for a in _ATTRS:
        set.add(builder.function.attributes, a)


@intrinsic
def prefer_512(typingctx):
    """Let LLVM vectorize the calling function with 512-bit vectors."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        return context.get_dummy_value()
    return types.none(), codegen


@intrinsic
def vload(typingctx, arr, idx):
    """``arr[idx:idx + 16]`` as a vector (any alignment)."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        return builder.load(builder.bitcast(p, _VEC.as_pointer()), align=4)
    return f32x16(arr, idx), codegen


@intrinsic
def vstore(typingctx, arr, idx, v):
    """``arr[idx:idx + 16] = v``."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(p, _VEC.as_pointer()), align=4)
        return context.get_dummy_value()
    return types.none(arr, idx, v), codegen


@intrinsic
def vsplat(typingctx, arr, idx):
    """``arr[idx]`` in every lane."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        x = builder.load(elem_ptr(context, builder, sig.args[0], args[0], args[1]), align=4)
        return splat(builder, x, _VEC)
    return f32x16(arr, idx), codegen


@intrinsic
def vzero(typingctx):
    """A vector of zeros."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        return ir.Constant(_VEC, [0.0] * LANES)
    return f32x16(), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    """``a * b + c`` per lane, one rounding (``llvm.fma``)."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VEC, [_VEC] * 3), "llvm.fma.v16f32")
        return builder.call(fn, args)
    return f32x16(a, b, c), codegen


@intrinsic
def vadd(typingctx, a, b):
    """``a + b`` per lane."""
    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])
    return f32x16(a, b), codegen


@intrinsic
def vmax_nan(typingctx, a, b):
    """Per lane ``b if (b > a or b != b) else a``: the max that keeps a NaN of ``b`` (torch's max pool
    and relu: NaN in, NaN out)."""
    def codegen(context, builder, sig, args):
        a, b = args
        take_b = builder.fcmp_unordered(">", b, a)      # b > a, or either is NaN ...
        a_nan = builder.fcmp_unordered("uno", a, a)
        take_b = builder.and_(take_b, builder.not_(a_nan))   # ... but a NaN already in a stays
        return builder.select(take_b, b, a)
    return f32x16(a, b), codegen


def _max_nan(builder, a, b):
    take_b = builder.fcmp_unordered(">", b, a)      # b > a, or either is NaN ...
    a_nan = builder.fcmp_unordered("uno", a, a)
    return builder.select(builder.and_(take_b, builder.not_(a_nan)), b, a)   # ... but a NaN already in a stays


@intrinsic
def vmax_nan_lanes(typingctx, a, b, n):
    """:func:`vmax_nan` in lanes e < n (a row's tail, ``b`` from :func:`vload_lanes`), ``a`` in the others."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        a, b, n_ = args
        n_ = context.cast(builder, n_, sig.args[2], types.int64)
        mask = _lane_mask(builder, ir.Constant(ir.IntType(64), 0), n_)
        return builder.select(mask, _max_nan(builder, a, b), a)
    return f32x16(a, b, n), codegen


@intrinsic
def vhmax_nan(typingctx, a):
    """The max of the 16 lanes, NaN if any is (four halving shuffles of :func:`vmax_nan`)."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        v = args[0]
        for half in (8, 4, 2, 1):
            v = _max_nan(builder, v, _shuffle(builder, v, v, [(e + half) % LANES for e in range(LANES)]))
        return builder.extract_element(v, ir.Constant(_I32, 0))
    return types.float32(a), codegen


_I64 = ir.IntType(64)
_IV32, _IV64 = ir.VectorType(_I32, LANES), ir.VectorType(_I64, LANES)
_GMASK = ir.VectorType(ir.IntType(1), LANES)


@intrinsic
def vgather(typingctx, arr, base, idx, j):
    """``arr[base + idx[j + e]]`` for the 16 lanes e (``idx`` int32; unchecked, as the other
    vector intrinsics): ``llvm.masked.gather`` with every lane on (one ``vgather`` on AVX-512)."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        p = builder.ptrtoint(elem_ptr(context, builder, sig.args[0], args[0], args[1]), _I64)
        ip = elem_ptr(context, builder, sig.args[2], args[2], args[3])
        iv = builder.load(builder.bitcast(ip, _IV32.as_pointer()), align=4)
        pv = builder.insert_element(ir.Constant(_IV64, ir.Undefined), p, ir.Constant(_I32, 0))
        pv = builder.shuffle_vector(pv, ir.Constant(_IV64, ir.Undefined), ir.Constant(_IV32, [0] * LANES))
        off = builder.shl(builder.sext(iv, _IV64), ir.Constant(_IV64, [2] * LANES))   # float32: 4 bytes
        ptrs = builder.inttoptr(builder.add(pv, off), ir.VectorType(ir.FloatType().as_pointer(), LANES))
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VEC, [ptrs.type, _I32, _GMASK, _VEC]),
                                            "llvm.masked.gather.v16f32.v16p0")
        return builder.call(fn, [ptrs, ir.Constant(_I32, 4), ir.Constant(_GMASK, [1] * LANES),
                                 ir.Constant(_VEC, ir.Undefined)])
    return f32x16(arr, base, idx, j), codegen


def _shuffle(builder, a, b, mask):
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, LANES), mask))


def _transpose16(builder, rows):
    """The 16 x 16 transpose of 16 row vectors: unpack 32-bit, unpack 64-bit (4 x 4 blocks within
    each 128-bit lane), then two rounds of 128-bit lane shuffles (LLVM picks the instructions)."""
    lo32 = [i for L in range(4) for i in (4 * L, 16 + 4 * L, 4 * L + 1, 17 + 4 * L)]
    hi32 = [i for L in range(4) for i in (4 * L + 2, 18 + 4 * L, 4 * L + 3, 19 + 4 * L)]
    t = []
    for i in range(8):
        a, b = rows[2 * i], rows[2 * i + 1]
        t += [_shuffle(builder, a, b, lo32), _shuffle(builder, a, b, hi32)]
    lo64 = [i for L in range(4) for i in (4 * L, 4 * L + 1, 16 + 4 * L, 17 + 4 * L)]
    hi64 = [i for L in range(4) for i in (4 * L + 2, 4 * L + 3, 18 + 4 * L, 19 + 4 * L)]
    u = []
    for i in range(4):
        a0, a1, a2, a3 = t[4 * i:4 * i + 4]
        u += [_shuffle(builder, a0, a2, lo64), _shuffle(builder, a0, a2, hi64),
              _shuffle(builder, a1, a3, lo64), _shuffle(builder, a1, a3, hi64)]
    # u[4i + m], 128-bit lane L = column 4L + m of rows 4i..4i+3
    lane = lambda src, L: [16 * src + 4 * L + e for e in range(4)]          # noqa: E731
    lo128 = lane(0, 0) + lane(1, 0) + lane(0, 1) + lane(1, 1)
    hi128 = lane(0, 2) + lane(1, 2) + lane(0, 3) + lane(1, 3)
    out = [None] * 16
    for m in range(4):
        w_lo, w_hi = _shuffle(builder, u[m], u[4 + m], lo128), _shuffle(builder, u[m], u[4 + m], hi128)
        x_lo, x_hi = _shuffle(builder, u[8 + m], u[12 + m], lo128), _shuffle(builder, u[8 + m], u[12 + m], hi128)
        first = lane(0, 0) + lane(0, 1) + lane(1, 0) + lane(1, 1)
        second = lane(0, 2) + lane(0, 3) + lane(1, 2) + lane(1, 3)
        out[m] = _shuffle(builder, w_lo, x_lo, first)
        out[4 + m] = _shuffle(builder, w_lo, x_lo, second)
        out[8 + m] = _shuffle(builder, w_hi, x_hi, first)
        out[12 + m] = _shuffle(builder, w_hi, x_hi, second)
    return out


@intrinsic
def vtranspose16(typingctx, arr, idx, ld):
    """Load the 16 x 16 block ``arr[idx + r * ld + c]`` (r, c < 16) and return its columns: a tuple of
    16 vectors, vector c holding ``arr[idx + r * ld + c]`` for r = 0..15."""
    ret = types.UniTuple(f32x16, LANES)

    def codegen(context, builder, sig, args):
        _mark_512(builder)
        arrty = sig.args[0]
        a, i0, ld_ = args
        i0 = context.cast(builder, i0, sig.args[1], types.intp)
        ld_ = context.cast(builder, ld_, sig.args[2], types.intp)
        rows = []
        for r in range(LANES):
            idx_r = builder.add(i0, builder.mul(ld_, ir.Constant(i0.type, r)))
            p = elem_ptr(context, builder, arrty, a, idx_r)
            rows.append(builder.load(builder.bitcast(p, _VEC.as_pointer()), align=4))
        return context.make_tuple(builder, ret, _transpose16(builder, rows))
    return ret(arr, idx, ld), codegen


@intrinsic
def vsplat_value(typingctx, x):
    """The float32 scalar ``x`` in every lane."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        return splat(builder, context.cast(builder, args[0], sig.args[0], types.float32), _VEC)
    return f32x16(x), codegen


@intrinsic
def vrelu(typingctx, a):
    """``0 if a < 0 else a`` per lane (NaN stays NaN, like torch's relu)."""
    def codegen(context, builder, sig, args):
        neg = builder.fcmp_ordered("<", args[0], ir.Constant(_VEC, [0.0] * LANES))
        return builder.select(neg, ir.Constant(_VEC, [0.0] * LANES), args[0])
    return f32x16(a), codegen


def _lane_mask(builder, lane0, n):
    """<16 x i1>: lanes [lane0, lane0 + n)."""
    i32 = ir.IntType(32)
    lane0 = builder.trunc(lane0, i32) if lane0.type.width > 32 else lane0
    n = builder.trunc(n, i32) if n.type.width > 32 else n
    ones = builder.sub(builder.shl(ir.Constant(i32, 1), n), ir.Constant(i32, 1))
    bits = builder.trunc(builder.shl(ones, lane0), ir.IntType(LANES))
    return builder.bitcast(bits, ir.VectorType(ir.IntType(1), LANES))


def _masked_fns(module):
    ptr = _VEC.as_pointer()
    mvec = ir.VectorType(ir.IntType(1), LANES)
    load = cgutils.get_or_insert_function(module, ir.FunctionType(_VEC, [ptr, _I32, mvec, _VEC]),
                                          "llvm.masked.load.v16f32.p0")
    store = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [_VEC, ptr, _I32, mvec]),
                                           "llvm.masked.store.v16f32.p0")
    return load, store


@intrinsic
def vcopy_lanes(typingctx, src, s, dst, d, lane0, n):
    """``dst[d + lane0 + e] = src[s + e]`` for e < n (lane0 + n <= 16): one masked load and one masked
    store; the lanes outside never touch memory (so they may lie outside the arrays)."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        srcv, s_, dstv, d_, l0, n_ = args
        l0 = context.cast(builder, l0, sig.args[4], types.int64)
        n_ = context.cast(builder, n_, sig.args[5], types.int64)
        s_ = context.cast(builder, s_, sig.args[1], types.int64)
        d_ = context.cast(builder, d_, sig.args[3], types.int64)
        mask = _lane_mask(builder, l0, n_)
        load, store = _masked_fns(builder.module)
        ps = builder.bitcast(elem_ptr(context, builder, sig.args[0], srcv, builder.sub(s_, l0)), _VEC.as_pointer())
        pd = builder.bitcast(elem_ptr(context, builder, sig.args[2], dstv, d_), _VEC.as_pointer())
        v = builder.call(load, [ps, ir.Constant(_I32, 4), mask, ir.Constant(_VEC, [0.0] * LANES)])
        builder.call(store, [v, pd, ir.Constant(_I32, 4), mask])
        return context.get_dummy_value()
    return types.none(src, s, dst, d, lane0, n), codegen


@intrinsic
def vzero_lanes(typingctx, dst, d, lane0, n):
    """``dst[d + lane0 + e] = 0`` for e < n: one masked store."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        dstv, d_, l0, n_ = args
        l0 = context.cast(builder, l0, sig.args[2], types.int64)
        n_ = context.cast(builder, n_, sig.args[3], types.int64)
        d_ = context.cast(builder, d_, sig.args[1], types.int64)
        _, store = _masked_fns(builder.module)
        pd = builder.bitcast(elem_ptr(context, builder, sig.args[0], dstv, d_), _VEC.as_pointer())
        builder.call(store, [ir.Constant(_VEC, [0.0] * LANES), pd, ir.Constant(_I32, 4), _lane_mask(builder, l0, n_)])
        return context.get_dummy_value()
    return types.none(dst, d, lane0, n), codegen


@intrinsic
def vsub(typingctx, a, b):
    """``a - b`` per lane."""
    def codegen(context, builder, sig, args):
        return builder.fsub(args[0], args[1])
    return f32x16(a, b), codegen


@intrinsic
def vmul(typingctx, a, b):
    """``a * b`` per lane."""
    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], args[1])
    return f32x16(a, b), codegen


@intrinsic
def vstore_lanes(typingctx, arr, idx, v, n):
    """``arr[idx + e] = v[e]`` for e < n (n <= 16): one masked store."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        arrv, i, vec, n_ = args
        n_ = context.cast(builder, n_, sig.args[3], types.int64)
        _, store = _masked_fns(builder.module)
        p = builder.bitcast(elem_ptr(context, builder, sig.args[0], arrv, i), _VEC.as_pointer())
        builder.call(store, [vec, p, ir.Constant(_I32, 4), _lane_mask(builder, ir.Constant(ir.IntType(64), 0), n_)])
        return context.get_dummy_value()
    return types.none(arr, idx, v, n), codegen


@intrinsic
def vload_lanes(typingctx, arr, idx, n):
    """``arr[idx + e]`` for e < n, 0 in the other lanes (which never touch memory)."""
    def codegen(context, builder, sig, args):
        _mark_512(builder)
        arrv, i, n_ = args
        n_ = context.cast(builder, n_, sig.args[2], types.int64)
        load, _ = _masked_fns(builder.module)
        p = builder.bitcast(elem_ptr(context, builder, sig.args[0], arrv, i), _VEC.as_pointer())
        mask = _lane_mask(builder, ir.Constant(ir.IntType(64), 0), n_)
        return builder.call(load, [p, ir.Constant(_I32, 4), mask, ir.Constant(_VEC, [0.0] * LANES)])
    return f32x16(arr, idx, n), codegen


def _deinterleave(builder, vecs, stride):
    """Phases 0..stride-1 of the concatenation of ``vecs`` (16 * stride floats): phase e holds
    elements stride * j + e, j < 16."""
    half = ir.VectorType(ir.FloatType(), LANES // 2)
    out = []
    for e in range(stride):
        if stride == 2:
            out.append(_shuffle(builder, vecs[0], vecs[1], [2 * j + e for j in range(LANES)]))
            continue
        mask = ir.Constant(ir.VectorType(_I32, 8), [4 * j + e for j in range(8)])
        lo = builder.shuffle_vector(vecs[0], vecs[1], mask)
        hi = builder.shuffle_vector(vecs[2], vecs[3], mask)
        assert lo.type == half
        out.append(builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(_I32, LANES), list(range(LANES)))))
    return out


def _deinterleave_intrinsic(stride):
    ret = types.UniTuple(f32x16, stride)

    def typer(typingctx, arr, idx):
        def codegen(context, builder, sig, args):
            _mark_512(builder)
            arrv, i = args
            i = context.cast(builder, i, sig.args[1], types.intp)
            vecs = []
            for r in range(stride):
                p = elem_ptr(context, builder, sig.args[0], arrv, builder.add(i, ir.Constant(i.type, LANES * r)))
                vecs.append(builder.load(builder.bitcast(p, _VEC.as_pointer()), align=4))
            return context.make_tuple(builder, ret, _deinterleave(builder, vecs, stride))
        return ret(arr, idx), codegen
    return intrinsic(typer)


#: ``vdeinterleave2(arr, idx)``: (arr[idx + 2 j], arr[idx + 2 j + 1]) for j < 16, two vectors
vdeinterleave2 = _deinterleave_intrinsic(2)
#: ``vdeinterleave4(arr, idx)``: arr[idx + 4 j + e] for j < 16, e = 0..3, four vectors
vdeinterleave4 = _deinterleave_intrinsic(4)


#: hint the cache line of ``arr[idx]`` into L2 (srcore's :func:`srcore.conv.simd.prefetch`)
prefetch = simd_vec.prefetch

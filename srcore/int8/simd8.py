"""AVX2 8-bit integer vectors for numba kernels: ``u8 x s8 -> s32`` dot products of 4.

numba has no vector types and LLVM does not find ``vpmaddubsw`` in a scalar loop. These intrinsics
give numba functions register values (``<32 x i8>``, ``<8 x i32>``) and the one instruction pair
that does 32 multiply-adds of 8-bit integers: ``vpmaddubsw`` (u8 x s8, adjacent pairs summed into
saturating int16) then ``vpmaddwd`` against ones (pairs of int16 summed into int32). The int16
step saturates when ``a0*b0 + a1*b1`` leaves [-32768, 32767]; callers keep their operands where
it cannot (:mod:`.int8_gemm`). On AVX512-VNNI the pair is one ``vpdpbusd`` (:func:`dpbusd`, 4 products
summed into each int32 lane without the int16 step: exact for every byte), used where the CPU has it.

Indices are element offsets into 1-D arrays, unchecked (the kernels own their index arithmetic).
numba's on-disk cache keys a kernel on its own module's source, not on this one's: after editing
this module, delete the ``__pycache__/*.nbi``/``*.nbc`` files of :mod:`.int8_gemm`.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

_I8, _I16, _I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
_V32I8 = ir.VectorType(_I8, 32)
_V16I16 = ir.VectorType(_I16, 16)
_V8I32 = ir.VectorType(_I32, 8)


class I8x32(types.Type):
    """numba type of a ``<32 x i8>`` register value."""

    def __init__(self):
        super().__init__(name="i8x32")


class I32x8(types.Type):
    """numba type of a ``<8 x i32>`` register value."""

    def __init__(self):
        super().__init__(name="i32x8")


i8x32 = I8x32()
i32x8 = I32x8()


@register_model(I8x32)
class _I8x32Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _V32I8)


@register_model(I32x8)
class _I32x8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _V8I32)


def _elem_ptr(context, builder, arrty, arr, idx):
    data = context.make_array(arrty)(context, builder, value=arr).data
    return builder.gep(data, [idx])


def _call(builder, name: str, ret, args):
    fnty = ir.FunctionType(ret, [a.type for a in args])
    fn = builder.module.globals.get(name) or ir.Function(builder.module, fnty, name)
    return builder.call(fn, args)


@intrinsic
def load_i8x32(typingctx, arr, idx):
    """The 32 bytes ``arr[idx:idx + 32]`` (any alignment)."""
    def codegen(context, builder, sig, args):
        p = builder.bitcast(_elem_ptr(context, builder, sig.args[0], *args), _V32I8.as_pointer())
        return builder.load(p, align=1)
    return i8x32(arr, idx), codegen


@intrinsic
def bcast4_i8x32(typingctx, arr, idx):
    """The 4 bytes ``arr[idx:idx + 4]`` repeated 8 times (``vpbroadcastd``)."""
    def codegen(context, builder, sig, args):
        p = builder.bitcast(_elem_ptr(context, builder, sig.args[0], *args), _I32.as_pointer())
        x = builder.load(p, align=1)
        v = builder.insert_element(ir.Constant(_V8I32, ir.Undefined), x, ir.Constant(_I32, 0))
        v = builder.shuffle_vector(v, ir.Constant(_V8I32, ir.Undefined), ir.Constant(_V8I32, [0] * 8))
        return builder.bitcast(v, _V32I8)
    return i8x32(arr, idx), codegen


@intrinsic
def dot4_u8s8(typingctx, a, b):
    """Per 32-bit lane ``sum(a[4i + j] * b[4i + j], j < 4)``, ``a`` unsigned and ``b`` signed bytes
    (``vpmaddubsw`` + ``vpmaddwd``; each adjacent pair saturates at int16)."""
    def codegen(context, builder, sig, args):
        t = _call(builder, "llvm.x86.avx2.pmadd.ub.sw", _V16I16, list(args))
        return _call(builder, "llvm.x86.avx2.pmadd.wd", _V8I32, [t, ir.Constant(_V16I16, [1] * 16)])
    return i32x8(a, b), codegen


@intrinsic
def zero_i32x8(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(_V8I32, [0] * 8)
    return i32x8(), codegen


@intrinsic
def add_i32x8(typingctx, a, b):
    def codegen(context, builder, sig, args):
        return builder.add(args[0], args[1])
    return i32x8(a, b), codegen


@intrinsic
def store_i32x8(typingctx, arr, idx, v):
    """``arr[idx:idx + 8] = v`` (int32 array, any alignment)."""
    def codegen(context, builder, sig, args):
        p = builder.bitcast(_elem_ptr(context, builder, sig.args[0], args[0], args[1]), _V8I32.as_pointer())
        builder.store(args[2], p, align=1)
        return context.get_dummy_value()
    return types.none(arr, idx, v), codegen


@intrinsic
def copy_bytes(typingctx, dst, d, src, s, n):
    """``dst[d:d + n] = src[s:s + n]`` for 1-byte arrays that do not overlap there: one ``memcpy``
    (numba's slice assignment builds views and copies element by element: 7x slower on rows of a
    few hundred bytes)."""
    def codegen(context, builder, sig, args):
        dv, di, sv, si, nn = args
        dp = _elem_ptr(context, builder, sig.args[0], dv, di)
        sp = _elem_ptr(context, builder, sig.args[2], sv, si)
        cgutils.raw_memcpy(builder, dp, sp, context.cast(builder, nn, sig.args[4], types.intp), 1)
        return context.get_dummy_value()
    return types.none(dst, d, src, s, n), codegen



@intrinsic
def zero_bytes(typingctx, dst, d, n):
    """``dst[d:d + n] = 0`` for a 1-byte array: one ``memset`` (a byte loop was a store per byte)."""
    def codegen(context, builder, sig, args):
        dv, di, nn = args
        dp = _elem_ptr(context, builder, sig.args[0], dv, di)
        cgutils.memset(builder, dp, context.cast(builder, nn, sig.args[2], types.intp), 0)
        return context.get_dummy_value()
    return types.none(dst, d, n), codegen

_F32 = ir.FloatType()
_V8F32 = ir.VectorType(_F32, 8)
_V8I8 = ir.VectorType(_I8, 8)


def _load8(context, builder, arrty, arr, idx, vty):
    return builder.load(builder.bitcast(_elem_ptr(context, builder, arrty, arr, idx), vty.as_pointer()), align=1)


def _splat8(builder, x, vty):
    v = builder.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined), ir.Constant(_V8I32, [0] * 8))


@intrinsic
def requant8_u8(typingctx, c, ci, corr, zw, rc, bias_div, mult, j, yz, lo, hi, dst, di):
    """fbgemm's requantization of 8 channels ``j..j+7`` of one row, in float32 lanes, the same
    operations in the same order as the scalar code (so the same bytes): ``acc = c[ci + e] -
    corr[j + e] - zw[j + e] * rc``; ``v = ((float(acc) + bias_div) * mult + 1.5 * 2^23) - 1.5 *
    2^23 + yz`` (round half to even), clamped to ``[lo, hi]``, stored as bytes at ``dst[di + e]``.
    ``c``, ``corr``, ``zw`` int32 arrays; ``bias_div``, ``mult`` float32; ``dst`` uint8."""
    def codegen(context, builder, sig, args):
        cv, ci_, corrv, zwv, rc_, bv, mv, j_, yz_, lo_, hi_, dv, di_ = args
        st = sig.args
        ci_ = context.cast(builder, ci_, st[1], types.intp)
        j_ = context.cast(builder, j_, st[7], types.intp)
        di_ = context.cast(builder, di_, st[12], types.intp)
        acc = _load8(context, builder, st[0], cv, ci_, _V8I32)
        acc = builder.sub(acc, _load8(context, builder, st[2], corrv, j_, _V8I32))
        rcv = _splat8(builder, context.cast(builder, rc_, st[4], types.int32), _V8I32)
        acc = builder.sub(acc, builder.mul(_load8(context, builder, st[3], zwv, j_, _V8I32), rcv))
        f = builder.sitofp(acc, _V8F32)
        f = builder.fadd(f, _load8(context, builder, st[5], bv, j_, _V8F32))
        f = builder.fmul(f, _load8(context, builder, st[6], mv, j_, _V8F32))
        rnd = ir.Constant(_V8F32, [12582912.0] * 8)
        f = builder.fsub(builder.fadd(f, rnd), rnd)
        f = builder.fadd(f, _splat8(builder, context.cast(builder, yz_, st[8], types.float32), _V8F32))
        lov = _splat8(builder, context.cast(builder, lo_, st[9], types.float32), _V8F32)
        hiv = _splat8(builder, context.cast(builder, hi_, st[10], types.float32), _V8F32)
        f = builder.select(builder.fcmp_ordered(">", f, lov), f, lov)
        f = builder.select(builder.fcmp_ordered("<", f, hiv), f, hiv)
        q = builder.trunc(builder.fptosi(f, _V8I32), _V8I8)
        builder.store(q, builder.bitcast(_elem_ptr(context, builder, st[11], dv, di_), _V8I8.as_pointer()), align=1)
        return context.get_dummy_value()
    return types.none(c, ci, corr, zw, rc, bias_div, mult, j, yz, lo, hi, dst, di), codegen


#: what :func:`dpbusd` needs: the function that calls it is compiled for these (it runs only where
#: ``srcore.cpu_features`` reports them: :func:`srcore.int8.gemm.simd_path`)
VNNI_FEATURES = '"target-features"="+avx2,+avx512f,+avx512bw,+avx512vl,+avx512vnni"'


@intrinsic
def dpbusd(typingctx, acc, a, b):
    """``acc + `` per 32-bit lane ``sum(a[4i + j] * b[4i + j], j < 4)``, ``a`` unsigned and ``b``
    signed bytes, exact (``vpdpbusd``, AVX512-VNNI with VL: no int16 saturation; the int32 sum
    wraps). Marks its function as compiled for AVX512-VNNI."""
    def codegen(context, builder, sig, args):
        set.add(builder.function.attributes, VNNI_FEATURES)
        return _call(builder, "llvm.x86.avx512.vpdpbusd.256", _V8I32, list(args))
    return i32x8(acc, a, b), codegen


# -- 512-bit registers (AVX512-VNNI): 16 channels x 4 depths of a packed panel in one register -------
_V64I8 = ir.VectorType(_I8, 64)
_V16I32 = ir.VectorType(_I32, 16)


class I8x64(types.Type):
    """numba type of a ``<64 x i8>`` register value."""

    def __init__(self):
        super().__init__(name="i8x64")


class I32x16(types.Type):
    """numba type of a ``<16 x i32>`` register value."""

    def __init__(self):
        super().__init__(name="i32x16")


i8x64 = I8x64()
i32x16 = I32x16()


@register_model(I8x64)
class _I8x64Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _V64I8)


@register_model(I32x16)
class _I32x16Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _V16I32)


@intrinsic
def load_i8x64(typingctx, arr, idx):
    """The 64 bytes ``arr[idx:idx + 64]`` (any alignment)."""
    def codegen(context, builder, sig, args):
        p = builder.bitcast(_elem_ptr(context, builder, sig.args[0], *args), _V64I8.as_pointer())
        return builder.load(p, align=1)
    return i8x64(arr, idx), codegen


@intrinsic
def bcast4_i8x64(typingctx, arr, idx):
    """The 4 bytes ``arr[idx:idx + 4]`` repeated 16 times (``vpbroadcastd`` to a ``zmm``)."""
    def codegen(context, builder, sig, args):
        p = builder.bitcast(_elem_ptr(context, builder, sig.args[0], *args), _I32.as_pointer())
        x = builder.load(p, align=1)
        v = builder.insert_element(ir.Constant(_V16I32, ir.Undefined), x, ir.Constant(_I32, 0))
        v = builder.shuffle_vector(v, ir.Constant(_V16I32, ir.Undefined), ir.Constant(_V16I32, [0] * 16))
        return builder.bitcast(v, _V64I8)
    return i8x64(arr, idx), codegen


@intrinsic
def zero_i32x16(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(_V16I32, [0] * 16)
    return i32x16(), codegen


@intrinsic
def store_i32x16(typingctx, arr, idx, v):
    """``arr[idx:idx + 16] = v`` (int32 array, any alignment)."""
    def codegen(context, builder, sig, args):
        p = builder.bitcast(_elem_ptr(context, builder, sig.args[0], args[0], args[1]), _V16I32.as_pointer())
        builder.store(args[2], p, align=1)
        return context.get_dummy_value()
    return types.none(arr, idx, v), codegen


@intrinsic
def dpbusd512(typingctx, acc, a, b):
    """:func:`dpbusd` on 512-bit registers (16 int32 lanes: one packed panel's 16 channels; the
    intrinsic keeps them whole, ``zmm``, even where LLVM prefers 256-bit vectors)."""
    def codegen(context, builder, sig, args):
        set.add(builder.function.attributes, VNNI_FEATURES)
        return _call(builder, "llvm.x86.avx512.vpdpbusd.512", _V16I32, list(args))
    return i32x16(acc, a, b), codegen

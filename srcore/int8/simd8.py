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
this module or :mod:`srcore._vec_ir`, delete the ``__pycache__/*.nbi``/``*.nbc`` files of :mod:`.int8_gemm`.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .._vec_ir import F32, I8, I32, call, elem_ptr, i8x32, i8x64, i32x8, i32x16, splat

_V8I32 = i32x8.ir_type
_V16I16 = ir.VectorType(ir.IntType(16), 16)


def _named(impl, name: str, doc: str | None):
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = doc
    return intrinsic(impl)


def _load(vt):
    """``load_i8xN``: the ``N`` bytes ``arr[idx:idx + N]`` (any alignment)."""
    def impl(typingctx, arr, idx):
        def codegen(context, builder, sig, args):
            return builder.load(elem_ptr(context, builder, sig.args[0], *args, pty=vt.ir_type), align=1)
        return vt(arr, idx), codegen
    return _named(impl, f"load_{vt}", f"The {vt.lanes} bytes ``arr[idx:idx + {vt.lanes}]`` (any alignment).")


def _bcast4(vt, acc):
    """``bcast4_i8xN``: the 4 bytes ``arr[idx:idx + 4]`` in every 32-bit lane (``vpbroadcastd``)."""
    def impl(typingctx, arr, idx):
        def codegen(context, builder, sig, args):
            x = builder.load(elem_ptr(context, builder, sig.args[0], *args, pty=I32), align=1)
            return builder.bitcast(splat(builder, x, acc.ir_type), vt.ir_type)
        return vt(arr, idx), codegen
    return _named(impl, f"bcast4_{vt}",
                  f"The 4 bytes ``arr[idx:idx + 4]`` repeated {acc.lanes} times (``vpbroadcastd``).")


def _zero(vt):
    def impl(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(vt.ir_type, [0] * vt.lanes)
        return vt(), codegen
    return _named(impl, f"zero_{vt}", None)


def _store(vt):
    def impl(typingctx, arr, idx, v):
        def codegen(context, builder, sig, args):
            builder.store(args[2], elem_ptr(context, builder, sig.args[0], args[0], args[1], pty=vt.ir_type), align=1)
            return context.get_dummy_value()
        return types.none(arr, idx, v), codegen
    return _named(impl, f"store_{vt}", f"``arr[idx:idx + {vt.lanes}] = v`` (int32 array, any alignment).")


def _dpbusd(acc, doc: str):
    def impl(typingctx, c, a, b):
        def codegen(context, builder, sig, args):
            set.add(builder.function.attributes, VNNI_FEATURES)
            return call(builder, f"llvm.x86.avx512.vpdpbusd.{32 * acc.lanes}", acc.ir_type, list(args))
        return acc(c, a, b), codegen
    return _named(impl, "dpbusd" if acc.lanes == 8 else f"dpbusd{32 * acc.lanes}", doc)


#: what :func:`dpbusd` needs: the function that calls it is compiled for these (it runs only where
#: ``srcore.cpu_features`` reports them: :func:`srcore.int8.gemm.simd_path`)
VNNI_FEATURES = '"target-features"="+avx2,+avx512f,+avx512bw,+avx512vl,+avx512vnni"'

load_i8x32, bcast4_i8x32, zero_i32x8, store_i32x8 = _load(i8x32), _bcast4(i8x32, i32x8), _zero(i32x8), _store(i32x8)


@intrinsic
def dot4_u8s8(typingctx, a, b):
    """Per 32-bit lane ``sum(a[4i + j] * b[4i + j], j < 4)``, ``a`` unsigned and ``b`` signed bytes
    (``vpmaddubsw`` + ``vpmaddwd``; each adjacent pair saturates at int16)."""
    def codegen(context, builder, sig, args):
        t = call(builder, "llvm.x86.avx2.pmadd.ub.sw", _V16I16, list(args))
        return call(builder, "llvm.x86.avx2.pmadd.wd", _V8I32, [t, ir.Constant(_V16I16, [1] * 16)])
    return i32x8(a, b), codegen


@intrinsic
def add_i32x8(typingctx, a, b):
    def codegen(context, builder, sig, args):
        return builder.add(args[0], args[1])
    return i32x8(a, b), codegen


@intrinsic
def copy_bytes(typingctx, dst, d, src, s, n):
    """``dst[d:d + n] = src[s:s + n]`` for 1-byte arrays that do not overlap there: one ``memcpy``
    (numba's slice assignment builds views and copies element by element: 7x slower on rows of a
    few hundred bytes)."""
    def codegen(context, builder, sig, args):
        dv, di, sv, si, nn = args
        dp = elem_ptr(context, builder, sig.args[0], dv, di)
        sp = elem_ptr(context, builder, sig.args[2], sv, si)
        cgutils.raw_memcpy(builder, dp, sp, context.cast(builder, nn, sig.args[4], types.intp), 1)
        return context.get_dummy_value()
    return types.none(dst, d, src, s, n), codegen



@intrinsic
def zero_bytes(typingctx, dst, d, n):
    """``dst[d:d + n] = 0`` for a 1-byte array: one ``memset`` (a byte loop was a store per byte)."""
    def codegen(context, builder, sig, args):
        dv, di, nn = args
        dp = elem_ptr(context, builder, sig.args[0], dv, di)
        cgutils.memset(builder, dp, context.cast(builder, nn, sig.args[2], types.intp), 0)
        return context.get_dummy_value()
    return types.none(dst, d, n), codegen

_V8F32 = ir.VectorType(F32, 8)
_V8I8 = ir.VectorType(I8, 8)


def _load8(context, builder, arrty, arr, idx, vty):
    return builder.load(elem_ptr(context, builder, arrty, arr, idx, pty=vty), align=1)


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
        rcv = splat(builder, context.cast(builder, rc_, st[4], types.int32), _V8I32)
        acc = builder.sub(acc, builder.mul(_load8(context, builder, st[3], zwv, j_, _V8I32), rcv))
        f = builder.sitofp(acc, _V8F32)
        f = builder.fadd(f, _load8(context, builder, st[5], bv, j_, _V8F32))
        f = builder.fmul(f, _load8(context, builder, st[6], mv, j_, _V8F32))
        rnd = ir.Constant(_V8F32, [12582912.0] * 8)
        f = builder.fsub(builder.fadd(f, rnd), rnd)
        f = builder.fadd(f, splat(builder, context.cast(builder, yz_, st[8], types.float32), _V8F32))
        lov = splat(builder, context.cast(builder, lo_, st[9], types.float32), _V8F32)
        hiv = splat(builder, context.cast(builder, hi_, st[10], types.float32), _V8F32)
        f = builder.select(builder.fcmp_ordered(">", f, lov), f, lov)
        f = builder.select(builder.fcmp_ordered("<", f, hiv), f, hiv)
        q = builder.trunc(builder.fptosi(f, _V8I32), _V8I8)
        builder.store(q, elem_ptr(context, builder, st[11], dv, di_, pty=_V8I8), align=1)
        return context.get_dummy_value()
    return types.none(c, ci, corr, zw, rc, bias_div, mult, j, yz, lo, hi, dst, di), codegen


dpbusd = _dpbusd(i32x8, """``acc + `` per 32-bit lane ``sum(a[4i + j] * b[4i + j], j < 4)``, ``a`` unsigned
    and ``b`` signed bytes, exact (``vpdpbusd``, AVX512-VNNI with VL: no int16 saturation; the int32
    sum wraps). Marks its function as compiled for AVX512-VNNI.""")

# -- 512-bit registers (AVX512-VNNI): 16 channels x 4 depths of a packed panel in one register -------
load_i8x64, bcast4_i8x64 = _load(i8x64), _bcast4(i8x64, i32x16)
zero_i32x16, store_i32x16 = _zero(i32x16), _store(i32x16)
dpbusd512 = _dpbusd(i32x16, """:func:`dpbusd` on 512-bit registers (16 int32 lanes: one packed panel's 16
    channels; the intrinsic keeps them whole, ``zmm``, even where LLVM prefers 256-bit vectors).""")

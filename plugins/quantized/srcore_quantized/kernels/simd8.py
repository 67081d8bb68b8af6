"""AVX2 8-bit integer vectors for numba kernels: ``u8 x s8 -> s32`` dot products of 4.

numba has no vector types and LLVM does not find ``vpmaddubsw`` in a scalar loop. These intrinsics
give numba functions register values (``<32 x i8>``, ``<8 x i32>``) and the one instruction pair
that does 32 multiply-adds of 8-bit integers: ``vpmaddubsw`` (u8 x s8, adjacent pairs summed into
saturating int16) then ``vpmaddwd`` against ones (pairs of int16 summed into int32). The int16
step saturates when ``a0*b0 + a1*b1`` leaves [-32768, 32767]; callers keep their operands where
it cannot (:mod:`.int8_gemm`). On AVX512-VNNI the pair is one ``vpdpbusd``; it is not used here
(the machine this was written on has no AVX-512), and the AVX2 pair gives the same integers.

Indices are element offsets into 1-D arrays, unchecked (the kernels own their index arithmetic).
numba's on-disk cache keys a kernel on its own module's source, not on this one's: after editing
this module, delete the ``__pycache__/*.nbi``/``*.nbc`` files of :mod:`.int8_gemm`.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
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

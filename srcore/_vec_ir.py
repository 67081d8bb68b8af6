"""LLVM vector register values for numba kernels: one numba type per ``<lanes x elem>``, and the
codegen helpers the SIMD intrinsic modules share (:mod:`srcore.conv.simd`, :mod:`srcore.int8.simd8`,
:mod:`srcore.int8.amx`).

numba has no vector types; :class:`VecType` instances are values numba keeps in registers, with one
data model (the LLVM vector itself). Instances pickle (numba's on-disk cache stores them). numba keys a
cached kernel on its own module's source: after editing this module, delete the kernels' ``*.nbi``/``*.nbc``.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import models, register_model

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
_ELEM = {"i8": I8, "i16": I16, "i32": I32, "f32": F32}


class VecType(types.Type):
    """numba type of a ``<lanes x elem>`` register value; ``elem`` one of ``i8``, ``i16``, ``i32``, ``f32``."""

    def __init__(self, elem: str, lanes: int):
        self.elem = elem
        self.lanes = lanes
        super().__init__(name=f"{elem}x{lanes}")

    @property
    def ir_type(self) -> ir.VectorType:
        return ir.VectorType(_ELEM[self.elem], self.lanes)


@register_model(VecType)
class _VecModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, fe_type.ir_type)


i8x32, i32x8 = VecType("i8", 32), VecType("i32", 8)
i8x64, i32x16 = VecType("i8", 64), VecType("i32", 16)
f32x8, f32x16 = VecType("f32", 8), VecType("f32", 16)


def elem_ptr(context, builder, arrty, arr, idx, idxty=types.intp, pty=None):
    """The address of element ``idx`` (of numba type ``idxty``) of a 1-D array or ``CPointer``,
    as a pointer to ``pty`` if given."""
    data = arr if isinstance(arrty, types.CPointer) else context.make_array(arrty)(context, builder, value=arr).data
    p = builder.gep(data, [context.cast(builder, idx, idxty, types.intp)])
    return p if pty is None else builder.bitcast(p, pty.as_pointer())


def splat(builder, x, vty):
    """The scalar ``x`` in every lane of a ``vty`` (insert into lane 0, shuffle with zero indices)."""
    v = builder.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(I32, 0))
    zeros = ir.Constant(ir.VectorType(I32, vty.count), [0] * vty.count)
    return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined), zeros)


def declare(builder, name: str, ret, argtys):
    """The function ``name`` (an LLVM intrinsic) of the builder's module, declared on first use."""
    return builder.module.globals.get(name) or ir.Function(builder.module, ir.FunctionType(ret, argtys), name)


def call(builder, name: str, ret, args):
    """``name(*args)``, declared from the arguments' types."""
    return builder.call(declare(builder, name, ret, [a.type for a in args]), args)

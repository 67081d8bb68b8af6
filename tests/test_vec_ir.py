"""The vector register types of :mod:`srcore._vec_ir`: LLVM types, and pickling (numba's on-disk cache)."""
import pickle

import pytest
from llvmlite import ir

from srcore import _vec_ir

pytestmark = pytest.mark.one_pass

CASES = [("i8x32", ir.IntType(8), 32), ("i32x8", ir.IntType(32), 8), ("i8x64", ir.IntType(8), 64),
         ("i32x16", ir.IntType(32), 16), ("f32x8", ir.FloatType(), 8), ("f32x16", ir.FloatType(), 16)]


@pytest.mark.parametrize("name,elem,lanes", CASES)
def test_each_register_type_is_its_llvm_vector_and_unpickles_to_itself(name, elem, lanes):
    t = getattr(_vec_ir, name)
    assert str(t) == name and t.ir_type == ir.VectorType(elem, lanes)
    assert pickle.loads(pickle.dumps(t)) is t     # interned: a cached kernel's signature matches again


def test_the_kernel_modules_share_the_instances():
    from srcore.conv import simd
    from srcore.int8 import simd8
    assert simd8.i8x64 is _vec_ir.i8x64 and simd8.i32x8 is _vec_ir.i32x8 and simd.f32x16 is _vec_ir.f32x16
    assert _vec_ir.VecType("f32", 8) is _vec_ir.f32x8


def test_plugins_reach_the_helpers_through_srcore_plugin():
    # plugins import srcore.plugin only; its lazy ``vec_ir`` is this module (numba loads on first use)
    import srcore.plugin
    assert srcore.plugin.vec_ir is _vec_ir and "vec_ir" in srcore.plugin.__all__
    simd = pytest.importorskip("srcore_trt_like.kernels.simd")
    assert simd.elem_ptr is _vec_ir.elem_ptr and simd.splat is _vec_ir.splat

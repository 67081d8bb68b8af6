"""srcore-trt-like: records, kernels (against numpy) and the support table."""
from __future__ import annotations

import numpy as np
import pytest

import srcore_trt_like as trt
from srcore.ir.types import FLOAT, INT, TensorType
from srcore.plugin import ArgInfo, EngineBuilder, NodeInfo, Specialized
from srcore_trt_like import node_kernels as kernels
from srcore_trt_like.builder import support

#: kernels, the support table and matchers are called directly: no executor or memory planner
pytestmark = pytest.mark.one_pass

F32 = TensorType("float32", (2, 3))


def test_records():
    assert [b.name for b in trt.srcore_backends()] == ["trt_like"]
    (eb,) = trt.srcore_engine_builders()
    assert isinstance(eb, EngineBuilder) and eb.backend == "trt_like"
    assert {k.op for k in trt.srcore_kernels()} == {"aten::relu", "aten::add.Tensor"}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_relu_out_writes_into_out(dtype):
    x = np.array([[-1.5, 0.0, 2.0]], dtype)
    out = np.empty_like(x)
    assert kernels.relu_out(x, out=out) is out
    np.testing.assert_array_equal(out, [[0.0, 0.0, 2.0]])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_relu_matcher_binds_a_zero_of_the_output_dtype(dtype):
    t = TensorType(dtype, (2, 3))
    spec = kernels.relu_matcher(NodeInfo("aten::relu", None, (ArgInfo("self", t),), (t,)))
    assert isinstance(spec, Specialized) and spec.fn is np.maximum and spec.args[0] == 0
    zero = spec.args[1].value
    assert type(zero) is np.dtype(dtype).type and zero == 0
    x = np.array([[-1.5, 0.0, 2.0]], dtype)
    np.testing.assert_array_equal(spec.fn(x, zero), [[0.0, 0.0, 2.0]])
    assert spec.fn(x, zero).dtype == np.dtype(dtype)
    unknown = TensorType()
    assert kernels.relu_matcher(NodeInfo("aten::relu", None, (ArgInfo("self", unknown),), (unknown,))) \
        is kernels.relu_out


def test_supports_matrix_products_only_in_the_forms_the_converters_build():
    """addmm with a computed mat2 or self, matmul of two constants or with a vector:
    the converters refuse them, so support must too (else the whole segment fell back to cpu at
    load: "addmm needs constant mat2 and self")."""
    m, w, b = TensorType("float32", (4, 3)), TensorType("float32", (3, 5)), TensorType("float32", (5,))
    out = (TensorType("float32", (4, 5)),)
    one = (ArgInfo("beta", INT, True, 1), ArgInfo("alpha", INT, True, 1))
    wv, bv = np.ones((3, 5), np.float32), np.ones(5, np.float32)

    def addmm(self_c, mat2_c, self_t=b):
        return NodeInfo("aten::addmm", None, (ArgInfo("self", self_t, self_c, bv if self_c else None), ArgInfo("mat1", m),
                                              ArgInfo("mat2", w, mat2_c, wv if mat2_c else None)) + one, out)
    assert support.supports(addmm(True, True)) is True
    assert support.supports(addmm(True, False)) == ("argument 'mat2' is a computed tensor; the engine bakes it in "
                                                    "(a weight) and needs a constant")
    assert "argument 'self' is a computed tensor" in support.supports(addmm(False, True))
    assert support.supports(addmm(True, True, TensorType("float32", (4, 5)))) is True   # any self that broadcasts

    def mm(op, a, b_, a_c=False, b_c=False):
        return NodeInfo(op, None, (ArgInfo("self", a, a_c), ArgInfo("other", b_, b_c)), out)
    assert support.supports(mm("aten::matmul", m, w)) is support.supports(mm("aten::matmul", m, w, b_c=True)) is True
    assert support.supports(mm("aten::matmul", m, w, a_c=True)) is True   # a constant left operand: a network tensor
    assert support.supports(mm("aten::matmul", m, w, a_c=True, b_c=True)) == "self and other are both constants"
    assert support.supports(mm("aten::matmul", m, TensorType("float32", (3,)))) == \
        "a matrix-vector product (self (4, 3) @ other (3))"
    assert support.supports(mm("aten::matmul", m, TensorType("float32", (2, 3, 5)), b_c=True)) == \
        "constant other of shape (2, 3, 5) is not 2-D"


def test_add_out_with_alpha_and_the_matcher():
    a, b = np.ones((2, 2), np.float32), np.full((2, 2), 2.0, np.float32)
    np.testing.assert_array_equal(kernels.add_out(a, b, alpha=3), np.full((2, 2), 7.0))
    args = (ArgInfo("self", F32), ArgInfo("other", F32))
    one = NodeInfo("aten::add.Tensor", None, args + (ArgInfo("alpha", INT, True, 1),), (F32,))
    two = NodeInfo("aten::add.Tensor", None, args + (ArgInfo("alpha", INT, True, 2),), (F32,))
    var = NodeInfo("aten::add.Tensor", None, args + (ArgInfo("alpha", INT, False),), (F32,))
    spec = kernels.add_matcher(one)
    assert isinstance(spec, Specialized) and spec.fn is np.add and spec.args == (0, 1)
    assert kernels.add_matcher(two) is None and kernels.add_matcher(var) is None


def test_supports_table_ops_on_float32_with_constant_arguments():
    relu = NodeInfo("aten::relu", None, (ArgInfo("self", F32),), (F32,))
    relu64 = NodeInfo("aten::relu", None, (ArgInfo("self", TensorType("float64")),), (TensorType("float64"),))
    unranked = NodeInfo("aten::relu", None, (ArgInfo("self", TensorType("float32")),), (TensorType("float32"),))
    pow_c = NodeInfo("aten::pow.Tensor_Scalar", None, (ArgInfo("self", F32), ArgInfo("exponent", FLOAT, True, 2.0)),
                     (F32,))
    pow_v = NodeInfo("aten::pow.Tensor_Scalar", None, (ArgInfo("self", F32), ArgInfo("exponent", FLOAT)), (F32,))
    cumsum = NodeInfo("aten::logcumsumexp", None, (ArgInfo("self", F32), ArgInfo("dim", INT, True, 0)), (F32,))
    assert support.supports(relu) is support.supports(pow_c) is True
    # refusals say which argument, dtype or shape
    assert support.supports(relu64) == "argument 'self' is float64; engines compute in float32, quint8, qint8"
    assert support.supports(unranked) == "argument 'self' has no known rank"
    assert support.supports(pow_v) == ("argument 'exponent' is computed from tensor data at run time; the engine "
                                       "bakes it in and needs a constant or a value known from the input shapes")
    pow_d = NodeInfo("aten::pow.Tensor_Scalar", None,
                     (ArgInfo("self", F32), ArgInfo("exponent", FLOAT, derived=True)), (F32,))
    assert support.supports(pow_d) is True   # known per input signature: each plan folds it
    assert support.supports(cumsum) == ("aten::logcumsumexp is not in the engine's op table "
                                        "(srcore list-ops --engine trt_like)")
    conv3d = NodeInfo("aten::max_pool2d", None, (ArgInfo("self", TensorType("float32", (3, 8, 8))),) + tuple(
        ArgInfo(n, INT, True, v) for n, v in (("kernel_size", [2]), ("stride", [2]), ("padding", [0]),
                                              ("dilation", [1]), ("ceil_mode", False))),
        (TensorType("float32", (3, 4, 4)),))
    assert support.supports(conv3d) == "self of shape (3, 8, 8) is not 4-D (the layers are batched NCHW)"

"""Elementwise kernels vs torch: arithmetic with promotion and broadcasting, unary math,
comparisons, clamp/where/masks, in-place forms, and every matcher path."""
from __future__ import annotations

import timeit

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.ir.types import FLOAT, INT, NUMBER, TensorType  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from srcore.testing import check_kernel, node_info  # noqa: E402
from srcore_cpu.kernels import elementwise as E  # noqa: E402
from srcore_cpu.kernels import inplace as I  # noqa: E402
from srcore_cpu.kernels import ternary as T  # noqa: E402
from srcore_cpu.kernels import unary as U  # noqa: E402
from srcore_cpu.kernels.promotion import result_type  # noqa: E402
from cpu_kernel_util import make_rand  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)
rand = make_rand(RNG)


def nonzero(*shape, dtype="float32"):
    x = rand(*shape, dtype=dtype)
    x[x == 0] = 3
    return x


PAIRS = [((2, 3), (2, 3)), ((4, 1, 3), (5, 1)), ((3,), ()), ((), ())]
DTYPES = ["float32", "float64", "int64", "int32"]


# --- type promotion ----------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [
    (np.zeros(2, np.int64), 1.5), (np.zeros(2, np.int32), np.zeros((), np.float64)),
    (np.zeros(2, np.float32), np.zeros(2, np.float64)), (np.zeros(2, bool), 1), (np.zeros(2, bool), True),
    (np.zeros(2, np.int32), 7), (np.zeros(2, np.float16), 2.0), (np.zeros((), np.int64), 2.5),
    (np.zeros(2, np.int64), np.zeros(2, np.float32)), (np.zeros(2, np.uint8), np.zeros(2, np.int8)),
    (np.zeros(2, np.int32), np.zeros((), np.int64)), (np.zeros((), bool), np.zeros(2, np.int32)),
])
def test_result_type_matches_torch(a, b):
    ta = torch.from_numpy(a)
    tb = torch.from_numpy(b) if isinstance(b, np.ndarray) else b
    assert result_type(a, b).name == str(torch.result_type(ta, tb)).replace("torch.", "")


_DT = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
_SCALARS = [True, 3, -2, 2.5]


def _operand(kind, dt, sc):
    if kind == "scalar":
        return sc
    return np.zeros((2,) if kind == "dim" else (), dt)


@settings(max_examples=150, deadline=None)
@given(st.tuples(st.sampled_from(["dim", "zero"]), st.sampled_from(_DT), st.sampled_from(_SCALARS)),
       st.tuples(st.sampled_from(["dim", "zero", "scalar"]), st.sampled_from(_DT), st.sampled_from(_SCALARS)))
def test_result_type_property(first, second):
    """Any pair of dimensioned, zero-dim and Python-number operands promotes like torch.result_type."""
    a, b = _operand(*first), _operand(*second)
    ta = torch.from_numpy(a)
    tb = torch.from_numpy(b) if isinstance(b, np.ndarray) else b
    assert result_type(a, b).name == str(torch.result_type(ta, tb)).replace("torch.", "")
    if isinstance(b, np.ndarray):
        assert result_type(b, a).name == str(torch.result_type(tb, ta)).replace("torch.", "")


# --- binary arithmetic -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "minimum", "maximum"])
def test_binary_tensor(name, sa, sb, dtype):
    a, b = rand(*sa, dtype=dtype), rand(*sb, dtype=dtype)
    check_kernel(getattr(E, name), getattr(torch, name), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["div", "floor_divide", "remainder"])
def test_division_family(name, dtype):
    a, b = rand(3, 4, dtype=dtype), nonzero(4, dtype=dtype)
    check_kernel(getattr(E, name), getattr(torch, name), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_modes(mode, dtype):
    a, b = rand(3, 4, dtype=dtype) * 3, nonzero(3, 1, dtype=dtype)
    check_kernel(E.div, lambda x, y: torch.div(x, y, rounding_mode=mode), a, b, rounding_mode=mode)
    check_kernel(E.div, lambda x, s: torch.div(x, s, rounding_mode=mode), a, -4, rounding_mode=mode)


def test_div_bad_mode():
    with pytest.raises(ValueError, match="rounding_mode"):
        E.div(rand(2), rand(2), rounding_mode="ceil")


@pytest.mark.parametrize("name,scalar,dtype", [
    (n, s, d) for n in ("add", "mul", "sub") for s in (2, -3, 2.5, True) for d in DTYPES + ["bool"]
    if not (n == "sub" and (d == "bool" or s is True))])  # torch rejects subtraction of bools
def test_binary_scalar_promotion(name, scalar, dtype):
    a = rand(2, 3, dtype=dtype)
    check_kernel(getattr(E, name), getattr(torch, name), a, scalar)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_alpha_and_rsub(dtype):
    a, b = rand(3, 4, dtype=dtype), rand(4, dtype=dtype)
    check_kernel(E.add, lambda x, y: torch.add(x, y, alpha=3), a, b, alpha=3)
    check_kernel(E.sub, lambda x, y: torch.sub(x, y, alpha=2), a, b, alpha=2)
    check_kernel(E.rsub, lambda x, y: torch.rsub(x, y), a, b)
    check_kernel(E.rsub, lambda x, y: torch.rsub(x, y, alpha=2), a, b, alpha=2)
    check_kernel(E.rsub, torch.rsub, a, 5)


def test_int_true_division_is_float32():
    a, b = rand(5, dtype="int64"), nonzero(5, dtype="int64")
    r = check_kernel(E.div, torch.div, a, b)
    assert r.dtype == np.float32


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_pow(dtype):
    a = np.abs(rand(3, 4, dtype=dtype)) + 1
    check_kernel(E.pow, torch.pow, a, np.abs(rand(4, dtype=dtype)))
    check_kernel(E.pow, torch.pow, a, 2)
    check_kernel(E.pow, torch.pow, a, 0.5)
    check_kernel(E.pow, torch.pow, 2, a)


def test_pow_negative_int_exponent_raises():
    with pytest.raises(ValueError, match="negative integer powers"):
        E.pow(np.arange(3), -1)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8])
def test_pow_negative_int_exponent_tensor_matches_torch(dtype):
    """Integers to a negative exponent *tensor* are torch's ``powi`` (0, or +-1 for base +-1):
    numpy refuses them (``2 ** x`` of a traced model crashed)."""
    base = np.array([[-3, -2, -1, 0], [1, 2, 3, 5]], dtype)
    exp = np.array([-1, -2, 3, 0], dtype)
    check_kernel(E.pow, torch.pow, base, exp)
    check_kernel(E.pow, torch.pow, 2, exp)
    check_kernel(E.pow, torch.pow, -1, np.array([-3, -2, 1, 4], dtype))
    out = np.empty((2, 4), dtype)
    np.testing.assert_array_equal(E.pow(base, exp, out=out), torch.pow(torch.from_numpy(base), torch.from_numpy(exp)).numpy())


def test_remainder_scalar_tensor():
    b = nonzero(3, 4)
    check_kernel(E.remainder, torch.remainder, 5.5, b)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(name, dtype):
    a, b = rand(3, 4, dtype=dtype), rand(4, dtype=dtype)
    check_kernel(getattr(E, name), getattr(torch, name), a, b)
    if dtype != "bool":
        check_kernel(getattr(E, name), getattr(torch, name), a, 1)
        check_kernel(getattr(E, name), getattr(torch, name), a, 0.5)


def test_comparisons_with_nan():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([np.nan, 1.0, np.nan], np.float32)
    for name in ["eq", "ne", "lt", "ge"]:
        check_kernel(getattr(E, name), getattr(torch, name), a, b)


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical(name):
    check_kernel(getattr(E, name), getattr(torch, name), rand(3, 4, dtype="bool"), rand(4, dtype="bool"))
    check_kernel(getattr(E, name), getattr(torch, name), rand(3, 4), rand(3, 4, dtype="int64"))


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise(name, dtype):
    check_kernel(getattr(E, name), getattr(torch, name), rand(3, 4, dtype=dtype), rand(4, dtype=dtype))
    if dtype != "bool":
        check_kernel(getattr(E, name), getattr(torch, name), rand(3, dtype=dtype), 6)
        check_kernel(getattr(E, name), lambda s, t: getattr(torch, name)(torch.tensor(s), t), 6,
                     rand(3, dtype=dtype))  # Scalar_Tensor


# --- unary -------------------------------------------------------------------------------------

FLOATING = ["exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "erf", "log2",
            "log10"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("name", FLOATING)
def test_floating_unary(name, dtype):
    x = rand(4, 5, dtype=dtype)
    if name in ("log", "sqrt", "rsqrt", "log1p", "log2", "log10"):
        x = np.abs(x) + (1 if dtype == "int64" else 0.5)
    if name == "reciprocal":
        x = nonzero(4, 5, dtype=dtype)
    check_kernel(getattr(U, name), getattr(torch, name), x)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("name", ["neg", "abs", "sign", "floor", "ceil", "trunc", "round", "square"])
def test_same_dtype_unary(name, dtype):
    x = rand(4, 5, dtype=dtype) * (2.5 if dtype.startswith("float") else 1)
    if dtype.startswith("float"):
        x[0, :3] = [0.5, 1.5, -2.5]  # round half to even
    check_kernel(getattr(U, name), getattr(torch, name), x)


def test_unary_0d_returns_array():
    r = U.exp(np.array(1.0, np.float32))
    assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == np.float32


def test_round_decimals_and_predicates():
    x = rand(3, 4) * 100
    check_kernel(U.round, lambda t: torch.round(t, decimals=1), x, decimals=1, rtol=1e-6)
    y = np.array([np.nan, np.inf, -np.inf, 1.0, 0.0], np.float32)
    check_kernel(U.isnan, torch.isnan, y)
    check_kernel(U.isinf, torch.isinf, y)
    check_kernel(U.isnan, torch.isnan, np.arange(3))
    check_kernel(U.logical_not, torch.logical_not, y)
    check_kernel(U.bitwise_not, torch.bitwise_not, rand(5, dtype="int64"))
    check_kernel(U.bitwise_not, torch.bitwise_not, rand(5, dtype="bool"))
    check_kernel(U.nan_to_num, torch.nan_to_num, y)
    check_kernel(U.nan_to_num, torch.nan_to_num, y, 1.0, 9.0, -9.0)
    check_kernel(U.nan_to_num, torch.nan_to_num, rand(3, dtype="int64"))


# --- clamp, where, masks, lerp, addcmul ----------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_clamp(dtype):
    x = rand(4, 5, dtype=dtype) * 3
    check_kernel(T.clamp, torch.clamp, x, -1, 2)
    check_kernel(T.clamp, torch.clamp, x, None, 2)
    check_kernel(T.clamp, torch.clamp, x, 0.5, None)
    check_kernel(T.clamp, torch.clamp, x, 3, 1)  # min > max: all max
    lo, hi = rand(5, dtype=dtype) - 1, rand(4, 1, dtype=dtype) + 1
    check_kernel(T.clamp, torch.clamp, x, lo, hi)
    check_kernel(T.clamp_min, torch.clamp_min, x, lo)
    check_kernel(T.clamp_max, torch.clamp_max, x, 1)
    with pytest.raises(KernelError, match="At least one"):
        T.clamp(x)


def test_clamp_nan_propagates():
    x = np.array([np.nan, -3.0, 3.0], np.float32)
    check_kernel(T.clamp, torch.clamp, x, -1.0, 1.0)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_where(dtype):
    c = rand(3, 4, dtype="bool")
    a, b = rand(3, 4, dtype=dtype), rand(4, dtype=dtype)
    check_kernel(T.where, torch.where, c, a, b)
    check_kernel(T.where, torch.where, c, a, 0)
    check_kernel(T.where, torch.where, c, 1.5, b)
    check_kernel(T.where, torch.where, c, 1.0, 0.0)


def test_masked_fill():
    x, m = rand(3, 4), rand(4, dtype="bool")
    check_kernel(T.masked_fill, torch.masked_fill, x, m, -1e9)
    check_kernel(T.masked_fill, torch.masked_fill, x, m, np.array(2.0, np.float32))
    check_kernel(T.masked_fill, torch.masked_fill, rand(3, 4, dtype="int64"), m, 3)
    with pytest.raises(KernelError, match="0-dimensional"):
        T.masked_fill(x, m, np.ones(2, np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lerp_addcmul(dtype):
    a, b, w = rand(3, 4, dtype=dtype), rand(4, dtype=dtype), rand(3, 1, dtype=dtype)
    check_kernel(T.lerp, torch.lerp, a, b, 0.3)
    check_kernel(T.lerp, torch.lerp, a, b, 0.8)
    check_kernel(T.lerp, torch.lerp, a, b, w)
    check_kernel(T.addcmul, torch.addcmul, a, b, w)
    check_kernel(T.addcmul, lambda x, y, z: torch.addcmul(x, y, z, value=0.5), a, b, w, value=0.5)


# --- in-place ----------------------------------------------------------------------------------

INPLACE = [  # (kernel name, torch method, extra args)
    ("add_", "add_", (rand(4),)), ("sub_", "sub_", (2.0,)), ("mul_", "mul_", (rand(3, 4),)),
    ("div_", "div_", (nonzero(4),)), ("pow_", "pow_", (2,)), ("remainder_", "remainder_", (1.5,)),
    ("neg_", "neg_", ()), ("exp_", "exp_", ()), ("tanh_", "tanh_", ()), ("erf_", "erf_", ()),
    ("clamp_", "clamp_", (-0.5, 0.5)), ("clamp_min_", "clamp_min_", (0.0,)),
    ("relu_", "relu_", ()), ("sigmoid_", "sigmoid_", ()), ("silu_", None, ()), ("gelu_", None, ()),
    ("hardswish_", None, ()), ("leaky_relu_", None, (0.2,)), ("elu_", None, ()), ("hardtanh_", None, ()),
    ("masked_fill_", "masked_fill_", (rand(4, dtype="bool"), 7.0)), ("lerp_", "lerp_", (rand(4), 0.7)),
    ("addcmul_", "addcmul_", (rand(4), rand(3, 1))), ("gt_", "gt_", (0.0,)), ("zero_", "zero_", ()),
    ("fill_", "fill_", (2.5,)), ("abs_", "abs_", ()), ("square_", "square_", ()), ("round_", "round_", ()), ("threshold_", None, (0.1, 9.0)),
]
_F = torch.nn.functional


@pytest.mark.parametrize("name,method,args", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_writes_self(name, method, args):
    x = rand(3, 4)
    if method is None:
        f = {"silu_": _F.silu, "gelu_": _F.gelu, "hardswish_": _F.hardswish, "elu_": _F.elu,
             "leaky_relu_": lambda t, s: _F.leaky_relu(t, s), "hardtanh_": _F.hardtanh,
             "threshold_": lambda t, a, b: _F.threshold(t, a, b)}[name]
        expected = f(torch.from_numpy(x.copy()), *args).numpy()
    else:
        targs = [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
        expected = getattr(torch.from_numpy(x.copy()), method)(*targs).numpy()
    r = getattr(I, name)(x, *args)
    assert r is x
    np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-6)


def test_inplace_div_trunc_and_int_add():
    x = np.array([7, -7, 5], np.int64)
    r = I.div_(x, np.array([2, 2, -3]), rounding_mode="trunc")
    assert r is x and x.tolist() == [3, -3, -1]
    y = np.arange(4)
    assert I.add_(y, 1, alpha=2) is y and y.tolist() == [2, 3, 4, 5]


# --- matchers ----------------------------------------------------------------------------------

F32 = TensorType("float32", (2, 3))
I64 = TensorType("int64", (2, 3))
B = TensorType("bool", (2, 3))


@pytest.mark.parametrize("op,ufunc,kernel", [
    ("aten::add.Tensor", np.add, E.add), ("aten::sub.Tensor", np.subtract, E.sub),
    ("aten::mul.Tensor", np.multiply, E.mul), ("aten::div.Tensor", np.true_divide, E.div),
    ("aten::maximum", np.maximum, E.maximum), ("aten::pow.Tensor_Tensor", np.power, E.pow)])
def test_binary_matcher_binds_ufunc(op, ufunc, kernel):
    args = dict(self=F32, other=F32)
    if op.startswith(("aten::add", "aten::sub")):
        args["alpha"] = 1
    s = E.binary_matcher(node_info(op, outputs=(F32,), **args))
    assert s == Specialized(ufunc, args=(0, 1)) and s.fn is ufunc
    a, b, out = np.abs(rand(2, 3)), rand(2, 3), np.empty((2, 3), np.float32)
    s.fn(a, b, out=out)
    np.testing.assert_array_equal(out, kernel(a, b))


@pytest.mark.parametrize("e,ufunc", [(2, np.square), (2.0, np.square), (0.5, np.sqrt), (-1, np.reciprocal)])
def test_pow_matcher_cheap_exponents(e, ufunc):
    s = E.binary_matcher(node_info("aten::pow.Tensor_Scalar", self=F32, exponent=e, outputs=(F32,)))
    assert s.fn is ufunc and s.args == (0,)
    x = np.abs(rand(2, 3)) + 0.1
    np.testing.assert_allclose(s.fn(x), torch.pow(torch.from_numpy(x), e).numpy(), rtol=1e-6)
    assert E.binary_matcher(node_info("aten::pow.Tensor_Scalar", self=F32, exponent=3, outputs=(F32,))).fn is np.power


@pytest.mark.parametrize("e", [np.array(2.0, np.float32), np.array([2.0, 3.0, 0.5], np.float32)])
def test_pow_matcher_constant_tensor_exponent(e):
    """A constant tensor exponent (an ONNX Pow's initializer) takes the generic path; the cheap-
    exponent lookup hashed the array and raised TypeError at load."""
    s = E.binary_matcher(node_info("aten::pow.Tensor_Tensor", self=F32, exponent=e, outputs=(F32,)))
    assert s.fn is np.power and s.args == (0, 1)
    x = np.abs(rand(2, 3)) + 0.1
    np.testing.assert_allclose(s.fn(x, e), torch.pow(torch.from_numpy(x), torch.from_numpy(e)).numpy(), rtol=1e-6)


def test_binary_matcher_scalars_and_comparisons():
    assert E.binary_matcher(node_info("aten::add.Scalar", self=F32, other=2, alpha=1, outputs=(F32,))).fn is np.add
    assert E.binary_matcher(node_info("aten::mul.Scalar", self=F32, other=FLOAT, outputs=(F32,))).fn is np.multiply
    assert E.binary_matcher(node_info("aten::mul.Scalar", self=I64, other=INT, outputs=(I64,))).fn is np.multiply
    assert E.binary_matcher(node_info("aten::lt.Tensor", self=F32, other=F32, outputs=(B,))).fn is np.less
    assert E.binary_matcher(node_info("aten::eq.Scalar", self=I64, other=0, outputs=(B,))).fn is np.equal
    floor = E.binary_matcher(node_info("aten::div.Tensor_mode", self=F32, other=F32, rounding_mode="floor",
                                       outputs=(F32,)))
    assert floor.fn is np.floor_divide


@pytest.mark.parametrize("node", [
    node_info("aten::add.Tensor", self=F32, other=F32, alpha=2, outputs=(F32,)),  # alpha
    node_info("aten::add.Tensor", self=F32, other=F32, alpha=INT, outputs=(F32,)),  # alpha not constant
    node_info("aten::add.Tensor", self=I64, other=F32, alpha=1, outputs=(F32,)),  # promotion
    node_info("aten::mul.Scalar", self=TensorType("bool", (2, 3)), other=2.5, outputs=(F32,)),  # a bool tensor
    node_info("aten::mul.Scalar", self=I64, other=NUMBER, outputs=(I64,)),  # could be a float
    node_info("aten::mul.Scalar", self=F32, other=True, outputs=(F32,)),
    node_info("aten::div.Tensor", self=I64, other=I64, outputs=(F32,)),  # int true division
    node_info("aten::div.Tensor_mode", self=F32, other=F32, rounding_mode="trunc", outputs=(F32,)),
    node_info("aten::add.Tensor", self=F32, other=F32, alpha=1, outputs=(TensorType("float32", ()),)),  # 0-d
    node_info("aten::add.Tensor", self=F32, other=F32, alpha=1, outputs=(TensorType("float32", None),)),
    node_info("aten::add.Tensor", self=TensorType(), other=F32, alpha=1, outputs=(F32,)),  # unknown dtype
    node_info("aten::pow.Tensor_Scalar", self=I64, exponent=2, outputs=(I64,)),  # negative powers raise
])
def test_binary_matcher_falls_back_to_generic(node):
    generic = {"add": E.add, "mul": E.mul, "div": E.div, "pow": E.pow}[node.op[6:].split(".")[0]]
    assert E.binary_matcher(node) is generic


def test_unary_and_clamp_matchers():
    s = U.unary_matcher(node_info("aten::exp", self=F32, outputs=(F32,)))
    assert s.fn is np.exp and s.args == (0,)
    assert U.unary_matcher(node_info("aten::neg", self=I64, outputs=(I64,))).fn is np.negative
    assert U.unary_matcher(node_info("aten::log2", self=F32, outputs=(F32,))).fn is np.log2
    assert U.unary_matcher(node_info("aten::square", self=I64, outputs=(I64,))).fn is np.square
    erf = U.unary_matcher(node_info("aten::erf", self=F32, outputs=(F32,)))
    x = rand(2, 3)
    np.testing.assert_allclose(erf.fn(x), torch.erf(torch.from_numpy(x)).numpy(), rtol=1e-6)
    assert U.unary_matcher(node_info("aten::exp", self=I64, outputs=(F32,))) is U.exp
    assert U.unary_matcher(node_info("aten::floor", self=I64, outputs=(I64,))) is U.floor
    assert U.unary_matcher(node_info("aten::neg", self=B, outputs=(B,))) is U.neg
    assert U.unary_matcher(node_info("aten::sign", self=F32, outputs=(F32,))) is U.sign
    assert U.unary_matcher(node_info("aten::round", self=F32, outputs=(TensorType("float32", ()),))) is U.round
    assert U.unary_matcher(node_info("prim::abs", self=F32, outputs=(F32,))) is U.abs
    for lo, hi in [(-1.0, 1.0), (0.0, None), (None, 6.0)]:
        s = T.clamp_matcher(node_info("aten::clamp", self=F32, min=lo, max=hi, outputs=(F32,)))
        out = np.empty((2, 3), np.float32)
        assert s.fn(x, out=out) is out and s.args == (0,)
        np.testing.assert_array_equal(out, torch.clamp(torch.from_numpy(x), lo, hi).numpy())
        np.testing.assert_array_equal(s.fn(x), out)
    s = T.clamp_matcher(node_info("aten::clamp_min", self=F32, min=0.0, outputs=(F32,)))
    np.testing.assert_array_equal(s.fn(x), np.maximum(x, 0))
    assert T.clamp_matcher(node_info("aten::clamp", self=F32, min=FLOAT, max=1.0, outputs=(F32,))) is T.clamp
    assert T.clamp_matcher(node_info("aten::clamp", self=F32, min=None, max=None, outputs=(F32,))) is T.clamp
    assert T.clamp_matcher(node_info("aten::clamp_max", self=I64, max=1.5, outputs=(F32,))) is T.clamp_max


@pytest.mark.perf
def test_fast_path_cost():
    """The generic add costs little more than the ufunc; the matcher's path is the ufunc itself."""
    a, b, out = rand(64, 64), rand(64, 64), np.empty((64, 64), np.float32)
    raw = min(timeit.repeat(lambda: np.add(a, b, out=out), number=2000, repeat=3))
    generic = min(timeit.repeat(lambda: E.add(a, b, out=out), number=2000, repeat=3))
    assert generic < raw * 5 + 2e-3


# --- the check_kernel helper itself --------------------------------------------------------------

@pytest.mark.parametrize("bad,match", [
    (lambda a, b, out=None: E.add(a, b, out=out) * 1.5, "Not equal"),  # wrong values (and a fresh array)
    (lambda a, b, out=None: E.add(a, b).astype(np.float64), "dtype"),
    (lambda a, b, out=None: np.float32(a.sum() + b.sum()), "ndarray"),  # a numpy scalar, not a 0-d array
    (lambda a, b, out=None: E.add(a, b), "return the out"),  # ignores out
    (lambda a, b, out=None: E.add(a, b, out=a), "input"),  # writes into an input
])
def test_check_kernel_catches(bad, match):
    a, b = rand(2, 3), rand(2, 3)
    ref = torch.add if match != "ndarray" else (lambda x, y: (x + y).sum())
    with pytest.raises(AssertionError, match=match):
        check_kernel(bad, ref, a, b, kind="out")


def test_check_kernel_resolves_names_and_shapes():
    r = check_kernel("srcore_cpu.kernels.elementwise:mul", torch.mul, shapes=[(2, 3), (3,)], input_dtype="int64")
    assert r.dtype == np.int64 and r.shape == (2, 3)
    check_kernel("srcore_cpu.kernels.unary:exp", lambda x: np.exp(x), shapes=[(4,)], reference_lib="numpy",
                 input_dtype="float64")
    with pytest.raises(LookupError, match="no installed plugin"):
        check_kernel("nosuch::op", torch.add, shapes=[(2,)])


I64_35 = TensorType("int64", (3, 5))
F32_35 = TensorType("float32", (3, 5))


@pytest.mark.parametrize("op,kw,out_t,want", [
    ("aten::mul.Scalar", dict(other=2.5), F32_35, lambda k: k * 2.5),
    ("aten::div.Scalar", dict(other=2), F32_35, lambda k: k / 2),
    ("aten::add.Scalar", dict(other=0.25, alpha=1), F32_35, lambda k: k + 0.25),
    ("aten::sub.Scalar", dict(other=-3.5, alpha=1), F32_35, lambda k: k - -3.5),
    ("aten::div.Scalar_mode", dict(other=3, rounding_mode="trunc"), I64_35,
     lambda k: torch.div(k, 3, rounding_mode="trunc")),
    ("aten::div.Scalar_mode", dict(other=-3, rounding_mode="trunc"), I64_35,
     lambda k: torch.div(k, -3, rounding_mode="trunc")),
    ("aten::div.Scalar_mode", dict(other=11, rounding_mode="floor"), I64_35,
     lambda k: torch.div(k, 11, rounding_mode="floor")),
    ("aten::fmod.Scalar", dict(other=3), I64_35, lambda k: torch.fmod(k, 3)),
    ("aten::fmod.Scalar", dict(other=-4), I64_35, lambda k: torch.fmod(k, -4)),
])
def test_integer_tensor_by_a_constant_number_fast_paths_match_torch(op, kw, out_t, want):
    """An int64 tensor with a constant Python number (into a float result, or trunc/floor/fmod into
    int64): one bound ufunc path, not the generic kernel; torch's values and dtype, into ``out`` too."""
    node = node_info(op, self=I64_35, **kw, outputs=(out_t,))
    s = E.binary_matcher(node)
    assert isinstance(s, Specialized) and s.args[0] == 0
    k = np.random.default_rng(1).integers(-40, 41, (3, 5))
    exp = want(torch.from_numpy(k)).numpy()
    c = s.args[1].value
    got = s.fn(k, c)
    assert got.dtype == exp.dtype
    np.testing.assert_array_equal(got, exp)
    buf = np.empty(exp.shape, exp.dtype)
    assert s.fn(k, c, out=buf) is buf
    np.testing.assert_array_equal(buf, exp)


def test_division_by_a_constant_zero_keeps_the_generic_kernel():
    for op, kw in (("aten::div.Scalar_mode", dict(other=0, rounding_mode="trunc")),
                   ("aten::div.Scalar_mode", dict(other=0, rounding_mode="floor")),
                   ("aten::fmod.Scalar", dict(other=0))):
        s = E.binary_matcher(node_info(op, self=I64_35, **kw, outputs=(I64_35,)))
        assert s in (E.div, E.fmod)
        mode = {"rounding_mode": kw["rounding_mode"]} if "rounding_mode" in kw else {}
        with pytest.raises(KernelError):
            s(np.ones((3, 5), np.int64), 0, **mode)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32])
def test_clamp_fast_paths_match_torch(dtype):
    t = TensorType(np.dtype(dtype).name, (3, 5))
    x = (np.random.default_rng(2).standard_normal((3, 5)) * 4).astype(dtype)
    if dtype == np.float32:
        x[0, 0] = np.nan
    lo, hi = (-2, 2) if dtype != np.float32 else (-1e6, 0.5)
    s = T.clamp_matcher(node_info("aten::clamp", self=t, min=lo, max=hi, outputs=(t,)))
    assert isinstance(s, Specialized)
    np.testing.assert_array_equal(s.fn(x), torch.clamp(torch.from_numpy(x), lo, hi).numpy())
    lo_t, hi_t = x - 1, x * 0 + 1   # tensor bounds (one below another: max wins, as torch)
    hi_t[1] = -5
    s = T.clamp_tensor_matcher(node_info("aten::clamp.Tensor", self=t, min=t, max=t, outputs=(t,)))
    assert s.fn is T._clamp_both
    X, L, H = (torch.from_numpy(a) for a in (x, lo_t, hi_t))
    want = torch.clamp(X, L, H).numpy()
    np.testing.assert_array_equal(s.fn(x, lo_t, hi_t), want)
    out = np.empty_like(x)
    assert s.fn(x, lo_t, hi_t, out=out) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(s.fn(x, None, hi_t), torch.clamp(X, None, H).numpy())
    # a bound of another dtype, or a broadcast output: the generic kernel
    f64 = TensorType("float64", (3, 5))
    assert T.clamp_tensor_matcher(node_info("aten::clamp.Tensor", self=t, min=f64, max=t, outputs=(f64,))) is T.clamp
    big = TensorType(np.dtype(dtype).name, (2, 3, 5))
    assert T.clamp_tensor_matcher(node_info("aten::clamp.Tensor", self=t, min=big, max=t, outputs=(big,))) is T.clamp

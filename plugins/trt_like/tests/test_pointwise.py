"""srcore_trt_like.pointwise: fused kernels against torch (every op), broadcasting, several
outputs, random DAGs against a float64 evaluation, errors, and the on-disk kernel cache.

Compiling is the slow part: each test module compiles a handful of kernels and shares them
through module-scoped fixtures; every kernel goes to a temporary SRCORE_CACHE_DIR.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special

from srcore.errors import EngineBuildError, SrcoreError, SrcoreInputError
from srcore_trt_like import pointwise as pw
from srcore_trt_like.pointwise import Const, Input, Op, PointwiseError, Program, compile_program, op

torch = pytest.importorskip("torch")

#: kernels and compiled programs are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass
F = torch.nn.functional
F32 = np.float32
EPS = 2.0 ** -23   # one float32 ulp at 1.0


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(tmp_path_factory):
    """Kernels of this module go to a temporary cache (never the user's)."""
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("srcore-cache")
    mp.setenv("SRCORE_CACHE_DIR", str(path))
    yield path
    mp.undo()


def _values() -> np.ndarray:
    """A sweep of [-12, 12], large magnitudes, and the special values."""
    special_values = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 100.0, -100.0, 30.0, -30.0,
                      88.0, -90.0, 1e20, -1e20]
    return np.concatenate([np.linspace(-12, 12, 2401), special_values]).astype(F32)[None, :]


# -- every unary op against torch -------------------------------------------------------------------
#: (op, params, torch function, tolerance): "exact" (bitwise, NaN where torch has NaN), or
#: (rtol, atol) for approximations (torch's own kernels are ~1 ulp; gelu's ~1e-6 absolute)
UNARY = [
    ("neg", {}, torch.neg, "exact"),
    ("abs", {}, torch.abs, "exact"),
    ("square", {}, torch.square, "exact"),
    # torch's sqrt (MKL VML) is ~1 ulp, ours is IEEE sqrt (correctly rounded)
    ("sqrt", {}, torch.sqrt, (EPS, 0)),
    ("rsqrt", {}, torch.rsqrt, "exact"),
    ("reciprocal", {}, torch.reciprocal, "exact"),
    ("relu", {}, torch.relu, "exact"),
    ("relu6", {}, F.relu6, "exact"),
    ("clamp", {"min": -0.5, "max": 2.0}, lambda t: torch.clamp(t, -0.5, 2.0), "exact"),
    ("clamp", {"min": 0.25}, lambda t: torch.clamp(t, min=0.25), "exact"),
    ("clamp", {"max": -1.0}, lambda t: torch.clamp(t, max=-1.0), "exact"),
    ("clamp", {"min": 2.0, "max": 1.0}, lambda t: torch.clamp(t, 2.0, 1.0), "exact"),
    ("hardtanh", {}, F.hardtanh, "exact"),
    ("hardtanh", {"min_val": -2.0, "max_val": 3.0}, lambda t: F.hardtanh(t, -2.0, 3.0), "exact"),
    ("leaky_relu", {}, F.leaky_relu, "exact"),
    ("leaky_relu", {"negative_slope": 0.2}, lambda t: F.leaky_relu(t, 0.2), "exact"),
    ("hardsigmoid", {}, F.hardsigmoid, "exact"),
    ("hardswish", {}, F.hardswish, "exact"),
    ("pow", {"exponent": 2.0}, lambda t: torch.pow(t, 2.0), "exact"),
    ("pow", {"exponent": 3.0}, lambda t: torch.pow(t, 3.0), "exact"),
    ("pow", {"exponent": 0.5}, lambda t: torch.pow(t, 0.5), (EPS, 0)),   # torch: its sqrt
    ("pow", {"exponent": -0.5}, lambda t: torch.pow(t, -0.5), "exact"),
    ("pow", {"exponent": -1.0}, lambda t: torch.pow(t, -1.0), "exact"),
    ("pow", {"exponent": -2.0}, lambda t: torch.pow(t, -2.0), "exact"),
    ("pow", {"exponent": 0.0}, lambda t: torch.pow(t, 0.0), "exact"),
    ("pow", {"exponent": 1.0}, lambda t: torch.pow(t, 1.0), "exact"),
    ("pow", {"exponent": 2.5}, lambda t: torch.pow(t, 2.5), (3 * EPS, 0)),
    ("pow", {"exponent": -1.5}, lambda t: torch.pow(t, -1.5), (3 * EPS, 0)),
    ("exp", {}, torch.exp, (3 * EPS, 1e-38)),
    ("expm1", {}, torch.expm1, (3 * EPS, 1e-38)),
    ("log", {}, torch.log, (3 * EPS, 0)),
    ("log1p", {}, torch.log1p, (3 * EPS, 0)),
    ("erf", {}, torch.erf, (3 * EPS, 0)),
    ("tanh", {}, torch.tanh, (3 * EPS, 0)),
    ("sigmoid", {}, torch.sigmoid, (4 * EPS, 1e-38)),
    ("silu", {}, F.silu, (4 * EPS, 1e-38)),
    ("elu", {}, F.elu, (3 * EPS, 0)),
    ("elu", {"alpha": 0.5, "scale": 1.5, "input_scale": 2.0},
     lambda t: torch.ops.aten.elu(t, 0.5, 1.5, 2.0), (3 * EPS, 0)),
    ("softplus", {}, F.softplus, (4 * EPS, 1e-38)),
    ("softplus", {"beta": 2.0, "threshold": 10.0}, lambda t: F.softplus(t, 2.0, 10.0), (4 * EPS, 1e-38)),
    ("mish", {}, F.mish, (6 * EPS, 1e-38)),
    ("gelu", {}, F.gelu, (2e-6, 2e-6)),
    ("gelu_tanh", {}, lambda t: F.gelu(t, approximate="tanh"), (4 * EPS, 4e-7)),
]


def _case_id(case) -> str:
    name, params = case[0], case[1]
    return name + "".join(f"-{k}={v}" for k, v in params.items())


@pytest.fixture(scope="module")
def unary_run(kernel_cache):
    """ONE kernel computing every case of UNARY from one input (one output per case)."""
    x = Input("x", _values().shape)
    kernel = compile_program(Program((x,), [op(name, x, **params) for name, params, _, _ in UNARY]))
    values = _values()
    return values, dict(zip(map(_case_id, UNARY), kernel(values)))


def _torch(fn, *arrays) -> np.ndarray:
    # tiled so that torch takes its vectorized path, the one real tensors take
    tiled = [torch.from_numpy(np.tile(a, (1, 4))) for a in arrays]
    return fn(*tiled).numpy()[:, :arrays[0].shape[1]]


@pytest.mark.parametrize("case", UNARY, ids=_case_id)
def test_unary_op_matches_torch(unary_run, case):
    name, params, torch_fn, tol = case
    x, outs = unary_run
    got, want = outs[_case_id(case)], _torch(torch_fn, x)
    if name == "gelu":
        # torch's gelu (oneDNN) gives NaN at +inf; the formula x/2 * (1 + erf(x/sqrt 2)), which
        # srcore's cpu kernel and torch's own ATen code compute, gives +inf (docs/trt-like.md)
        want = np.where(x == np.inf, np.inf, want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    if tol == "exact":
        np.testing.assert_array_equal(got[finite], want[finite])
    else:
        np.testing.assert_allclose(got[finite], want[finite], rtol=tol[0], atol=tol[1])


def test_gelu_is_accurate_against_float64(unary_run):
    """torch's gelu has ~1e-6 absolute error; ours is within 2 float32 ulps of 1 times |x|/2."""
    x, outs = unary_run
    finite = np.isfinite(x)
    x64 = x[finite].astype(np.float64)
    exact = 0.5 * x64 * (1 + special.erf(x64 / math.sqrt(2)))
    err = np.abs(outs["gelu"][finite].astype(np.float64) - exact)
    assert np.all(err <= 2 * EPS * (np.abs(x64) * 0.5 + np.abs(exact)) + 1e-38)


# -- binary ops, tensor-tensor and tensor-scalar in both orders ------------------------------------
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
TORCH_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
                "maximum": torch.maximum, "minimum": torch.minimum}
SCALAR = 0.1   # not a float32: rounded once, as torch does for a float32 tensor op a Python scalar


@pytest.fixture(scope="module")
def binary_run(kernel_cache):
    rng = np.random.default_rng(3)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -3.0, 1e-40], F32)
    a = np.concatenate([rng.standard_normal(500), np.repeat(specials, specials.size)]).astype(F32)[None]
    b = np.concatenate([rng.standard_normal(500), np.tile(specials, specials.size)]).astype(F32)[None]
    ia, ib = Input("a", a.shape), Input("b", b.shape)
    outputs = [op(name, ia, ib) for name in BINARY] + [op(name, ia, SCALAR) for name in BINARY] \
        + [op(name, SCALAR, ia) for name in BINARY]
    kernel = compile_program(Program((ia, ib), outputs))
    outs = kernel(a, b)
    n = len(BINARY)
    return a, b, {name: (outs[k], outs[n + k], outs[2 * n + k]) for k, name in enumerate(BINARY)}


@pytest.mark.parametrize("name", BINARY)
def test_binary_op_matches_torch_bitwise(binary_run, name):
    a, b, outs = binary_run
    tensor_tensor, tensor_scalar, scalar_tensor = outs[name]
    fn = TORCH_BINARY[name]
    np.testing.assert_array_equal(tensor_tensor, _torch(fn, a, b))
    s = np.full_like(a, F32(SCALAR))
    if name in ("maximum", "minimum"):  # torch.maximum takes tensors only
        np.testing.assert_array_equal(tensor_scalar, _torch(fn, a, s))
        np.testing.assert_array_equal(scalar_tensor, _torch(fn, s, a))
    else:
        np.testing.assert_array_equal(tensor_scalar, _torch(lambda t: fn(t, SCALAR), a))
        np.testing.assert_array_equal(scalar_tensor, _torch(fn, s, a))


# -- broadcasting --------------------------------------------------------------------------------------
RANK_CASES = [  # output shape, input shapes
    ((), [(), ()]),
    ((7,), [(7,), (1,)]),
    ((3, 67), [(3, 67), (67,), (3, 1)]),
    ((2, 3, 4), [(3, 1), (2, 1, 4), ()]),
    ((2, 3, 2, 5), [(2, 3, 2, 5), (3, 1, 1), (2, 1, 2, 1), (5,)]),
    ((2, 1, 3, 1, 4), [(1, 3, 1, 4), (2, 1, 1, 1, 1), (4,)]),
    ((2, 0, 3), [(2, 0, 3), (3,)]),
]


def _rank_program(shape, in_shapes):
    ins = [Input(f"in{k}", s) for k, s in enumerate(in_shapes)]
    y = ins[0]
    for k, i in enumerate(ins[1:]):
        y = op("add", op("mul", y, 1.5 + k), i)   # y * c + i, mixing every operand in
    return ins, Program(ins, (op("tanh", y), op("sub", ins[-1], y)), shape)


@pytest.mark.parametrize("shape,in_shapes", RANK_CASES, ids=lambda v: str(v))
def test_broadcasting_ranks_0_to_5(shape, in_shapes):
    ins, program = _rank_program(shape, in_shapes)
    rng = np.random.default_rng(len(shape))
    arrays = [np.asarray(rng.standard_normal(s), F32) for s in in_shapes]
    t, d = compile_program(program)(*arrays)
    y = arrays[0]
    for k, a in enumerate(arrays[1:]):
        y = y * F32(1.5 + k) + a   # numpy float32, same order: bit-identical
    y = np.broadcast_to(y, shape)
    assert t.shape == d.shape == shape
    np.testing.assert_array_equal(d, arrays[-1] - y)
    np.testing.assert_allclose(t, np.tanh(y.astype(np.float64)), rtol=3 * EPS, atol=1e-38)


def test_mixed_broadcasts_in_one_kernel():
    """Full, row, column, per-channel, scalar-shaped and rank-0 operands together."""
    shape = (2, 3, 4, 5)
    shapes = {"full": shape, "row": (5,), "col": (4, 1), "chan": (3, 1, 1), "one": (1,), "rank0": (),
              "mixed": (2, 1, 4, 1)}
    ins = {n: Input(n, s) for n, s in shapes.items()}
    chan2 = op("mul", ins["chan"], 2.0)   # per-channel only: computed once per channel
    y = op("div", op("sub", op("mul", op("add", ins["full"], ins["row"]), ins["col"]), chan2),
           op("add", ins["one"], 2.0))
    y = op("maximum", op("add", y, ins["rank0"]), ins["mixed"])
    kernel = compile_program(Program(list(ins.values()), (y,), shape))
    rng = np.random.default_rng(0)
    arrays = {n: np.asarray(rng.standard_normal(s), F32) for n, s in shapes.items()}
    (got,) = kernel(*arrays.values())
    a = arrays
    want = np.maximum((((a["full"] + a["row"]) * a["col"] - a["chan"] * F32(2)) / (a["one"] + F32(2)))
                      + a["rank0"], a["mixed"])
    np.testing.assert_array_equal(got, want)


def test_the_common_case_is_one_flat_loop_and_per_channel_terms_are_hoisted():
    x, b, c = Input("x", (1, 8, 6, 6)), Input("b", (8, 1, 1)), Input("c", (1, 8, 6, 6))
    flat = pw.generate_source(Program((x, c), (op("sigmoid", op("add", x, c)),)))
    assert flat.count("for i") == 1 and "in0.reshape((288,))" in flat
    nest = pw.generate_source(Program((x, b), (op("add", x, op("exp", b)),)))
    assert "in1.reshape((8, 1))" in nest and nest.count("for i") == 2
    outer, inner = nest.split("for i1 in")
    assert "fm.exp(x1)" in outer and "fm.exp" not in inner   # once per channel


# -- several outputs -----------------------------------------------------------------------------------
def test_several_outputs_share_subexpressions():
    x, y = Input("x", (4, 9)), Input("y", (9,))
    s = op("mul", x, y)
    outputs = (op("relu", s), op("add", s, 1.0), x, Const(2.5), s, op("relu", s))
    kernel = compile_program(Program((x, y), outputs))
    assert kernel.source.count("(x0 * x1)") == 1 and kernel.source.count("ops.relu") == 1
    rng = np.random.default_rng(1)
    xa, ya = rng.standard_normal((4, 9)).astype(F32), rng.standard_normal(9).astype(F32)
    outs = [np.full((4, 9), np.nan, F32) for _ in outputs]
    kernel.fn(xa, ya, *outs)
    sa = xa * ya
    for got, want in zip(outs, (np.maximum(sa, 0), sa + F32(1), xa, np.full((4, 9), 2.5), sa,
                                np.maximum(sa, 0))):
        np.testing.assert_array_equal(got, want)


def test_in_place_on_the_input():
    x = Input("x", (3, 50))
    kernel = compile_program(Program((x,), (op("mul", op("add", x, 1.0), x),)))
    a = np.random.default_rng(2).standard_normal((3, 50)).astype(F32)
    want = (a + F32(1)) * a
    kernel.fn(a, a)
    np.testing.assert_array_equal(a, want)


@pytest.mark.parametrize("streams", [1, 3])
def test_any_number_of_streams_computes_the_same(streams):
    x = Input("x", (2, 50))
    program = Program((x,), (op("tanh", op("mul", x, 0.75)),))
    kernel = compile_program(program, streams=streams)
    assert kernel.source.count("j2 = ") == (streams == 3)
    a = np.random.default_rng(4).standard_normal((2, 50)).astype(F32)
    np.testing.assert_array_equal(kernel(a)[0], compile_program(program)(a)[0])


def test_elementwise_chain_matches_torch():
    """benchmarks/models.py ElementwiseChain: 40 ops (add/mul/sigmoid/tanh/relu) on 1x128."""
    def block(y, x, ops):
        y = ops.add(y, x); y = ops.mul(y, 0.5); y = ops.sigmoid(y); y = ops.mul(y, x)
        y = ops.tanh(y); y = ops.add(y, 0.1); y = ops.relu(y); return ops.mul(y, 1.5)

    class Fused:
        def __getattr__(self, name):
            return lambda *args: op(name, *args)

    x = Input("x", (1, 128))
    y = block(x, x, Fused())
    for _ in range(4):
        y = block(y, x, Fused())
    kernel = compile_program(Program((x,), (y,)))
    xa = np.random.default_rng(2).standard_normal((1, 128)).astype(F32)
    xt = torch.from_numpy(xa)
    yt = block(xt, xt, torch)
    for _ in range(4):
        yt = block(yt, xt, torch)
    np.testing.assert_allclose(kernel(xa)[0], yt.numpy(), rtol=8 * EPS, atol=8 * EPS)


# -- random DAGs against a float64 evaluation -------------------------------------------------------
REF64 = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "neg": np.negative, "abs": np.abs,
    "square": np.square, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x,
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "erf": special.erf,
    "tanh": np.tanh, "sigmoid": special.expit, "relu": lambda x: np.maximum(x, 0.0),
    "relu6": lambda x: np.minimum(np.maximum(x, 0.0), 6.0),
    "clamp": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "hardtanh": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "leaky_relu": lambda x, s: np.where(x > 0, x, x * s),
    "elu": lambda x, a, s, i: np.where(x <= 0, np.expm1(x * i) * a * s, x * s),
    "gelu": lambda x: 0.5 * x * (1 + special.erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x * special.expit(x),
    "mish": lambda x: x * np.tanh(np.logaddexp(0.0, x)),
    "hardsigmoid": lambda x: np.clip(x + 3, 0, 6) / 6, "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "softplus": lambda x, b, t: np.where(x * b > t, x, np.logaddexp(0.0, x * b) / b),
    "pow": lambda x, e: np.power(x, e),
}
#: error of one op in float32 ulps of its result; gelu's 1 + erf(..) also loses ~2 ulps of 1
#: times |x|/2 (cancellation at negative x; torch's has the same)
OP_ULPS = {"add": 0.5, "sub": 0.5, "mul": 0.5, "div": 0.5, "sqrt": 0.5, "reciprocal": 0.5, "rsqrt": 1,
           "hardsigmoid": 1.5, "hardswish": 2, "leaky_relu": 0.5, "pow": 1.5, "elu": 2.5, "exp": 1,
           "expm1": 1.5, "log": 1, "log1p": 1.5, "erf": 1, "tanh": 1.5, "sigmoid": 2.5, "silu": 3.5,
           "mish": 6, "softplus": 3, "gelu": 3, "gelu_tanh": 4}
ABS_ERR_PER_X = {"gelu": 2 * EPS, "gelu_tanh": 3 * EPS}
PARAMS = {   # op -> draw -> params
    "clamp": lambda draw: {"min": draw(st.sampled_from([-1.0, 0.0, None])), "max": draw(st.sampled_from([0.5, 3.0]))},
    "hardtanh": lambda draw: {"min_val": -0.5, "max_val": draw(st.sampled_from([0.5, 2.0]))},
    "leaky_relu": lambda draw: {"negative_slope": draw(st.sampled_from([0.01, 0.3]))},
    "elu": lambda draw: {"alpha": draw(st.sampled_from([1.0, 0.7]))},
    "softplus": lambda draw: {"beta": draw(st.sampled_from([1.0, 2.0])), "threshold": 5.0},
    "pow": lambda draw: {"exponent": draw(st.sampled_from([2.0, 3.0, 0.5, -1.0, 2.5]))},
}


def _propagate(name, params, args):
    """(value, bound, stable) of one op on float64 (value, bound, stable) operands: value is the
    float32 rounding of the exact result, bound the largest distance a float32 kernel may be
    from it, stable False where a perturbation within the operands' bounds leaves the finite
    numbers (a pole, overflow): those elements are not compared, nor anything computed from them."""
    fn = REF64[name]
    vals = [a[0] for a in args]
    with np.errstate(all="ignore"):
        center = fn(*vals, *params)
        spread = np.zeros_like(center)
        stable = np.logical_and.reduce([a[2] for a in args])
        for signs in np.ndindex(*([2] * len(args))):
            corner = fn(*[v + (s * 2 - 1) * a[1] for v, s, a in zip(vals, signs, args)], *params)
            same_special = (np.isnan(corner) & np.isnan(center)) | (np.isinf(center) & (corner == center))
            stable &= np.isfinite(corner) & np.isfinite(center) | same_special
            spread = np.maximum(spread, np.where(np.isfinite(corner - center), np.abs(corner - center), 0))
        value = center.astype(F32).astype(np.float64)
        ulp = np.spacing(np.abs(value).astype(F32)).astype(np.float64)
        bound = 2 * spread + (0.5 + OP_ULPS.get(name, 0)) * np.where(np.isfinite(ulp), ulp, 0) \
            + ABS_ERR_PER_X.get(name, 0) * np.abs(vals[0]) + 1e-37
    return value, np.where(np.isfinite(bound), bound, 0), stable


@st.composite
def programs(draw):
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 17, 40]), max_size=4)))
    inputs = []
    for k in range(draw(st.integers(1, 3))):
        keep = draw(st.integers(0, len(shape)))   # trailing dims kept, each maybe broadcast
        dims = tuple(d if draw(st.booleans()) else 1 for d in shape[len(shape) - keep:])
        inputs.append(Input(f"x{k}", dims))
    pool: list = list(inputs)
    for _ in range(draw(st.integers(1, 7))):
        name = draw(st.sampled_from(sorted(REF64)))
        arity = pw.OPS[name].arity
        args = [draw(st.sampled_from(pool)) if draw(st.integers(0, 4)) else
                draw(st.sampled_from([0.5, -1.25, 3.0, 1e-3])) for _ in range(arity)]
        if not any(isinstance(a, (Input, Op)) for a in args):
            args[0] = draw(st.sampled_from(pool))
        pool.append(op(name, *args, **PARAMS.get(name, lambda _: {})(draw)))
    outputs = [pool[-1]] + ([draw(st.sampled_from(pool[len(inputs):]))] if draw(st.booleans()) else [])
    return Program(inputs, outputs, shape), draw(st.integers(0, 2 ** 32 - 1))


def _reference(program, arrays):
    known = {}
    for inp, a in zip(program.inputs, arrays):
        v = np.broadcast_to(a.astype(np.float64), program.shape)
        known[inp] = (v, np.zeros_like(v), np.ones(program.shape, bool))
    for node in program.nodes():
        if isinstance(node, Const):
            v = np.full(program.shape, node.value)
            known[node] = (v, np.zeros_like(v), np.ones(program.shape, bool))
        elif isinstance(node, Op):
            known[node] = _propagate(node.name, node.params, [known[a] for a in node.args])
    return [known[o] for o in program.outputs]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_dags_against_float64(case):
    program, seed = case
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(rng.uniform(-4, 4, inp.shape), F32) for inp in program.inputs]
    outs = compile_program(program)(*arrays)
    for m, (got, (value, bound, stable)) in enumerate(zip(outs, _reference(program, arrays))):
        got = got.astype(np.float64)
        special_ = stable & ~np.isfinite(value)
        assert np.array_equal(np.isnan(got[special_]), np.isnan(value[special_])), f"output {m}"
        inf = special_ & ~np.isnan(value)
        assert np.array_equal(got[inf], value[inf]), f"output {m}"
        ok = stable & np.isfinite(value)
        with np.errstate(invalid="ignore"):
            bad = ok & ~(np.abs(got - value) <= bound)
        assert not bad.any(), (f"output {m}: {int(bad.sum())} element(s) off, e.g. got {got[bad][0]!r} "
                               f"want {value[bad][0]!r} +- {bound[bad][0]!r}\n{program}")


# -- errors ------------------------------------------------------------------------------------------------
X = Input("x", (2, 3))


@pytest.mark.parametrize("make,message", [
    (lambda: op("nope", X), "unknown pointwise op 'nope'"),
    (lambda: op("add", X), "op 'add' takes 2 operand"),
    (lambda: Op("relu", (X, X)), "op 'relu' takes 1 operand"),
    (lambda: op("leaky_relu", X, slope=0.1), "op 'leaky_relu' has no parameter 'slope'"),
    (lambda: op("pow", X), "op 'pow' needs parameter 'exponent'"),
    (lambda: op("clamp", X, min="0"), "parameter 'min' of op 'clamp' must be a real number"),
    (lambda: op("add", X, "two"), "a constant must be a real number, not str"),
    (lambda: Program((Input("h", (2, 3), "float16"),), (Input("h", (2, 3), "float16"),)),
     "input 'h' is float16: pointwise kernels compute float32 only"),
    (lambda: Program((Input("b", (4,)),), (Input("b", (4,)),), (2, 3)),
     r"input 'b' of shape \(4,\) does not broadcast to the output shape \(2, 3\)"),
    (lambda: Program((X, Input("y", (4,))), (X,)), r"input shapes .* do not broadcast together"),
    (lambda: Program((X,), (op("add", X, Input("y", (3,))),)), "uses input 'y', which is not among"),
    (lambda: Program((X,), (op("add", X, Input("x", (3,))),)),
     r"uses input 'x' of shape \(3,\) float32, but the program's input 'x' has shape \(2, 3\)"),
    (lambda: Program((X, Input("x", (3,))), (X,)), r"input name\(s\) \['x'\] given more than once"),
    (lambda: Program((X,), ()), "at least one output"),
    (lambda: Input("x", (2, -1)), "negative dimension"),
])
def test_bad_programs_raise_a_clear_error(make, message):
    with pytest.raises(PointwiseError, match=message) as info:
        make()
    assert isinstance(info.value, EngineBuildError) and isinstance(info.value, SrcoreError)


@pytest.fixture(scope="module")
def small_kernel(kernel_cache):
    return compile_program(Program((X, Input("b", (3,))), (op("add", X, Input("b", (3,))),)))


@pytest.mark.parametrize("args,kwargs,message", [
    ((np.zeros((2, 3), F32),), {}, r"takes 2 input\(s\) \['x', 'b'\], got 1"),
    ((np.zeros((2, 3)), np.zeros(3, F32)), {}, r"input 'x': expected float32 \(2, 3\), got float64 \(2, 3\)"),
    ((np.zeros((2, 3), F32), np.zeros(4, F32)), {}, r"input 'b': expected float32 \(3,\), got float32 \(4,\)"),
    ((np.zeros((2, 3), F32), [0.0, 1.0, 2.0]), {}, "input 'b': expected float32 \\(3,\\), got list"),
    ((np.zeros((2, 3), F32), np.zeros(3, F32)), {"out": ()}, r"1 output\(s\), got 0 out= arrays"),
    ((np.zeros((2, 3), F32), np.zeros(3, F32)), {"out": (np.zeros((3, 2), F32),)}, "output 0: expected"),
    ((np.zeros((2, 3), F32), np.zeros(3, F32)), {"out": (np.zeros((3, 2), F32).T,)}, "C-contiguous"),
])
def test_bad_calls_name_the_culprit(small_kernel, args, kwargs, message):
    with pytest.raises(SrcoreInputError, match=message):
        small_kernel(*args, **kwargs)


def test_checked_call_accepts_non_contiguous_inputs(small_kernel):
    x = np.arange(6, dtype=F32).reshape(3, 2).T
    (got,) = small_kernel(x, np.ones(3, F32))
    np.testing.assert_array_equal(got, x + 1)


# -- the kernel cache ------------------------------------------------------------------------------------
def test_kernels_are_files_named_by_the_hash_of_their_source(kernel_cache, small_kernel):
    assert small_kernel.path.parent == kernel_cache / "trt_like" / "kernels" == pw.kernel_dir()
    assert small_kernel.path.read_text() == small_kernel.source
    again = compile_program(small_kernel.program)
    assert again.path == small_kernel.path and again.fn is small_kernel.fn   # loaded once per process


_CACHE_SCRIPT = textwrap.dedent("""
    import json
    from srcore_trt_like.pointwise import Input, Program, compile_program, op
    x = Input("x", (1, 128))
    kernel = compile_program(Program((x,), (op("gelu", op("mul", x, 0.5)),)))
    stats = kernel.fn.stats
    print(json.dumps({"hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
                      "path": str(kernel.path)}))
""")


def test_a_second_process_loads_the_kernel_without_compiling(tmp_path):
    env = {**os.environ, "SRCORE_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("NUMBA_DISABLE_JIT", None)

    def run():
        proc = subprocess.run([sys.executable, "-c", _CACHE_SCRIPT], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert (first["hits"], first["misses"]) == (0, 1)
    assert (second["hits"], second["misses"]) == (1, 0)
    assert first["path"] == second["path"]


# -- 512-bit twins ----------------------------------------------------------------------------------
def _assert_same_bits(program, arrays):
    wide = compile_program(program, wide=True)
    assert "prefer_512()" in wide.source
    for got, want in zip(wide(*arrays), compile_program(program)(*arrays)):
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


def test_the_512_bit_kernel_gives_the_default_widths_bits():
    """``wide=True`` (the ``numba_512`` tactic) computes bit for bit like the default-width kernel
    (whose ops are compared with torch above): GELU, SiLU and the binary ops on a per-channel loop
    nest with interleaved streams, special values included."""
    a, b, s = Input("a", (3, 7, 67)), Input("b", (7, 1)), Input("s", (3, 7, 67))
    outs = [op(name, a, b) for name in BINARY] + [op("gelu", a), op("silu", op("mul", s, b))]
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(i.shape).astype(F32) * 4 for i in (a, b, s)]
    arrays[0][0, 0, :6] = arrays[2][0, 0, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40]
    _assert_same_bits(Program((a, b, s), outs), arrays)


@pytest.mark.full
def test_the_512_bit_kernel_gives_the_default_widths_bits_for_every_unary_op():
    x = Input("x", _values().shape)
    _assert_same_bits(Program((x,), [op(name, x, **params) for name, params, _, _ in UNARY]), [_values()])

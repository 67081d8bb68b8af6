"""The narrow dtypes the cpu kernels take (int16, int8, uint8; float16 where a float kernel takes it)
against torch: every kernel that claims one of them is run here on samples of that dtype, with
``out=None`` and into a preallocated buffer, and compared with ``torch.ops.aten`` exactly (float16
computes in float32 and rounds once, as torch's CPU kernels do). A kernel that claims a narrow dtype
and has no case here fails ``test_every_narrow_claim_is_covered``."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore_cpu import declared_kernels  # noqa: E402

pytestmark = [pytest.mark.one_pass, pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # log(-1) etc.

NARROW = ("int16", "int8", "uint8", "float16")
RNG = np.random.default_rng(7)


def _x(dt, shape=(3, 4), nonzero=False):
    if np.dtype(dt).kind == "f":
        a = (RNG.standard_normal(shape) * 4).astype(dt)
    else:
        info = np.iinfo(dt)
        a = RNG.integers(max(info.min, -100), min(info.max, 100) + 1, size=shape).astype(dt)
    if nonzero:
        a[a == 0] = 3
    return a


def _cases(op: str, dt: str):
    """[(positional args, keyword args)] of ``op`` for dtype ``dt``."""
    base, _, ov = op.split("::")[1].partition(".")
    small = np.dtype(dt).kind != "f"
    div = base in ("div", "remainder", "fmod", "floor_divide")
    x, y = _x(dt), _x(dt, (4,), nonzero=div)
    s = 3 if small else 2.5
    mask = RNG.random((3, 4)) < 0.5
    if base == "where":
        args = {"self": (mask, x, _x(dt)), "ScalarOther": (mask, x, s), "ScalarSelf": (mask, s, x),
                "Scalar": (mask, s, 1)}[ov]
        return [(args, {})]
    if base == "pow":
        x = np.abs(x) if not small else x % 4
        return [({"Tensor_Tensor": (x, _x(dt, (4,)) % 3), "Tensor_Scalar": (x, 2), "Scalar": (2, x % 3)}[ov], {})]
    if base in ("clamp", "clamp_min", "clamp_max"):
        lo, hi = (_x(dt, (4,)), _x(dt, (4,))) if ov == "Tensor" else (-2 if not dt.startswith("u") else 2, 5)
        args = {"clamp": (x, lo, hi), "clamp_min": (x, lo), "clamp_max": (x, hi)}[base]
        return [(args, {})]
    if base == "masked_fill":
        return [((x, mask, np.array(s, dt) if ov == "Tensor" else s), {})]
    if base in ("sum", "prod", "amax", "amin", "argmax", "argmin", "cumsum"):
        x = _x(dt, (3, 4)) % 5 if small and base == "prod" else x
        if base in ("sum", "prod") and not ov:
            return [((x,), {})]
        if base == "cumsum":
            return [((x, 1), {})]
        if base in ("argmax", "argmin"):
            return [((x, 1, False), {}), ((x, None, False), {})]
        return [((x, 1, True), {})] if base == "prod" else [((x, [1], True), {}), ((x, [0, 1], False), {})]
    if base in ("max", "min") and ov == "dim":
        return [((x, 1, False), {})]
    if base == "constant_pad_nd":
        return [((x, [1, 2, 0, 1], 7), {})]
    if base == "max_pool2d":
        return [((_x(dt, (1, 2, 5, 6)), [2, 2], [2, 2], [1, 0], [1, 1], False), {}),
                ((_x(dt, (2, 3, 7, 7)), [3, 3], [2, 2], [1, 1], [1, 1], True), {})]
    if base in ("celu", "elu"):
        return [((x,), {})]
    if ov in ("Tensor", "") and base in _BINARY:
        args = [((x, y), {})]
    elif ov == "Scalar" and base in _BINARY:
        args = [((x, s), {})]
    elif ov == "Tensor_Scalar":
        args = [((x, s), {}), ((x, -1), {}), ((x, 70), {})]
    elif ov == "Scalar_Tensor":
        args = [((s, y), {})]
    elif ov in ("Tensor_mode", "Scalar_mode"):
        other = y if ov == "Tensor_mode" else s
        return [((x, other), {"rounding_mode": m}) for m in ("trunc", "floor")]
    elif ov == "other":
        args = [((x, y), {})]
    else:  # unary
        return [((x,), {})]
    return args


_BINARY = {"add", "sub", "rsub", "mul", "div", "remainder", "fmod", "floor_divide", "minimum", "maximum", "eq",
           "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
           "bitwise_xor", "pow", "max", "min", "bitwise_left_shift", "bitwise_right_shift"}

#: narrow claims covered elsewhere (the float16 unary math of the elementwise family: test_elementwise)
ELSEWHERE = {"aten::IntImplicit"}


def _claims():
    out = []
    for k in declared_kernels():
        if k.backend != "cpu" or k.op in ELSEWHERE or k.kind != "out":
            continue
        for dt in NARROW:
            if dt in k.dtypes:
                out.append((k, dt))
    return out


def _impl(k):
    mod, _, attr = k.impl.partition(":")
    return getattr(importlib.import_module(mod), attr)


def _torch(v):
    if isinstance(v, np.ndarray):
        return torch.from_numpy(v.copy())
    return v


def _overload(op):
    base, _, ov = op.split("::")[1].partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


CLAIMS = _claims()


@pytest.mark.parametrize("kernel,dtype", CLAIMS, ids=[f"{k.op}-{dt}" for k, dt in CLAIMS])
def test_narrow_dtype_matches_torch(kernel, dtype):
    fn = _impl(kernel)
    for args, kw in _cases(kernel.op, dtype):
        ref = _overload(kernel.op)(*map(_torch, args), **kw)
        refs = list(ref) if isinstance(ref, tuple) else [ref]
        got = fn(*args, **kw, out=None)
        gots = list(got) if isinstance(got, tuple) else [got]
        bufs = [np.empty(tuple(r.shape), r.numpy().dtype) for r in refs]
        fn(*args, **kw, out=tuple(bufs) if isinstance(ref, tuple) else bufs[0])
        for g, b, r in zip(gots, bufs, refs):
            r = r.numpy()
            for a in (np.asarray(g), b):
                assert a.dtype == r.dtype and a.shape == r.shape, (kernel.op, dtype, a.dtype, r.dtype)
                np.testing.assert_array_equal(a, r, err_msg=f"{kernel.op} {dtype}")


@pytest.mark.parametrize("dt", ["int64", "int32", "int16", "int8", "uint8"])
def test_shifts_by_any_amount_match_torch(dt):
    """Amounts below 0 and at or above the width are where numpy and torch part ways."""
    from srcore_cpu.kernels.elementwise import bitwise_left_shift, bitwise_right_shift

    info = np.iinfo(dt)
    x = np.array([info.min, -5 if info.min else 5, -1 if info.min else 1, 0, 1, 77, info.max], dt)
    bits = np.dtype(dt).itemsize * 8
    for amount in [np.full(x.shape, a, dt) for a in (0, 1, 3, bits - 1, bits, min(bits + 5, info.max))] \
            + ([np.full(x.shape, -1, dt), np.full(x.shape, -70, dt)] if info.min else []):
        for ours, name in ((bitwise_left_shift, "bitwise_left_shift"), (bitwise_right_shift, "bitwise_right_shift")):
            want = getattr(torch.ops.aten, name).Tensor(torch.from_numpy(x), torch.from_numpy(amount)).numpy()
            np.testing.assert_array_equal(ours(x, amount), want, err_msg=f"{name} {dt} by {amount[0]}")


def test_every_narrow_claim_is_covered():
    """The float16 unary math (exp, sin, ...) of the elementwise family is not here: it is the only
    kind of narrow claim a case list above does not build, and test_elementwise covers it."""
    float_math = {"exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "ceil", "trunc", "round", "square",
                  "reciprocal", "erf", "log1p", "expm1", "log2", "log10", "pow"}
    for k, dt in CLAIMS:
        base = k.op.split("::")[1].split(".")[0]
        if base in float_math:
            continue
        assert _cases(k.op, dt), k.op


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_tensor_with_python_scalar_rounds_as_torch(dt):
    """A float16/bfloat16 tensor with a Python scalar not exact in its dtype: torch computes mul,
    div and floor_divide in float32 with the scalar unrounded, add, sub, remainder, fmod and pow
    with the scalar rounded first (bfloat16 pow by 3 and -2 from the rounded square). numpy rounded the scalar to float16 always, and ml_dtypes'
    bfloat16 refused a Python float (a Cast-free ONNX ``Mul`` by 0.5 of a bfloat16 model failed)."""
    import ml_dtypes

    from srcore_cpu.kernels import elementwise as E

    tdt = getattr(torch, dt)
    x = torch.from_numpy((RNG.standard_normal(64) * 3).astype(np.float32)).to(tdt)
    xn = x.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if dt == "bfloat16" else x.numpy()
    for s in (0.1, 1.7, 3, -2):
        for name in ("add", "sub", "rsub", "mul", "div", "floor_divide", "remainder", "fmod", "pow"):
            a = x.abs() + 0.125 if name == "pow" else x
            an = (np.abs(xn) + np.asarray(0.125, xn.dtype)).astype(xn.dtype) if name == "pow" else xn
            want = getattr(torch, name)(a, s).float().numpy()
            got = getattr(E, name)(an, s)
            assert got.dtype == xn.dtype, (name, s)
            np.testing.assert_array_equal(got.astype(np.float32), want, err_msg=f"{name} {dt} {s}")
            buf = np.empty_like(xn)
            getattr(E, name)(an, s, out=buf)
            np.testing.assert_array_equal(buf.astype(np.float32), want, err_msg=f"{name} {dt} {s} out=")

"""srcore_trt_like.kernels.fastmath: accuracy in ulps against float64 references, torch's special values,
and that a loop calling the functions vectorizes (no libm call left)."""
from __future__ import annotations

import re

import numba
import numpy as np
import pytest
from scipy import special

from srcore_trt_like.kernels import fastmath as fm

#: kernels and compiled programs are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

F32 = np.float32
NAMES = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "sin", "cos")

#: float64 reference, and the max error asserted in ulps (measured on these sweeps: exp 0.99,
#: expm1 1.39, log 0.76, log1p 1.44, tanh 1.26, sigmoid 2.40, erf 0.98, sin 0.50, cos 0.52; docs/trt-like.md)
REFERENCE = {
    "exp": (np.exp, 1.0),
    "expm1": (np.expm1, 1.5),
    "log": (np.log, 1.0),
    "log1p": (np.log1p, 1.5),
    "tanh": (np.tanh, 1.5),
    "sigmoid": (special.expit, 2.5),
    "erf": (special.erf, 1.0),
    "sin": (np.sin, 0.6),
    "cos": (np.cos, 0.6),
}


@pytest.fixture(scope="module")
def apply_all():
    """One compiled loop computing all the functions of a float32 vector (one compile)."""
    sig = numba.void(numba.float32[::1], *[numba.float32[::1]] * len(NAMES))

    @numba.njit(sig, **fm.jit_options())
    def kernel(x, o0, o1, o2, o3, o4, o5, o6, o7, o8):
        for i in range(x.shape[0]):
            v = x[i]
            o0[i] = fm.exp(v)
            o1[i] = fm.expm1(v)
            o2[i] = fm.log(v)
            o3[i] = fm.log1p(v)
            o4[i] = fm.tanh(v)
            o5[i] = fm.sigmoid(v)
            o6[i] = fm.erf(v)
            o7[i] = fm.sin(v)
            o8[i] = fm.cos(v)

    def apply(x):
        x = np.ascontiguousarray(x, F32)
        outs = [np.empty_like(x) for _ in NAMES]
        kernel(x, *outs)
        return dict(zip(NAMES, outs))

    apply.kernel = kernel
    return apply


def ulp_errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in units of the float32 spacing at ref (denormal spacing below; a result that
    rounds to the same inf or is NaN where ref is NaN has error 0)."""
    with np.errstate(all="ignore"):
        ref32 = ref.astype(F32)
        spacing = np.maximum(np.spacing(np.abs(ref32)).astype(np.float64), 2.0 ** -149)
        err = np.abs(got.astype(np.float64) - ref) / spacing
    err[(np.isnan(got) & np.isnan(ref)) | (np.isinf(ref32) & (got == ref32))] = 0.0
    return err


def _sweep(name: str) -> np.ndarray:
    """A dense sweep of the interesting domain plus random values and tiny magnitudes."""
    rng = np.random.default_rng(7)
    tiny = np.geomspace(1e-30, 1.0, 50_000)
    if name == "log":
        parts = [np.geomspace(1e-45, 3e38, 1_000_000), rng.uniform(0, 10, 200_000)]
    elif name == "log1p":
        parts = [np.linspace(-0.9999, 2, 500_000), np.geomspace(1e-30, 3e38, 300_000), -tiny * 0.999,
                 rng.uniform(-1, 100, 200_000)]
    elif name in ("sin", "cos"):   # a dense sweep, then the reduction's range (quadrants far from 0)
        parts = [np.linspace(-10, 10, 500_000), tiny, -tiny, rng.uniform(-1e5, 1e5, 200_000),
                 rng.uniform(-2.0 ** 49, 2.0 ** 49, 100_000), np.arange(-200, 200) * (np.pi / 4),
                 # every exponent of the table reduction (|x| >= 2**50)
                 rng.uniform(-1, 1, 100_000) * 2.0 ** rng.integers(49, 128, 100_000)]
    else:
        lo, hi = {"exp": (-104, 89), "expm1": (-30, 89), "sigmoid": (-87, 30)}.get(name, (-10, 10))
        parts = [np.linspace(lo, hi, 1_000_000), tiny, -tiny, rng.uniform(lo, hi, 200_000)]
    return np.concatenate(parts).astype(F32)


@pytest.mark.parametrize("name", NAMES)
def test_accuracy_in_ulps(apply_all, name):
    x = _sweep(name)
    ref_fn, bound = REFERENCE[name]
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    err = ulp_errors(apply_all(x)[name], ref)
    worst = int(np.argmax(err))
    assert err[worst] <= bound, f"{name}({x[worst]!r}): {err[worst]:.2f} ulp (bound {bound})"


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e-45, -1e-45, 3.0, -3.0,
                    88.72, 88.73, -87.5, -103.5, -104.5, 1e30, -1e30, 3.4e38, -3.4e38, -1.0, 4.0,
                    -3.95, 0.625, -0.625, 1.0, -1.0, 20.0, -20.0], F32)


@pytest.mark.parametrize("name", NAMES)
def test_special_values_like_torch(apply_all, name):
    torch = pytest.importorskip("torch")
    got = apply_all(SPECIAL)[name]
    # torch's vectorized path (a tensor of several vectors) is the one big tensors take
    expect = getattr(torch, name)(torch.from_numpy(np.tile(SPECIAL, 8))).numpy()[:SPECIAL.size]
    if name == "log1p":  # torch's log1p flushes -1e-45 to 0; log1p(x) is x there
        expect = np.where(np.abs(SPECIAL) == F32(1e-45), SPECIAL, expect)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expect), err_msg=name)
    np.testing.assert_allclose(got, expect, rtol=3e-7, atol=0, err_msg=name)


def test_a_loop_of_them_vectorizes(apply_all):
    """No libm call is left and the loop body is in vector types (the reason this module exists)."""
    kernel = apply_all.kernel
    llvm = kernel.inspect_llvm(kernel.signatures[0])
    body = llvm.split("define", 2)[1]   # the kernel itself, not the CPython wrapper
    calls = set(re.findall(r"call [^@]*@\"?([\w.]+)", body))
    assert not {c for c in calls if not c.startswith(("llvm.", "NRT_"))}, calls
    assert re.search(r"<\d+ x float>", body), "the loop was not vectorized"


def test_intrinsics_take_float32_only():
    @numba.njit(**fm.jit_options())
    def f64(x):
        return fm.exp(x)

    with pytest.raises(numba.core.errors.TypingError):
        f64(1.0)
    assert f64(F32(1.0)) == pytest.approx(np.e, rel=1e-7)


def test_gelu_relative_error_against_float64():
    """The exact GELU (x * Phi(x), Phi through phi_ir) within 1e-6 of float64 relative to itself
    wherever that is a normal float, the far negative tail included (computed as
    x * (1 + erf(x / sqrt 2)) / 2, 1 + erf cancels there: every digit lost by x = -6), and the
    special values torch gives (NaN at -inf and NaN; +inf at +inf, the limit)."""
    @numba.njit(**fm.jit_options())
    def run(x, o):
        for i in range(x.size):
            o[i] = fm.gelu(x[i])
    x = np.concatenate([np.linspace(-13.5, 13.5, 400_001), np.geomspace(1e-30, 1.0, 1000)]).astype(F32)
    x = np.concatenate([x, -x[-1000:]])
    got = np.empty_like(x)
    run(x, got)
    x64 = x.astype(np.float64)
    want = x64 * special.ndtr(x64)
    normal = np.abs(want) >= np.finfo(F32).tiny
    assert (np.abs(got[normal] - want[normal]) <= 1e-6 * np.abs(want[normal])).all()
    assert (np.abs(got[~normal]) <= np.finfo(F32).tiny).all()
    s = np.array([np.nan, -np.inf, np.inf, 0.0, 3.4e38], F32)
    out = np.empty_like(s)
    run(s, out)
    np.testing.assert_array_equal(out, np.array([np.nan, np.nan, np.inf, 0.0, 3.4e38], F32))


def test_silu_against_torch_and_float64():
    """SiLU (its exp and ``1 + exp(-x)`` folded together, kernels/fastmath.py) within 3 ulp of torch's
    float32 CPU result and 2.5 ulp of float64 over -87..100, both vector widths and the scalar
    remainder (odd length); torch's specials: -0.0 where exp(-x) overflows (both sides of the last
    finite exp), NaN at -inf and NaN, inf at inf."""
    torch = pytest.importorskip("torch")
    from srcore_trt_like.kernels import activation
    over = F32(88.72283172607421875)          # the largest float32 whose exp is finite
    edge = np.array([-over, -np.nextafter(over, F32(100)), -np.nextafter(over, F32(0)), -87.33, -87.34],
                    F32)
    x = np.concatenate([np.linspace(-100, 100, 200_001, dtype=F32), SPECIAL, -SPECIAL, edge,
                        np.geomspace(1e-38, 1e-30, 101, dtype=F32) * -1, F32([3.0])])
    want = torch.nn.functional.silu(torch.from_numpy(np.tile(x, 2))).numpy()[:x.size]
    for kernel in (activation._silu, activation._silu_512):
        got = x.copy()
        kernel(got)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
        assert ulp_errors(got[ok], want[ok].astype(np.float64)).max() <= 3.0
        x64 = x.astype(np.float64)
        zone = (x64 > -87) & np.isfinite(x64)
        with np.errstate(all="ignore"):
            err = ulp_errors(got[zone], x64[zone] / (1 + np.exp(-x64[zone])))
        assert err.max() <= 2.5, x[zone][np.argmax(err)]
        assert (got[(x < -over) & np.isfinite(x)] == 0).all() and np.isnan(got[x == -np.inf]).all() and got[x == np.inf][0] == np.inf

"""Helpers the cpu plugin's kernel tests share."""
from __future__ import annotations

import numpy as np

from srcore.ir.types import TensorType
from srcore.plugin import ArgInfo, NodeInfo


def node(op: str, **args) -> NodeInfo:
    """A ``NodeInfo`` for a matcher: every argument is a constant, except those given as ``"<var>"``."""
    return NodeInfo(op, None, tuple(ArgInfo(n, TensorType(), not (isinstance(v, str) and v == "<var>"), v)
                                    for n, v in args.items()), ())


def make_rand(rng: np.random.Generator, low: int = -6, high: int = 7):
    """``rand(*shape, dtype=...)`` drawing from ``rng``: normal floats, fair bools, ints in [low, high)."""
    def rand(*shape, dtype=np.float32):
        dt = np.dtype(dtype)
        if dt.kind == "f":
            return rng.standard_normal(shape).astype(dt)
        if dt.kind == "b":
            return rng.random(shape) < 0.5
        return rng.integers(low, high, size=shape).astype(dt)
    return rand


def check_both(fn, exp, *args, tol=None, **kw):
    """``fn(*args, **kw)`` with ``out=None`` and into a pre-filled buffer, both equal to ``exp`` (same
    dtype and shape; float32 within 1e-5, float64 within 1e-12 unless ``tol``)."""
    tol = tol or (1e-5 if exp.dtype == np.float32 else 1e-12)
    r = fn(*args, **kw)
    assert r.dtype == exp.dtype and r.shape == exp.shape
    np.testing.assert_allclose(r, exp, rtol=tol, atol=tol)
    buf = np.full(exp.shape, np.nan if exp.dtype.kind == "f" else 123, exp.dtype)
    assert fn(*args, out=buf, **kw) is buf
    np.testing.assert_allclose(buf, exp, rtol=tol, atol=tol)


def thread_mismatches(call, expected, *, rounds: int = 200, rtol: float = 1e-4, atol: float = 1e-4) -> list[int]:
    """Run ``call(i)`` ``rounds`` times in each of ``len(expected)`` threads at once (thread ``i``
    checks against ``expected[i]``); the threads whose result was ever wrong, or that raised. One
    kernel instance called this way shows a race on its shared plans or scratch."""
    import threading

    errors: list[int] = []

    def work(i):
        try:
            for _ in range(rounds):
                if not np.allclose(call(i), expected[i], rtol=rtol, atol=atol):
                    errors.append(i)
                    return
        except Exception:  # noqa: BLE001 - a raising thread is a failing one
            errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(expected))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(errors)

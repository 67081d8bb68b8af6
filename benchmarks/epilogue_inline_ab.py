"""trt_like's conv tactics whose kernels call the shared epilogues (``kernels/epilogue.py``), two
package trees A/B: the epilogues inlined by numba's IR inliner (``inline="always"``) or compiled once
and inlined by LLVM (``kernels.jit.helper``).

    python -m benchmarks.epilogue_inline_ab --old-pkg srcore_trt_like_old [--rounds 9] [--calls 30]
    python -m benchmarks.epilogue_inline_ab --compile PKG      # one cold process: compile CPU per tactic

``--old-pkg`` names an importable copy of the old plugin package (the old tree's ``srcore_trt_like``
with its absolute imports renamed). Steady calls: both packages' tactics of every shape in ONE process,
interleaved, one thread, process CPU per call (median of ``calls``), best round; the outputs of old and
new must be the same bits. ``--compile``: the thread CPU of each tactic's first call in a fresh process
(set ``NUMBA_CACHE_DIR`` to an empty directory: the numba compile), as JSON.
"""
from __future__ import annotations

import argparse
import importlib
import json
import time

import numpy as np

#: name -> (input NCHW, out channels, kernel, stride, padding, relu, residual, groups)
SHAPES = {
    "3x3_res_relu": ((1, 32, 28, 28), 32, (3, 3), 1, 1, True, True, 1),
    "3x3_s2": ((1, 32, 28, 28), 64, (3, 3), 2, 1, True, False, 1),
    "3x3_56": ((1, 16, 56, 56), 16, (3, 3), 1, 1, False, True, 1),
    "1x1": ((1, 64, 14, 14), 128, (1, 1), 1, 0, True, True, 1),
    "dw3x3": ((1, 32, 28, 28), 32, (3, 3), 1, 1, True, True, 32),
}
#: the tactics whose kernels call an epilogue (winograd: ``row``, their packed forms ``write_rows``;
#: packed_gemm: ``column``; depthwise_direct, im2col_gemm, gemm_1x1: ``row``)
WORDS = ("winograd", "packed_gemm", "depthwise_direct", "im2col_gemm", "gemm_1x1")


def _tactics(pkg: str, name: str):
    from threadpoolctl import threadpool_limits   # noqa: F401 (BLAS threads limited by the caller)
    conv = importlib.import_module(f"{pkg}.conv")
    xs, o, k, s, p, relu, res, g = SHAPES[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal((o, xs[1] // g, *k)) / np.sqrt(xs[1] // g * k[0] * k[1])).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    spec = conv.ConvSpec(xs, o, k, (s, s), (p, p), groups=g, relu=relu, residual=res)
    out = []
    for t in conv.conv_tactics(spec, w, b):
        if any(word in t.name for word in WORDS) and not t.name.endswith(("_omp", "_team")):
            y = np.empty(t.out_shape, np.float32)
            r = rng.standard_normal(t.out_shape).astype(np.float32) if res else None
            out.append((t.name, lambda t=t, x=x, y=y, r=r: t(x, y, r), y))
    return out


def compile_times(pkg: str) -> dict:
    times = {}
    for name in SHAPES:
        for tactic, call, _ in _tactics(pkg, name):
            t0 = time.thread_time()
            call()
            times[f"{name}/{tactic}"] = time.thread_time() - t0
    return times


def steady(old_pkg: str, rounds: int, calls: int) -> None:
    rows = []
    for name in SHAPES:
        new = {t: (c, y) for t, c, y in _tactics("srcore_trt_like", name)}
        old = {t: (c, y) for t, c, y in _tactics(old_pkg, name)}
        for tactic in new:
            if tactic not in old:
                continue
            (cn, yn), (co, yo) = new[tactic], old[tactic]
            cn(), co()
            same = np.array_equal(yn.view(np.uint32), yo.view(np.uint32))
            best = {"old": float("inf"), "new": float("inf")}
            for r in range(rounds):
                for side, call in (("old", co), ("new", cn)) if r % 2 else (("new", cn), ("old", co)):
                    per = []
                    for _ in range(calls):
                        t0 = time.process_time()
                        call()
                        per.append(time.process_time() - t0)
                    best[side] = min(best[side], float(np.median(per)))
            rows.append((f"{name}/{tactic}", best["old"] * 1e6, best["new"] * 1e6, same))
    print(f"{'shape/tactic':50s} {'old us':>9s} {'new us':>9s} {'new/old':>8s} same bits")
    for key, o, n, same in rows:
        print(f"{key:50s} {o:9.1f} {n:9.1f} {n / o:8.3f} {same}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-pkg")
    ap.add_argument("--compile")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=30)
    a = ap.parse_args()
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):
        if a.compile:
            print(json.dumps(compile_times(a.compile)))
        else:
            steady(a.old_pkg, a.rounds, a.calls)


if __name__ == "__main__":
    main()

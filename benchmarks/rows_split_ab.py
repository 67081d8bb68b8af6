"""The OpenMP splits of trt_like's ``kernels/rows_split.py`` against those of another revision, in one
process: each split's run time at 2 threads (CPU and wall, interleaved rounds) and its compile time
on a cold numba cache.

``python -m benchmarks.rows_split_ab [--base REV] [--rounds 15] [--calls 20] [--threads 2] [--compile 3]``

The base's module is read with ``git show REV:...`` and loaded as a module of the kernels package
(its relative imports resolve to this tree's kernels), its numba cache under the system's temp
folder. Both forms of a split run the same one-thread kernels on the same chunks, so their results
are compared bit for bit first. Per split: the median and best round of each form (ms a call), and
new / old of those (below 1: the new form is faster). ``--compile N``: N pairs of fresh processes
(old, new alternately), each with an empty ``NUMBA_CACHE_DIR``, timing the first call of all six
splits (CPU time) after the one-thread kernels they wrap were compiled (what the splits cost).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_ROOT = Path(__file__).resolve().parents[1]
_KERNELS = "plugins/trt_like/srcore_trt_like/kernels"
f32 = np.float32


def load_base(rev: str, module: str = "rows_split"):
    """Kernel ``module`` as of ``rev``, as ``srcore_trt_like.kernels._<module>_<rev>``."""
    src = subprocess.run(["git", "-C", str(_ROOT), "show", f"{rev}:{_KERNELS}/{module}.py"], check=True,
                         capture_output=True, text=True).stdout
    tag = subprocess.run(["git", "-C", str(_ROOT), "rev-parse", "--short", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    folder = Path(tempfile.gettempdir()) / "srcore-rows-split-ab" / tag
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"_{module}_{tag}.py"
    if not path.exists() or path.read_text() != src:
        path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"srcore_trt_like.kernels._{module}_{tag}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod        # numba's cache rebuilds a kernel's environment by module name
    spec.loader.exec_module(mod)
    return mod


def cases(old, new, nt: int = 2) -> dict:
    """Per split: ``(old call, new call, output)``, each call writing ``output``; sizes the splits are
    offered at (a BERT-base softmax and layer norm at batch 8, an SD UNet group norm, 64 planes of
    64 x 64 resized to 128 x 128, 2048 rows of 512 resized to 1024)."""
    from srcore_trt_like.kernels.activation import CODES
    from srcore_trt_like.tactics.data import linear_table, nearest_table

    rng = np.random.default_rng(0)

    def randn(*shape):
        return rng.standard_normal(shape).astype(f32)

    def chunk(n):
        return max(1, -(-n // (4 * nt)))      # tactics/data.py's resize chunk

    out = {}
    x = randn(8 * 12 * 128, 128)
    o = np.empty_like(x)
    out["softmax"] = (lambda: old.softmax_split(x, o, f32(1), nt),
                      lambda: new.softmax_split(nt, new.CHUNK, x.shape[0], x, o, f32(1)), o)
    xl, w, b = randn(8 * 128, 768), randn(768), randn(768)
    ol = np.empty_like(xl)
    out["layer_norm"] = (lambda: old.layer_norm_split(xl, w, b, f32(1e-5), ol, nt),
                         lambda: new.layer_norm_split(nt, new.CHUNK, xl.shape[0], xl, w, b, f32(1e-5), ol), ol)
    xg, wg, bg = randn(2 * 32, 10, 64 * 64), randn(32, 10), randn(32, 10)
    og, code = np.empty_like(xg), CODES["silu"]
    out["group_norm"] = (lambda: old.group_norm_split(xg, wg, bg, f32(1e-5), og, code, f32(0.01), nt),
                         lambda: new.group_norm_split(nt, 1, xg.shape[0], xg, wg, bg, f32(1e-5), og, code, f32(0.01)),
                         og)
    xp = randn(64, 64, 64)
    h, wn = nearest_table(64, 128, None), nearest_table(64, 128, None)
    on = np.empty((64, 128, 128), f32)
    out["nearest"] = (lambda: old.nearest_split(xp, h, wn, on, chunk(64), nt),
                      lambda: new.nearest_split(nt, chunk(64), 64, xp, h, wn, on), on)
    (h0, h1, lh), (w0, w1, lw) = linear_table(64, 128, None, False), linear_table(64, 128, None, False)
    ob = np.empty((64, 128, 128), f32)
    out["bilinear"] = (lambda: old.bilinear_split(xp, h0, h1, lh, w0, w1, lw, ob, chunk(64), nt),
                       lambda: new.bilinear_split(nt, chunk(64), 64, xp, h0, h1, lh, w0, w1, lw, ob), ob)
    xr = randn(2048, 512)
    i0, i1, l1 = linear_table(512, 1024, None, False)
    orr = np.empty((2048, 1024), f32)
    out["linear"] = (lambda: old.linear_split(xr, i0, i1, l1, orr, chunk(2048), nt),
                     lambda: new.linear_split(nt, chunk(2048), 2048, xr, i0, i1, l1, orr), orr)
    return out


def mkl_cases(rev: str, nt: int = 2) -> dict:
    """``heads_omp.heads`` (BERT-base attention at batch 8: 96 heads of 128 x 128 x 64) and
    ``mkl_split.split_compute`` (64 x 768 @ 768 x 3072 in column blocks) as :func:`cases`; {} without MKL."""
    from srcore_trt_like.kernels import heads_omp, mkl_split
    from srcore_trt_like.kernels import mkl as mkl_gemm

    lib = mkl_gemm.library()
    if lib is None:
        return {}
    old_h, old_m = load_base(rev, "heads_omp"), load_base(rev, "mkl_split")
    rng = np.random.default_rng(1)
    B, L, E, H = 8, 128, 768, 12
    q, k, v = (rng.standard_normal((B, L, E)).astype(f32) for _ in range(3))
    o = np.empty((B, L, E), f32)
    mask, s, p = np.zeros((1, 1, 1, L), f32), np.empty((nt, L, L), f32), np.empty((nt, L, L), f32)
    fn, one = heads_omp.addresses(lib)
    ptrs = (q.ctypes.data, q.strides[0], k.ctypes.data, k.strides[0], v.ctypes.data, v.strides[0], o.ctypes.data,
            o.strides[0])
    rest = (mask, 0, f32(8.0), True, False, s, p)
    mkl_gemm.set_threads(lib, 1)
    # the kernels see addresses: the lambdas hold the arrays (``_``) so that they stay alive
    out = {"heads": (lambda _=(q, k, v): old_h.heads(fn, one, *ptrs, B, L, L, E, H, *rest, nt),
                     lambda _=(q, k, v): heads_omp.heads(nt, 1, B * H, fn, one, *ptrs, L, L, E, H, *rest), o)}
    w, x = rng.standard_normal((3072, 768)).astype(f32), rng.standard_normal((64, 768)).astype(f32)
    og = np.empty((64, 3072), f32)
    g = mkl_split.SplitPackedGemm(lib, w, 64, nt)     # its blocks, called without its governor
    blocks = (g._fn, g._one, 64, 768, 3072, x.ctypes.data, g._addrs, g._starts, g._widths, og.ctypes.data)
    out["split_compute"] = (lambda _=(x, g): old_m.split_compute(*blocks, nt),
                            lambda _=(x, g): mkl_split.split_compute(nt, 1, len(g.packed), *blocks), og)
    return out


def _timed(fn, calls: int) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.process_time() - c0) / calls * 1e3, (time.perf_counter() - w0) / calls * 1e3


def speed(rev: str, rounds: int, calls: int, team: int = 2) -> dict:
    from srcore_trt_like.kernels import rows_split as new
    from srcore_trt_like.kernels import threads

    old = load_base(rev)
    threads.use(team)
    result = {}
    for name, (fo, fn, o) in {**cases(old, new), **mkl_cases(rev)}.items():
        fo()
        a = o.copy()
        fn()
        if not np.array_equal(a, o, equal_nan=True):
            raise SystemExit(f"{name}: the two forms differ")
        times = {"old": [], "new": []}
        for r in range(rounds):
            for form in (("old", "new") if r % 2 == 0 else ("new", "old")):
                times[form].append(_timed(fo if form == "old" else fn, calls))
        row = {}
        for i, clock in enumerate(("cpu", "wall")):
            med = {f: statistics.median(t[i] for t in times[f]) for f in times}
            best = {f: min(t[i] for t in times[f]) for f in times}
            row[clock] = {"old_ms": round(med["old"], 4), "new_ms": round(med["new"], 4),
                          "ratio_median": round(med["new"] / med["old"], 3),
                          "ratio_best": round(best["new"] / best["old"], 3)}
        result[name] = row
        print(name, json.dumps(row), flush=True)
    return result


def _compile_once(form: str, rev: str) -> float:
    """(in a fresh process) CPU seconds of the first call of all six splits of ``form``, after the
    one-thread kernels they wrap were compiled at the splits' argument types."""
    from srcore_trt_like.kernels import resize, rows, threads
    from srcore_trt_like.kernels import rows_split as new

    threads.use(2)
    old = load_base(rev)
    cs = cases(old, new)
    x, o = cs["softmax"][2][:2].copy(), cs["softmax"][2][:2]
    rows.softmax_row(x[0], o[0], f32(1))
    xl = cs["layer_norm"][2][:2]
    rows.layer_norm_row(xl[0], xl[1], xl[1], f32(1e-5), xl[0])
    g = cs["group_norm"][2][:1]
    rows.group_norm_rows(g, g[0], g[0], f32(1e-5), g, 0, f32(0.01))
    p = cs["nearest"][2][:1]
    ix, lx = np.zeros(128, np.int64), np.zeros(128, f32)
    resize.nearest_planes(p, ix, ix, p)
    resize.bilinear_planes(p, ix, ix, lx, ix, ix, lx, p)
    r, iy, ly = cs["linear"][2][:1], np.zeros(1024, np.int64), np.zeros(1024, f32)
    resize.linear_rows(r, iy, iy, ly, r)
    t0 = time.process_time()      # numba compiles on the calling thread; wall time is the load's
    for fo, fn, _ in cs.values():
        (fo if form == "old" else fn)()
    return time.process_time() - t0


def compile_times(rev: str, pairs: int) -> dict:
    times = {"old": [], "new": []}
    for p in range(pairs):
        for form in (("old", "new") if p % 2 == 0 else ("new", "old")):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, NUMBA_CACHE_DIR=cache)
                code = (f"from benchmarks.rows_split_ab import _compile_once; "
                        f"print(_compile_once({form!r}, {rev!r}))")
                run = subprocess.run([sys.executable, "-c", code], cwd=_ROOT, env=env, check=True,
                                     capture_output=True, text=True)
                times[form].append(float(run.stdout.strip().splitlines()[-1]))
    row = {f: {"median_s": round(statistics.median(t), 2), "all_s": [round(v, 2) for v in t]} for f, t in times.items()}
    row["ratio_median"] = round(row["new"]["median_s"] / row["old"]["median_s"], 3)
    print("compile", json.dumps(row), flush=True)
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="the revision of the old rows_split.py")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20, help="calls a round")
    ap.add_argument("--threads", type=int, default=2,
                    help="numba's team (the splits are cut in 2 parts either way; 1: the code's cost without waits)")
    ap.add_argument("--compile", type=int, default=0, help="pairs of cold-cache compile runs (0: none)")
    a = ap.parse_args(argv)
    print("load", os.getloadavg(), flush=True)
    if a.rounds:
        speed(a.base, a.rounds, a.calls, a.threads)
    if a.compile:
        compile_times(a.base, a.compile)
    print("load", os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()

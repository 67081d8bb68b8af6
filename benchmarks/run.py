"""THE side-by-side benchmark: ``python -m benchmarks.run [--set seven|families|all] [--models ...]
[--runners ...] [--threads 1,2] [--cold-cache] [--smoke] [--out DIR]``.

One fresh process (``python -m benchmarks.cell``) per (model, runner, threads)
cell; artifacts are prepared once per model in this process. Prints a table
with ratios to srcore (codegen, standard_resizing) and the first call beside
the load time, writes ``OUT/latest.json`` (``latest_cold.json`` with
``--cold-cache``: every cell starts with empty srcore and numba caches) and
(unless ``--smoke`` / ``--no-chart``) ``docs/bench-latency.png``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .cell import AB_ONLY_RUNNERS, RUNNERS
from .machine import machine_facts
from .models import ALL_MODELS, FAMILIES, MODELS
from .prepare import prepare
from .report import format_table, plot_latency

ROOT = Path(__file__).resolve().parent.parent
# at 2 threads: the runners whose speed-up matters (onnx.reference and the interpreter add nothing new)
RUNNERS_2T = ("eager", "torchscript", "static_runtime", "ort", "numpy_out",
              "srcore_codegen_standard", "srcore_codegen_precomputed", "trt_like", "srcore_onnx", "openvino",
              "openvino_bf16", "ov_onnx", "ov_onnx_bf16")
SMOKE_MODELS = ("mlp_tiny", "elementwise_chain")
#: --set: the seven of bench-models.md, the wider set of architecture families, or both
SETS = {"seven": list(MODELS), "families": list(FAMILIES), "all": list(ALL_MODELS)}


def child_env(threads: int, cache_dir: str | None = None) -> dict[str, str]:
    """The environment of a cell: intra-op threads fixed; with ``cache_dir``, srcore's and numba's
    on-disk caches there (an empty directory: a cold start)."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["SRCORE_CACHE_DIR"] = os.path.join(cache_dir, "srcore")
        env["NUMBA_CACHE_DIR"] = os.path.join(cache_dir, "numba")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    # set here for old OpenBLAS builds, they slow a current one: unset both, in the children only
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_cell(model: str, runner: str, threads: int, art: Path, quick: bool, timeout: float,
             cold_cache: bool = False) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.cell", model, runner, str(threads), str(art)]
    if quick:
        cmd.append("--quick")
    base = {"model": model, "runner": runner, "threads": threads}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="srcore-cold-") as tmp:
        try:
            p = subprocess.run(cmd, env=child_env(threads, tmp if cold_cache else None), capture_output=True,
                               text=True, timeout=timeout, cwd=ROOT)
        except subprocess.TimeoutExpired:
            return {**base, "status": "error", "error": f"timeout after {timeout:.0f} s"}
    for line in p.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            res = json.loads(line[len("@@RESULT@@"):])
            break
    else:
        res = {**base, "status": "error",
               "error": f"cell exited {p.returncode} without a result: {p.stderr.strip()[-1500:]}"}
    res["cell_wall_s"] = round(time.perf_counter() - t0, 2)
    return res


def better(a: dict, b: dict) -> dict:
    """The cell of two passes measured in the less disturbed phase (lower best-round median)."""
    if a.get("status") != "ok":
        return b
    if b.get("status") != "ok":
        return a
    return a if a["best_round_median_us"] <= b["best_round_median_us"] else b


def merge_reports(old: dict, new: dict) -> dict:
    """Cells of ``new`` merged into ``old``: a cell measured in both keeps its best pass (all passes listed)."""
    key = lambda c: (c["model"], c["runner"], c["threads"])  # noqa: E731
    cells = {key(c): c for c in old["cells"]}
    for c in new["cells"]:
        prev = cells.get(key(c))
        passes = (prev.get("passes_best_round_us", [prev.get("best_round_median_us")]) if prev else [])
        best = better(prev, c) if prev else c
        cells[key(c)] = {**best, "passes_best_round_us": [*passes, c.get("best_round_median_us")]}
    merged = {**old, "cells": sorted(cells.values(), key=lambda c: (
        list(ALL_MODELS).index(c["model"]), c["threads"], list(RUNNERS).index(c["runner"])))}
    merged["prepare"] = {**old.get("prepare", {}), **new["prepare"]}
    merged["command"] = old["command"] + " ; then " + new["command"]
    merged["wall_s"] = old.get("wall_s", 0) + new["wall_s"]
    merged["date"] = new["date"]
    return merged


def plan_cells(models, runners, threads) -> list[tuple[str, str, int]]:
    cells = []
    for m in models:
        for t in threads:
            if t > 1 and not ALL_MODELS[m][1]["compute_bound"]:
                continue
            for r in runners:
                if t > 1 and r not in RUNNERS_2T:
                    continue
                cells.append((m, r, t))
    return cells


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="all", choices=sorted(SETS),
                    help="seven: the models of bench-models.md; families: the wider set (benchmarks/families.py); "
                         "all: both (default)")
    ap.add_argument("--models", default=None,
                    help="comma list (default: those of --set; --smoke: mlp_tiny,elementwise_chain)")
    ap.add_argument("--runners", default=None, help=f"comma list of {','.join(RUNNERS)}")
    ap.add_argument("--threads", default="1,2", help="intra-op thread counts (>1 only for compute-bound models)")
    ap.add_argument("--smoke", action="store_true", help="few models, few calls, no charts")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="results + cached artifacts")
    ap.add_argument("--no-chart", action="store_true")
    ap.add_argument("--merge", action="store_true",
                    help="merge into OUT/latest.json: a cell run again keeps its best pass")
    ap.add_argument("--passes", type=int, default=1,
                    help="run every cell N times (alternating order), keep each cell's least disturbed pass")
    ap.add_argument("--chart", default=str(ROOT / "docs" / "bench-latency.png"))
    ap.add_argument("--timeout", type=float, default=600.0, help="per-cell time limit, seconds")
    ap.add_argument("--cold-cache", action="store_true",
                    help="every cell with empty srcore and numba caches (first builds, first compiles); "
                         "writes OUT/latest_cold.json")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    models = args.models.split(",") if args.models else list(SMOKE_MODELS if args.smoke else SETS[args.set])
    runners = args.runners.split(",") if args.runners else [r for r in RUNNERS if r not in AB_ONLY_RUNNERS]
    for name, known in ((models, ALL_MODELS), (runners, RUNNERS)):
        bad = [n for n in name if n not in known]
        if bad:
            print(f"unknown: {', '.join(bad)} (known: {', '.join(known)})", file=sys.stderr)
            return 2
    threads = [int(t) for t in args.threads.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    report = {"command": "python -m benchmarks.run " + " ".join(sys.argv[1:] if argv is None else argv),
              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine_facts(), "smoke": args.smoke, "cache": "cold" if args.cold_cache else "warm",
              "prepare": {}, "cells": []}
    for m in models:
        t0 = time.perf_counter()
        report["prepare"][m] = prepare(m, out)
        print(f"[prepare] {m}: {report['prepare'][m]} ({time.perf_counter() - t0:.1f} s)", flush=True)
    plan = plan_cells(models, runners, threads)
    best: dict = {}
    for i in range(args.passes):
        # alternate the order so that a slow phase of the machine does not always hit the same cells
        for m, r, t in (plan if i % 2 == 0 else plan[::-1]):
            res = run_cell(m, r, t, out / "artifacts" / m, args.smoke, args.timeout, args.cold_cache)
            res["loadavg_1m"] = os.getloadavg()[0]
            prev = best.get((m, r, t))
            passes = [*(prev or {}).get("passes_best_round_us", []), res.get("best_round_median_us")]
            best[(m, r, t)] = {**(better(prev, res) if prev else res), "passes_best_round_us": passes}
            msg = (f"{res['best_round_median_us']:.1f} us" if res["status"] == "ok"
                   else res.get("note") or res.get("error", "")[:200])
            print(f"[cell] {m} {r} t={t}: {res['status']} {msg}", flush=True)
    report["cells"] = [best[k] for k in plan]
    report["wall_s"] = round(time.perf_counter() - t_start, 1)
    blas = next((c["blas"] for c in report["cells"] if c.get("blas")), [])
    report["machine"]["blas_runtime"] = blas
    name = "smoke.json" if args.smoke else "latest_cold.json" if args.cold_cache else "latest.json"
    if args.merge and (out / name).exists():
        report = merge_reports(json.loads((out / name).read_text()), report)
    (out / name).write_text(json.dumps(report, indent=1, default=str))
    print()
    print(format_table(report))
    if not (args.smoke or args.no_chart or args.cold_cache):
        plot_latency(report, Path(args.chart))
        print(f"chart: {args.chart}")
    print(f"results: {out / name} ({report['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

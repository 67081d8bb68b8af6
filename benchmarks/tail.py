"""Tail latency: ``python -m benchmarks.tail [--models ...] [--runners trt_like,ort] [--threads 1,2]``.

For every (model, runner, threads) cell, the cell protocol of ``benchmarks.run`` (a fresh
process, best-round median, pooled median and p90 of every timed call) twice: on its own, and
while another process keeps one core busy (``--busy``: a Python busy loop, started before the
cell and stopped after it). Prints the median, the p90 and their ratio for both; the target is
p90 <= 1.5x the median in every cell (docs/performance.md, "Tail latency"). ``--floor`` also
times, in the same condition, a pure-Python loop calibrated to each cell's median: the machine's
own tail at that duration.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from .models import MODELS
from .prepare import prepare
from .run import ROOT, run_cell

BUSY = "import time\nend = time.time() + 3600\nwhile time.time() < end:\n    pass\n"


def floor_child(median_us: float, quick: bool) -> dict:
    """The machine's own tail for a call of ``median_us``: a pure-Python loop calibrated to that
    median, timed with the same protocol (``srcore bench``'s, gc off). A runtime cannot have a
    steadier tail than this loop beside the same load."""
    from srcore.cli.bench import measure

    n = 64
    while True:
        t0 = time.perf_counter()
        for _ in range(5):
            sum(range(n))
        per = (time.perf_counter() - t0) / 5 * 1e6
        if per >= median_us or n > 1 << 30:
            n = max(1, int(n * median_us / per))
            break
        n = max(n * 2, int(n * median_us / max(per, 1e-3)))
    res = measure(lambda: sum(range(n)), 2 if quick else 5, 3 if quick else None)
    return {"median_us": res["median_us"], "p90_us": res["p90_us"],
            "p90_over_median": res["p90_us"] / res["median_us"]}


def floor_cell(median_us: float, quick: bool) -> dict:
    p = subprocess.run([sys.executable, "-m", "benchmarks.tail", "--floor", str(median_us)]
                       + (["--quick"] if quick else []), capture_output=True, text=True, cwd=ROOT, timeout=900)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
    return json.loads(line[0][2:]) if line else {"error": p.stderr[-500:]}


def busy_process():
    """A process keeping one core busy (the OS puts it where it likes, as another job would)."""
    p = subprocess.Popen([sys.executable, "-c", BUSY])
    time.sleep(0.3)
    return p


def measure(models, runners, threads, out: Path, quick: bool, floor: bool = False) -> list[dict]:
    rows = []
    for model in models:
        prepare(model, out)
        art = out / "artifacts" / model
        for runner in runners:
            for t in threads:
                row = {"model": model, "runner": runner, "threads": t}
                for busy in (False, True):
                    hog = busy_process() if busy else None
                    try:
                        res = run_cell(model, runner, t, art, quick, timeout=900)
                    finally:
                        if hog is not None:
                            hog.kill()
                            hog.wait()
                    key = "busy" if busy else "alone"
                    if res.get("status") != "ok":
                        row[key] = {"error": res.get("error") or res.get("note")}
                        continue
                    row[key] = {"median_us": res["median_us"], "p90_us": res["p90_us"],
                                "best_round_median_us": res["best_round_median_us"],
                                "p90_over_median": res["p90_us"] / res["median_us"]}
                    if floor:
                        hog = busy_process() if busy else None
                        try:
                            row[key]["floor"] = floor_cell(res["median_us"], quick)
                        finally:
                            if hog is not None:
                                hog.kill()
                                hog.wait()
                rows.append(row)
                print(format_row(row), flush=True)
    return rows


def _us(v: float) -> str:
    return f"{v / 1e3:.2f} ms" if v >= 1e3 else f"{v:.1f} µs"


def format_row(row: dict) -> str:
    cells = []
    for key in ("alone", "busy"):
        r = row.get(key, {})
        if "error" in r or not r:
            cells.append(f"{key}: {r.get('error', '-')}")
        else:
            fl = r.get("floor", {})
            floor = f", floor {fl['p90_over_median']:.2f}x" if "p90_over_median" in fl else ""
            cells.append(f"{key}: median {_us(r['median_us'])}, p90 {_us(r['p90_us'])} "
                         f"({r['p90_over_median']:.2f}x{floor})")
    return f"{row['model']:28s} {row['runner']:9s} {row['threads']}t  " + " | ".join(cells)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runners", default="trt_like,ort")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 3 calls per cell (a smoke run)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--floor", nargs="?", const=-1.0, type=float, default=None,
                    help="also time a pure-Python loop of each cell's median in the same condition (the "
                         "machine's own p90 / median: a runtime's tail cannot be steadier)")
    args = ap.parse_args(argv)
    if args.floor is not None and args.floor >= 0:     # the child of one floor measurement
        print("@@" + json.dumps(floor_child(args.floor, args.quick)))
        return 0
    rows = measure(args.models.split(","), args.runners.split(","), [int(t) for t in args.threads.split(",")],
                   args.out, args.quick, floor=args.floor is not None)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows for k in ("alone", "busy") if r.get(k, {}).get("p90_over_median", 0) > 1.5]
    print(f"\n{len(bad)} of {2 * len(rows)} measurements over 1.5x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

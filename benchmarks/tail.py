"""Tail latency: ``python -m benchmarks.tail [--models ...] [--runners trt_like,ort] [--threads 1,2]``.

For every (model, runner, threads) cell, the cell protocol of ``benchmarks.run`` (a fresh
process, best-round median, pooled median and p90 of every timed call) twice: on its own, and
while another process keeps one core busy (``--busy``: a Python busy loop, started before the
cell and stopped after it). Prints the median, the p90 and their ratio for both; the target is
p90 <= 1.5x the median in every cell (docs/performance.md, "Tail latency").
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


def busy_process():
    """A process keeping one core busy (the OS puts it where it likes, as another job would)."""
    p = subprocess.Popen([sys.executable, "-c", BUSY])
    time.sleep(0.3)
    return p


def measure(models, runners, threads, out: Path, quick: bool) -> list[dict]:
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
            cells.append(f"{key}: median {_us(r['median_us'])}, p90 {_us(r['p90_us'])} "
                         f"({r['p90_over_median']:.2f}x)")
    return f"{row['model']:28s} {row['runner']:9s} {row['threads']}t  " + " | ".join(cells)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runners", default="trt_like,ort")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 3 calls per cell (a smoke run)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    rows = measure(args.models.split(","), args.runners.split(","), [int(t) for t in args.threads.split(",")],
                   args.out, args.quick)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows for k in ("alone", "busy") if r.get(k, {}).get("p90_over_median", 0) > 1.5]
    print(f"\n{len(bad)} of {2 * len(rows)} measurements over 1.5x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

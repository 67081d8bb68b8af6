"""What one numba OpenMP region of two parts costs on this machine, beside the work it splits.

``python -m benchmarks.region_cost [--rounds 7] [--calls 200] [--work 5,20,50] [--gaps 0,20,100,400,1000]``

A split small layer pays a fork (the worker must see the region), a join (the caller waits at the
barrier for the worker's part) and, between layers, whatever the worker did while the caller ran
the unsplit work in between: spun (libgomp's ``GOMP_SPINCOUNT``, set by trt_like's
``kernels.threads``), or fell asleep and must be woken by a futex. Each region here splits ``2 x W``
µs of pure arithmetic (no memory traffic, so no cache effect is counted) in two parts; between
regions the caller alone runs ``G`` µs of the same arithmetic (a layer left on one thread). Printed
per (W, G): the best-round median wall µs of one region, and its overhead over the ``W`` µs of one
part (perfect splitting). The serial figure is ``2 x W``. Wall time: run it idle or under the
bench lock (``flock /tmp/srcore-bench.lock nice -n -10``) and say the load.
"""
from __future__ import annotations

import argparse
import statistics
import time


def _kernels():
    import srcore_trt_like.kernels.threads  # noqa: F401 (libgomp's wait policy, as an engine sets it)
    from numba import njit, prange

    @njit(nogil=True, cache=False)
    def spin(n):
        s = 0.0
        for i in range(n):
            s = s * 0.999999 + 1.0
        return s

    @njit(parallel=True, nogil=True, cache=False)
    def region(n, nt, out):
        for t in prange(nt):
            s = 0.0
            for i in range(n):
                s = s * 0.999999 + 1.0
            out[t] = s

    return spin, region


def _loops_per_us(spin) -> float:
    spin(1000)
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter_ns()
        spin(1_000_000)
        best = min(best, time.perf_counter_ns() - t0)
    return 1_000_000 / (best / 1000)


def measure(work_us, gaps_us, rounds: int, calls: int, threads: int = 2) -> list[dict]:
    import numba
    import numpy as np

    spin, region = _kernels()
    numba.set_num_threads(threads)
    out = np.zeros(threads)
    per_us = _loops_per_us(spin)
    region(10, threads, out)
    rows = []
    for w in work_us:
        n = int(w * per_us)
        for g in gaps_us:
            m = int(g * per_us)
            medians = []
            for _ in range(rounds):
                ts = []
                for _ in range(calls):
                    if m:
                        spin(m)
                    t0 = time.perf_counter_ns()
                    region(n, threads, out)
                    ts.append(time.perf_counter_ns() - t0)
                medians.append(statistics.median(ts) / 1000)
            best = min(medians)
            rows.append({"work_us": w, "gap_us": g, "region_us": best, "overhead_us": best - w,
                         "serial_us": 2 * w, "gain": 2 * w / best})
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--work", default="5,20,50", help="µs of work per part (W)")
    ap.add_argument("--gaps", default="0,20,100,400,1000", help="µs of one-thread work between regions (G)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--priority", type=int, default=None, metavar="NICE",
                    help="run in an autogroup of its own at this nice (e.g. -10: a plain nice does not reach "
                         "across the scheduler's autogroups)")
    a = ap.parse_args(argv)
    if a.priority is not None:
        import sys

        from .clean_calls import raise_priority

        rc = raise_priority("benchmarks.region_cost", list(sys.argv[1:] if argv is None else argv), a.priority)
        if rc is not None:
            raise SystemExit(rc)
    ws = [float(x) for x in a.work.split(",")]
    gs = [float(x) for x in a.gaps.split(",")]
    import os

    print(f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT')} OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} "
          f"(as set by trt_like unless given)")
    print(f"{'W us':>6} {'G us':>6} {'region us':>10} {'overhead us':>12} {'2W/region':>10}")
    for r in measure(ws, gs, a.rounds, a.calls, a.threads):
        print(f"{r['work_us']:6.0f} {r['gap_us']:6.0f} {r['region_us']:10.1f} {r['overhead_us']:12.1f} {r['gain']:10.2f}")


if __name__ == "__main__":
    main()

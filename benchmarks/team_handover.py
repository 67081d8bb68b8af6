"""What a trt_like team region costs, and whether this machine gives the process a second core now.

``python -m benchmarks.team_handover [--calls 400] [--part-rows 2048] [--parts 8]``

Two figures, in one process (short: ~10-30 s):

* **control**: the same single-threaded OpenBLAS work (40 GEMMs) twice, one after the other and on
  two Python threads at once (numpy releases the GIL), best and median of 10 rounds. Its ratio is
  the most any 2-thread engine can gain here and now: near 2 on idle cores (not yet measured idle),
  1.01-1.08 in the median round beside five other jobs on 2 cores (2026-11-27): then a 1 -> 2
  thread figure measures the load, not srcore.
* **hand-over**: the OpenBLAS team's region (``kernels/blas_team.Team.run``, as the team tactics
  call it) over ``--parts`` parts of one small GEMM each (``--part-rows`` x 64 @ 64 x 64), after a
  GEMM alone on the caller (a layer between two team phases): the region's wall time against the
  same parts on the caller alone, how often the team's worker took a part at all, and its **join
  latency** (from the call to the worker's first part: the wake from its queue and its wait for
  the GIL).
"""
from __future__ import annotations

import argparse
import threading
import time


def _q(values, p):
    v = sorted(values)
    return v[int(p * (len(v) - 1))] if v else float("nan")


def control(rounds: int = 10, gemms: int = 20) -> dict:
    """Sequence vs two threads of the same single-threaded GEMMs: ``{"seq_ms", "par_ms", "best",
    "median"}`` (ratios seq/par of the best and of the median rounds)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).random((256, 256), np.float32)
    b = np.random.default_rng(1).random((256, 1024), np.float32)

    def work():
        o = np.empty((256, 1024), np.float32)
        for _ in range(gemms):
            np.matmul(a, b, out=o)

    seq, par = [], []
    with threadpool_limits(1):
        work()
        for _ in range(rounds):
            t0 = time.perf_counter()
            work()
            work()
            seq.append(time.perf_counter() - t0)
            th = threading.Thread(target=work)
            t0 = time.perf_counter()
            th.start()
            work()
            th.join()
            par.append(time.perf_counter() - t0)
    return {"seq_ms": min(seq) * 1e3, "par_ms": min(par) * 1e3,
            "best": min(seq) / min(par), "median": _q(seq, .5) / _q(par, .5)}


def handover(calls: int = 400, part_rows: int = 2048, parts: int = 8) -> dict:
    """The team's 2-thread region against the same parts alone (see the module docstring)."""
    import numpy as np
    from threadpoolctl import threadpool_limits
    from srcore_trt_like.kernels import blas_team

    rng = np.random.default_rng(0)
    a, b = rng.random((part_rows, 64), np.float32), rng.random((64, 64), np.float32)
    outs = np.empty((2, part_rows, 64), np.float32)
    ga, gb = rng.random((128, 256), np.float32), rng.random((256, 256), np.float32)
    go = np.empty((128, 256), np.float32)
    team = blas_team.team(2)
    main = threading.get_ident()
    joined: list[int] = []

    def part(i):
        mine = threading.get_ident() == main
        if not mine and not joined:
            joined.append(time.perf_counter_ns())
        np.matmul(a, b, out=outs[int(mine)])

    alone, region, join = [], [], []
    with threadpool_limits(1):
        for _ in range(calls):
            np.matmul(ga, gb, out=go)                 # a layer alone between two team phases
            t0 = time.perf_counter_ns()
            for i in range(parts):
                part(i)
            alone.append(time.perf_counter_ns() - t0)
            np.matmul(ga, gb, out=go)
            joined.clear()
            t0 = time.perf_counter_ns()
            team.run(part, parts, 2)
            region.append(time.perf_counter_ns() - t0)
            if joined:
                join.append(joined[0] - t0)
    us = 1e-3
    return {"alone_us": _q(alone, .5) * us, "region_us": _q(region, .5) * us,
            "region_p90_us": _q(region, .9) * us, "joined": len(join) / calls,
            "join_us": _q(join, .5) * us, "join_p90_us": _q(join, .9) * us,
            "speedup": _q(alone, .5) / _q(region, .5)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--part-rows", type=int, default=2048)
    p.add_argument("--parts", type=int, default=8)
    a = p.parse_args(argv)
    c = control()
    print(f"control: 2 x 20 one-thread GEMMs, in sequence {c['seq_ms']:.1f} ms, on 2 threads "
          f"{c['par_ms']:.1f} ms: {c['best']:.2f}x best round, {c['median']:.2f}x median round")
    h = handover(a.calls, a.part_rows, a.parts)
    print(f"hand-over: {a.parts} parts of {a.part_rows}x64 @ 64x64 alone {h['alone_us']:.0f} us, on the team "
          f"{h['region_us']:.0f} us (p90 {h['region_p90_us']:.0f}; {h['speedup']:.2f}x); the worker took "
          f"parts in {100 * h['joined']:.0f}% of calls, joining {h['join_us']:.0f} us after the call "
          f"(p90 {h['join_p90_us']:.0f})")


if __name__ == "__main__":
    main()

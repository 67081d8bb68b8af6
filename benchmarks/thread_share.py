"""Which nodes of a model run on more than one thread: ``python -m benchmarks.thread_share MODEL
[--threads 2] [--calls 100] [--runner srcore_codegen_standard]``.

Loads the runner (an srcore runner of ``benchmarks.cell``) at ``--threads`` intra-op threads and
runs ``--calls`` calls through the interpreter, reading per node its wall time, the process's CPU
time (``time.process_time``) and the calling thread's (``time.thread_time``). Their ratio ("par") is
how many threads the node kept busy: 1.0 ran on the caller alone, 2.0 on two threads throughout.
Unlike wall time it says something on a loaded machine too (what the load-time timing chose, not
how fast it runs). Prints per op (summed) and the slowest nodes with their kernels.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def node_times(sm, xs, calls: int, warmup: int = 20) -> list[tuple]:
    """``[(wall ms, process CPU ms, caller CPU ms, op, kernel repr), ...]`` per node per call."""
    from srcore.runtime.metrics import _TimingRunner, timed_runtime

    class Runner(_TimingRunner):
        def __init__(self, *a):
            super().__init__(*a)
            self.cpu, self.me = defaultdict(float), defaultdict(float)

        def run_block(self, info, values):
            for step in self._steps[info.index]:
                pn = step[1]
                t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
                self._run_steps((step,), values)
                self.times[id(pn)] += time.perf_counter() - t0
                self.cpu[id(pn)] += time.process_time() - c0
                self.me[id(pn)] += time.thread_time() - m0

    rt, r = timed_runtime(sm, Runner)
    for _ in range(warmup):
        rt(*xs)
    r.times.clear(), r.cpu.clear(), r.me.clear()
    for _ in range(calls):
        rt(*xs)
    rows = []
    for b in sm.blocks:
        for pn in b.nodes:
            fn = pn.fn
            rows.append((r.times[id(pn)] / calls * 1e3, r.cpu[id(pn)] / calls * 1e3, r.me[id(pn)] / calls * 1e3,
                         fn.op if fn else pn.node.kind, repr(getattr(fn, "fn", None))[:90]))
    return rows


def report(rows: list[tuple], top: int = 30) -> str:
    tot = [sum(x[i] for x in rows) for i in range(3)]
    lines = [f"TOTAL wall {tot[0]:.2f} ms  process cpu {tot[1]:.2f}  caller cpu {tot[2]:.2f}"]
    agg: dict = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for w, c, m, op, _ in rows:
        a = agg[op]
        a[0], a[1], a[2], a[3] = a[0] + w, a[1] + c, a[2] + m, a[3] + 1
    for op, a in sorted(agg.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"{op:40s} wall {a[0]:8.3f} proc {a[1]:8.3f} caller {a[2]:8.3f} "
                     f"par {a[1] / max(a[2], 1e-9):4.2f} x{a[3]}")
    lines.append("")
    for w, c, m, op, k in sorted(rows, key=lambda x: -x[0])[:top]:
        lines.append(f"{w:7.3f} {c:7.3f} {m:7.3f} par {c / max(m, 1e-9):4.2f} {op:28s} {k}")
    return "\n".join(lines)


def main(argv=None) -> int:
    from threadpoolctl import threadpool_limits

    from .artifacts import load_inputs
    from .cell import SRCORE_RUNNERS, load_runner
    from .prepare import prepare

    ap = argparse.ArgumentParser(prog="python -m benchmarks.thread_share", description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--runner", default="srcore_codegen_standard", choices=sorted(SRCORE_RUNNERS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    with threadpool_limits(args.threads):
        prepare(args.model, out)
        art = out / "artifacts" / args.model
        names, xs = load_inputs(art)
        extra: dict = {}
        load_runner(args.model, args.runner, args.threads, art, xs, names, extra)
        print(report(node_times(extra["_sm"], xs, args.calls)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

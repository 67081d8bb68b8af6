"""trt_like's layers timed inside the model's sequence and alone, at 2+ threads, clean calls only:
``python -m benchmarks.sequence_profile MODEL [--runners trt_like,trt_like_nchwc_split] [--threads 2]
[--sequences 300]``.

The build times each layer alone (the same layer back to back: its team awake, its data in cache);
an engine call runs the layers one after the other. Here each runner's plan runs as a sequence of its
layers (``Plan.step_calls``: private buffers, each layer timed), the runners' sequences alternating,
and a sequence counts only if no thread of the process waited for a core through it (< 2 %,
``benchmarks.clean_calls``); then each layer runs alone, 20 calls back to back per layer, clean calls
only. Printed per layer: its tactic, median in the sequence and alone (µs), per runner; and the
engine's whole call (clean median). Artifacts come from ``benchmarks.prepare``.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from pathlib import Path

from .clean_calls import MAX_WAIT, clean_medians, raise_priority
from .engine_gap import engine_plan

ROOT = Path(__file__).resolve().parent.parent


def in_sequence(calls: dict, sequences: int, max_wait: float = MAX_WAIT) -> tuple[dict, dict]:
    """Per runner, each step's wall times (ns) over the clean sequences, and ``(clean, run)`` counts.
    ``calls``: runner -> ``Plan.step_calls`` list; the runners' sequences alternate."""
    from srcore import clock

    kept = {r: [[] for _ in c] for r, c in calls.items()}
    counts = {r: [0, 0] for r in calls}
    gc.disable()
    try:
        for _ in range(sequences):
            for r, steps in calls.items():
                times = [0] * len(steps)
                d0 = clock.thread_delays()
                for i, (_, fn, args) in enumerate(steps):
                    t = time.perf_counter_ns()
                    fn(*args)
                    times[i] = time.perf_counter_ns() - t
                waited = clock.delay_between(d0, clock.thread_delays())
                counts[r][1] += 1
                if waited is not None and waited < max_wait * sum(times):
                    counts[r][0] += 1
                    for i, t in enumerate(times):
                        kept[r][i].append(t)
    finally:
        gc.enable()
    return kept, counts


def alone(steps, calls_each: int = 20, max_wait: float = MAX_WAIT) -> list[list[int]]:
    """Each step called ``calls_each`` times back to back: the wall times (ns) of its clean calls."""
    from srcore import clock

    out = []
    gc.disable()
    try:
        for _, fn, args in steps:
            fn(*args)
            ts = []
            for _ in range(calls_each):
                w, waited = clock.call_waited(lambda: fn(*args))
                if waited is not None and waited < max_wait * w:
                    ts.append(w)
            out.append(ts)
    finally:
        gc.enable()
    return out


def _med(ts) -> float:
    return statistics.median(ts) / 1e3 if ts else float("nan")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sequence_profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--runners", default="trt_like,trt_like_nchwc_split")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sequences", type=int, default=300, help="sequences run per runner")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--priority", action="store_true", help="run at nice -20 in an autogroup of its own")
    ap.add_argument("--nice", type=int, default=-20, help="the nice of --priority (a shared machine's rule may be -10)")
    a = ap.parse_args(argv)
    if a.priority:
        import sys

        rc = raise_priority("benchmarks.sequence_profile", sys.argv[1:] if argv is None else list(argv), a.nice)
        if rc is not None:
            raise SystemExit(rc)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    from threadpoolctl import threadpool_limits

    from .artifacts import load_inputs
    from .cell import load_runner
    from .prepare import prepare

    prepare(a.model, a.out)
    art = a.out / "artifacts" / a.model
    names, xs = load_inputs(art)
    runners = a.runners.split(",")
    with threadpool_limits(a.threads):
        extras = {r: {} for r in runners}
        fns = {r: load_runner(a.model, r, a.threads, art, xs, names, extras[r]) for r in runners}
        plans, steps = {}, {}
        for r in runners:
            plans[r], ins = engine_plan(extras[r]["_sm"], xs)
            if plans[r] is None:
                raise SystemExit(f"{a.model} {r}: no trt_like engine in the module")
            steps[r] = plans[r].step_calls(*ins)
        for r in runners:   # compile and warm
            for _, fn, args in steps[r]:
                fn(*args)
        whole = clean_medians(fns, rounds=5, min_clean=30)
        seq, counts = in_sequence(steps, a.sequences)
        solo = {r: alone(steps[r]) for r in runners}
    print(f"{a.model}, {a.threads} threads, load {os.getloadavg()[0]:.1f}")
    for r in runners:
        c, n = counts[r]
        s_sum = sum(_med(t) for t in seq[r][:]) if c else float("nan")
        a_sum = sum(_med(t) for t in solo[r] if t)
        print(f"{r}: engine call {whole.median_us(r):.0f} µs ({whole.summary(r)}); layers in sequence "
              f"{s_sum:.0f} µs ({c}/{n} clean sequences), alone {a_sum:.0f} µs")
        for (step, _, _), ts, ta in zip(steps[r], seq[r], solo[r]):
            print(f"  {_med(ts):8.1f} {_med(ta):8.1f} ({len(ta):2d})  {plans[r].label(step)}")


if __name__ == "__main__":
    main()

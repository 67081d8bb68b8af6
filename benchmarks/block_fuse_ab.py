"""A/B of a mobile net's blocks as one ``block_omp`` step each (``tactics/block_fuse.py``) against the same
engine's layer-by-layer plan, in one process, at 2+ threads:
``python -m benchmarks.block_fuse_ab [--model mobilenet_v3] [--threads 2] [--sequences 200] [--priority]``.

One build (blocks excluded, so its layers' tactics are the usual ones); the second plan is that plan with
every block fused, forced (the build's own choice times the two plans once; here they alternate over many
calls). Printed: each plan's whole call (clean calls only, ``benchmarks.clean_calls``), and per block its
time in the sequence as one step against the sum of its layers' steps in the other plan's sequence
(clean sequences only, ``benchmarks.sequence_profile``). Both plans' outputs are checked equal.
"""
from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from .sequence_profile import in_sequence

ROOT = Path(__file__).resolve().parent.parent


def fused_plan(plan):
    """``plan`` with every block of its steps as one ``block_omp`` step (forced: not timed)."""
    from srcore_trt_like.builder.plan import Plan, Step
    from srcore_trt_like.tactics import block_fuse as bf

    steps = plan.steps
    found = bf.find_blocks(plan.net, steps)
    new, at, spans = [], 0, []
    for a, b in found:
        layer = bf.block_layer(steps[a:b])
        new += steps[at:a]
        spans.append((a, b, len(new)))
        new.append(Step(layer, bf.NAME, bf.kernel(layer, plan.net, solo=[s.fn for s in steps[a:b]]).fn))
        at = b
    new += steps[at:]
    return Plan(plan.net, new, plan.contexts), spans


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.block_fuse_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenet_v3")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sequences", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--priority", action="store_true", help="run in an autogroup of its own at --nice")
    ap.add_argument("--nice", type=int, default=-10)
    ap.add_argument("--team", action="store_true", help="every governed region on its team (no fallback to the caller)")
    a = ap.parse_args(argv)
    if a.priority:
        import sys

        from .clean_calls import raise_priority

        rc = raise_priority("benchmarks.block_fuse_ab", sys.argv[1:] if argv is None else list(argv), a.nice)
        if rc is not None:
            raise SystemExit(rc)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import numpy as np
    from threadpoolctl import threadpool_limits

    from .artifacts import load_inputs
    from .cell import load_runner
    from .clean_calls import clean_medians
    from .engine_gap import engine_plan
    from .prepare import prepare

    prepare(a.model, a.out)
    art = a.out / "artifacts" / a.model
    names, xs = load_inputs(art)
    from srcore_trt_like.kernels import threads as _threads

    if a.team:
        _threads.Governor.team = lambda self: self.n
    with threadpool_limits(a.threads):
        extra: dict = {}
        load_runner(a.model, "trt_like_no_block_fuse", a.threads, art, xs, names, extra)
        plan, ins = engine_plan(extra["_sm"], xs)
        if plan is None:
            raise SystemExit(f"{a.model}: no trt_like engine")
        fused, spans = fused_plan(plan)
        if not spans:
            raise SystemExit(f"{a.model}: no blocks in its plan")
        want = plan.run(*ins)
        got = fused.run(*ins)
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert np.array_equal(w, g), "the fused plan's result differs"
        calls = {"layers": lambda: plan.run(*ins), "blocks": lambda: fused.run(*ins)}
        for fn in calls.values():
            fn()
        c0 = dict(_threads.COUNTS)
        whole = clean_medians(calls, rounds=a.rounds, min_clean=30)
        steps = {"layers": plan.step_calls(*ins), "blocks": fused.step_calls(*ins)}
        seq, counts = in_sequence(steps, a.sequences)
        regions = {k: _threads.COUNTS[k] - c0.get(k, 0) for k in _threads.COUNTS}
    print(f"{a.model}, {a.threads} threads, load {os.getloadavg()[0]:.1f}, {len(spans)} blocks; governed regions "
          f"{regions}{' (forced on the team)' if a.team else ''}")
    for k in calls:
        print(f"  {k}: whole call {whole.median_us(k):.0f} µs ({whole.summary(k)}); "
              f"{counts[k][0]}/{counts[k][1]} clean sequences")
    if not (counts["layers"][0] and counts["blocks"][0]):
        return
    med = lambda ts: statistics.median(ts) / 1e3   # noqa: E731
    # step_calls skips views: index the plans' steps with kernels only
    idx_l = [i for i, s in enumerate(plan.steps) if s.fn is not None]
    idx_b = [i for i, s in enumerate(fused.steps) if s.fn is not None]
    pos_l, pos_b = {i: j for j, i in enumerate(idx_l)}, {i: j for j, i in enumerate(idx_b)}
    tot_l = tot_b = 0.0
    for a_, b_, k in spans:
        lay = sum(med(seq["layers"][pos_l[i]]) for i in range(a_, b_) if i in pos_l)
        blk = med(seq["blocks"][pos_b[k]])
        tot_l, tot_b = tot_l + lay, tot_b + blk
        label = fused.label(fused.steps[k])
        print(f"  {lay:8.1f} -> {blk:8.1f} µs ({blk / lay:.2f}x)  {label}, {b_ - a_} layers")
    print(f"  blocks in the sequence: {tot_l:.0f} -> {tot_b:.0f} µs ({tot_b / tot_l:.2f}x)")


if __name__ == "__main__":
    main()

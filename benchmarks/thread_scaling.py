"""1 -> 2 intra-op threads in one process: each runner loaded at 1 and at 2 threads side by side, rounds
rotating, best-round medians; ``python -m benchmarks.thread_scaling [--models a,b] [--runners ort,trt_like]
[--rounds 9]``.

On a machine other jobs load, a 1-thread and a 2-thread figure from two runs land in different
phases of that load; here both engines of a runner (and ONNX Runtime's two sessions, as the yardstick)
are timed in the same rounds. The process runs at one BLAS thread (``OMP/MKL/OPENBLAS_NUM_THREADS=1``);
a runner's 2-thread instance is built under ``threadpool_limits(2)``, which is what trt_like reads its
intra-op count from (``kernels/threads.count``), and ORT takes its count per session. Runners: ``ort``
and the engine runners of ``benchmarks.cell`` (``trt_like``, ...).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .families_ab import interleaved_best

ROOT = Path(__file__).resolve().parent.parent


def measure(models, runners, rounds: int, out: Path) -> list[dict]:
    """Per model, every runner's best-round median at 1 and 2 threads (``{runner}_{t}t_us``), printed too."""
    from threadpoolctl import threadpool_limits

    from .artifacts import flatten_outputs, load_inputs, load_refs, max_rel_err
    from .cell import load_runner
    from .prepare import prepare

    rows = []
    for name in models:
        prepare(name, out)
        art = out / "artifacts" / name
        names, xs = load_inputs(art)
        refs = load_refs(art)
        calls, keep = {}, []
        for r in runners:
            for t in (1, 2):
                extra: dict = {}
                with threadpool_limits(t):
                    fn = load_runner(name, r, t, art, xs, names, extra)
                err = max_rel_err(flatten_outputs(fn()), refs)
                if not err <= 1e-3:
                    raise AssertionError(f"{name} {r} at {t} threads: wrong output (max relative error {err:.2e})")
                calls[(r, t)] = fn
                keep.append(extra)
        best = interleaved_best(calls, rounds)
        line = [f"{name:16s}"]
        for r in runners:
            one, two = best[(r, 1)], best[(r, 2)]
            line.append(f"{r} 1t {one:9.1f} µs 2t {two:9.1f} µs ({one / two:.2f}x)")
        if "ort" in runners:
            for r in runners:
                if r != "ort":
                    line.append(f"{r}÷ort 2t {best[(r, 2)] / best[('ort', 2)]:.2f}x")
        print("   ".join(line), flush=True)
        rows.append({"model": name, **{f"{r}_{t}t_us": v for (r, t), v in best.items()}})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.thread_scaling", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet_small,mobilenet_v3,bert_encoder,mlp_wide")
    ap.add_argument("--runners", default="ort,trt_like")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    measure(args.models.split(","), args.runners.split(","), args.rounds, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What timing the NCHW16c layout at build costs: trt_like's load (``StaticModule`` build and warm-up
run) with each run's layout timed (runner ``trt_like``) against the layout forced on (``trt_like_nchwc``,
the rule before the choice was timed), in one process, arms alternating:

    python -m benchmarks.layout_build [--models mobilenet_v3,resnet_small] [--rounds 3]

Each round builds every arm twice: with an empty timing cache (a fresh ``SRCORE_CACHE_DIR``: every
tactic and run timed) and again on the cache the first build filled (nothing timed). Printed per model
and arm: the process CPU ms of each (median and best of the rounds after one warm-up round) and the
timed arm's NCHW16c runs as its engine describes them (which layout each run took, and both times).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARMS = ("trt_like_nchwc", "trt_like")


def _load(model: str, runner: str, art: Path, xs, names) -> tuple[float, list[str]]:
    from srcore_trt_like.tactics import timing_cache

    from .cell import load_runner

    timing_cache._caches.clear()
    extra: dict = {}
    t0 = time.process_time()
    load_runner(model, runner, 1, art, xs, names, extra)
    cpu = time.process_time() - t0
    runs = [line.strip() for e in extra["_sm"].partition.engines for line in e.description.splitlines()
            if "NCHW16c run" in line]
    return cpu, runs


def main(argv=None) -> None:
    from threadpoolctl import threadpool_limits

    from .artifacts import load_inputs
    from .prepare import prepare

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mobilenet_v3,resnet_small")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args(argv)
    with threadpool_limits(1), tempfile.TemporaryDirectory(prefix="layout_build_") as tmp:
        for model in args.models.split(","):
            prepare(model, args.out)
            art = args.out / "artifacts" / model
            names, xs = load_inputs(art)
            cold: dict[str, list[float]] = {a: [] for a in ARMS}
            warm: dict[str, list[float]] = {a: [] for a in ARMS}
            runs: list[str] = []
            for r in range(args.rounds + 1):
                for arm in ARMS if r % 2 else ARMS[::-1]:
                    os.environ["SRCORE_CACHE_DIR"] = os.path.join(tmp, f"{model}-{arm}-{r}")
                    c, found = _load(model, arm, art, xs, names)
                    w, _ = _load(model, arm, art, xs, names)
                    if r:   # round 0 warms up (numba's code loaded, the model read)
                        cold[arm].append(c)
                        warm[arm].append(w)
                    if arm == "trt_like":
                        runs = found
            for arm in ARMS:
                print(f"{model} {arm}: empty timing cache {statistics.median(cold[arm]) * 1e3:.0f} ms CPU "
                      f"(best {min(cold[arm]) * 1e3:.0f}), filled {statistics.median(warm[arm]) * 1e3:.0f} ms "
                      f"(best {min(warm[arm]) * 1e3:.0f})", flush=True)
            for line in runs:
                print(f"  {line}")


if __name__ == "__main__":
    main()

"""Runners of the wider set side by side in one process, rounds alternating:
``python -m benchmarks.families_ab [--models a,b] [--runners eager,ort,srcore_codegen_standard,trt_like]
[--rounds 15] [--threads 1]``.

``benchmarks.run`` times every (model, runner) cell in its own process, one after the other; on a
machine that other jobs load, two cells of a model land in different phases of that load and
their ratio moves by up to 2x between runs of the same code. Here all runners of a model are
loaded in one process (``--threads`` N: OMP/BLAS/MKL and torch, ORT's intra-op threads) and timed in
rounds whose order rotates, each runner's output checked against the reference first; each
runner's best-round median is printed with its ratio to torch eager and to ONNX Runtime. The
artifacts are ``benchmarks.prepare``'s, as for ``benchmarks.run``.

A runner named ``R+nosimd`` is runner ``R`` loaded with ``SRCORE_CPU_SIMD_CONV=0`` (the cpu
plugin without its SIMD direct conv: A/B in one process), ``R+nomkl`` with ``SRCORE_CPU_MKL=0``
(the cpu plugin's GEMMs on numpy's BLAS only), ``R+nosplit`` with ``SRCORE_CPU_SPLIT_GEMM=0`` (its
products of non-constant tensors never split over its part pool), ``R+noretry`` with
``SRCORE_CPU_TIMING_RETRY=0`` (its load-time wall-clock timing without the extra rounds of a loser
that only ran while a core was taken), ``R+noevidence`` with ``SRCORE_CPU_TIMING_EVIDENCE=0`` (its
2-thread split choices on this build's timings alone, not pooled with the earlier builds'), ``R+nolate`` with
``SRCORE_CPU_LATE_COMPILED=0`` (its small nodes on numpy's kernels, no first-call timing against the compiled
ones), ``R+nolinrows`` with ``SRCORE_CPU_LINEAR_ROWS=0`` (its constant-weight linears and fused encoder
layers' tails never split by rows with their epilogues in the parts), ``R+nosplithold`` with
``SRCORE_CPU_SPLIT_HOLD=0`` (its convs' split other paths leave the products they keep whole on numpy's
threaded BLAS, as before 2026-11-29), ``R+noresizesplit`` with ``SRCORE_CPU_RESIZE_SPLIT=0`` (its 2-D
resizes never split by planes over the intra-op threads), ``R+nosplitfill`` with ``SRCORE_CPU_SPLIT_FILL=0``
(its split SIMD convs copy the whole input on the caller before the parts, not each part its rows),
``R+nonative`` with ``SRCORE_CPU_NATIVE_SPLIT=0`` (its 2-thread products never split over the native team,
whose parts call OpenBLAS without the GIL: the Python part pool's splits and one thread only, as before
2026-11-29 evening), ``R+nonativelayer`` with ``SRCORE_CPU_NATIVE_LAYER=0`` (its fused encoder layers never
run their products on the native team), ``R+omp`` with
``SRCORE_CPU_OMP_TEAM=1`` (its part pool on numba's OpenMP team, not srcore.conv's Python one), ``R+tblas``
with ``SRCORE_CPU_THREADED_BLAS=1`` (at more than one thread its unsplit products on numpy's threaded
BLAS, as before 2026-11-28 noon, not on the calling thread), ``R+tightwait`` with ``SRCORE_TRT_LIKE_TIGHT_WAIT=1``
(trt_like's run-time governor counting a team region at 1.5x its best as a wait, as before 2026-11-29), ``R+smallsplit``
with ``SRCORE_TRT_LIKE_SMALL_SGEMM_SPLIT=1`` (trt_like's ``packed_sgemm_split`` offered on GEMMs from 4 M
multiply-adds at more than one thread, below the intra-op policy's threshold too), ``R+native`` with
``SRCORE_TRT_LIKE_NATIVE_GEMM=1`` (trt_like's GEMMs under that threshold offered ``native_rows`` /
``native_cols``, split over the native team); suffixes chain
(``R+nomkl+nosplit``: the cpu plugin's products all on numpy's threaded BLAS). ``--cpu-time`` times each call in CPU
time of the process (``time.process_time_ns``) instead of wall time: on a machine other jobs keep
busy, the time a call waits for a core drops out (only the cache and memory contention stays);
meaningful at 1 thread (at more it sums the threads' time). ``--clean`` times each call in wall
time with the run delay of the process's threads and keeps only calls during which they waited for a
core less than 2 % of the call (``benchmarks.clean_calls``): each runner's figure is then the median
of its kept calls (clean, and after a clean call of the same runner: warm caches), printed with how
many of how many calls were kept and the median of all calls; rounds go on past ``--rounds`` until
every runner has ``--clean-min`` kept calls (at most 5x the rounds). ``--priority`` runs the
process in its own scheduler autogroup at nice -20 (most calls are then clean under load). For
more than one thread on a loaded machine.

Above 1 thread (``--children auto``, the default; ``per-runner`` forces it, ``one`` keeps every
runner here) each runner gets a child process of its own, as in ``benchmarks.openvino_ab``: beside
each other, a runner's idle pool (ORT's spinning workers, torch's OpenMP, the cpu plugin's
OpenBLAS) holds the core the next runner's second thread needs (resnet_small's trt_like at 2
threads: 1.97x ORT beside the others, 1.34x alone). Each turn then starts with ``--settle`` seconds
of untimed calls; ``--clean`` reads the threads' waits in the child.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RUNNERS = ("eager", "ort", "srcore_codegen_standard", "trt_like")
#: runner name suffix -> the environment variable set (to "0") while that runner loads
SUFFIX_OFF = {"+nosimd": "SRCORE_CPU_SIMD_CONV", "+nomkl": "SRCORE_CPU_MKL", "+nosplit": "SRCORE_CPU_SPLIT_GEMM",
              "+noretry": "SRCORE_CPU_TIMING_RETRY", "+noevidence": "SRCORE_CPU_TIMING_EVIDENCE",
              "+nolate": "SRCORE_CPU_LATE_COMPILED", "+nolinrows": "SRCORE_CPU_LINEAR_ROWS",
              "+nosplithold": "SRCORE_CPU_SPLIT_HOLD", "+noresizesplit": "SRCORE_CPU_RESIZE_SPLIT",
              "+nosplitfill": "SRCORE_CPU_SPLIT_FILL", "+nonative": "SRCORE_CPU_NATIVE_SPLIT",
              "+nonativelayer": "SRCORE_CPU_NATIVE_LAYER"}
#: runner name suffix -> the environment variable set to "1" while that runner loads
SUFFIX_ON = {"+omp": "SRCORE_CPU_OMP_TEAM", "+tblas": "SRCORE_CPU_THREADED_BLAS",
             "+tightwait": "SRCORE_TRT_LIKE_TIGHT_WAIT", "+smallsplit": "SRCORE_TRT_LIKE_SMALL_SGEMM_SPLIT",
             "+native": "SRCORE_TRT_LIKE_NATIVE_GEMM"}


def peer_ratios(best: dict) -> dict:
    """``{"runner/peer": ratio}`` of every runner's time in ``best`` to each peer's (torch eager, ORT)
    present there, peers first in that order."""
    peers = [p for p in ("eager", "ort") if p in best]
    return {f"{r}/{p}": best[r] / best[p] for p in peers for r in best if r not in ("eager", "ort")}


def interleaved_best(calls: dict, rounds: int, cpu_time: bool = False) -> dict:
    """Per key of ``calls`` (zero-argument callables), the best over ``rounds`` rounds of the median
    call time in µs; each round runs every callable ``n`` times (~50 ms of the first, at least
    ``MIN_CALLS``), after ``TURN_SETTLE_S`` of untimed calls that refill the caches the previous
    callable used, the order rotating between rounds so machine load hits all alike; ``cpu_time``:
    process CPU time, not wall (``benchmarks.openvino_ab`` times its turns the same way)."""
    from .openvino_ab import TURN_SETTLE_S, n_calls_for, per_call, settle

    clock = time.process_time_ns if cpu_time else time.perf_counter_ns
    first = next(iter(calls.values()))
    first()
    n = n_calls_for(per_call(first, clock), 0.05)
    best = {k: float("inf") for k in calls}
    order = list(calls)
    gc.disable()
    try:
        for i in range(rounds):
            for k in order[i % len(order):] + order[:i % len(order)]:
                fn, times = calls[k], []
                settle(fn, TURN_SETTLE_S, clock)
                for _ in range(n):
                    t = clock()
                    fn()
                    times.append(clock() - t)
                times.sort()
                best[k] = min(best[k], times[len(times) // 2] / 1e3)
    finally:
        gc.enable()
    return best


def _strip_suffixes(runner: str) -> tuple[str, list[str]]:
    """``(base runner, [variables to set to "0"])`` of a runner name with any :data:`SUFFIX_OFF`
    suffixes (``R+nomkl+nosplit``)."""
    found = []
    while (suffix := next((x for x in SUFFIX_OFF if runner.endswith(x)), None)) is not None:
        runner = runner[:-len(suffix)]
        found.append(SUFFIX_OFF[suffix])
    return runner, found


def _suffix_env(runner: str) -> tuple[str, dict[str, str]]:
    """``(base runner, {variable: value})`` of a runner name with :data:`SUFFIX_OFF` ("0") and
    :data:`SUFFIX_ON` ("1") suffixes in any order (``R+omp+nomkl``)."""
    env: dict[str, str] = {}
    while True:
        on = next((x for x in SUFFIX_ON if runner.endswith(x)), None)
        if on is not None:
            runner, env[SUFFIX_ON[on]] = runner[:-len(on)], "1"
            continue
        base, off = _strip_suffixes(runner)
        if not off:
            return runner, env
        runner = base
        env.update({var: "0" for var in off})


def measure_children(name: str, runners, rounds: int, out: Path, threads: int, cpu_time: bool = False,
                     clean_min: int | None = None, settle: float | None = None):
    """``(best µs per runner, CleanTally or None)``: every runner of ``name`` in a child process of
    its own (``benchmarks.openvino_ab``'s ``RunnerChild``, loaded one after another, its output
    checked there), taking turns in rotating rounds; each turn starts with ``settle`` seconds of
    untimed calls (the previous runner's idle pool stops spinning meanwhile). Without ``clean_min``
    a runner's figure is its best turn median, with it the median of its kept calls over the turns
    (``clean_rounds``: the threads' waits read in the child)."""
    from types import SimpleNamespace

    from .clean_calls import calls_for, clean_rounds
    from .openvino_ab import SETTLE_S, RunnerChild, n_calls_for

    settle = SETTLE_S if settle is None else settle
    opts = SimpleNamespace(out=str(out), cpu_time=cpu_time)
    started, children, first = [], {}, None
    try:
        for r in runners:
            base, env = _suffix_env(r)
            c = RunnerChild(name, base, threads, opts, env=env)
            started.append(c)
            hello = c.reply()
            rep = hello["report"]
            if rep["status"] == "skipped":
                print(f"{name} {r}: skipped ({rep.get('note', '')})", flush=True)
                continue
            if rep["status"] != "ok":
                raise AssertionError(f"{name} {r}: wrong output (max relative error {rep['max_rel_err']:.2e})")
            children[r] = c
            first = hello["per_call"] if first is None else first
        if not children:
            return {}, None
        if clean_min is not None:
            tally = clean_rounds({r: (lambda n, c=c: c.clean_turn(n, settle)) for r, c in children.items()},
                                 calls_for(first), rounds, clean_min)
            return {r: tally.median_us(r) for r in children}, tally
        n = n_calls_for(first, 0.05)   # as interleaved_best: ~50 ms of the first
        best = {r: float("inf") for r in children}
        order = list(children)
        for i in range(rounds):
            for r in order[i % len(order):] + order[:i % len(order)]:
                best[r] = min(best[r], children[r].turn(n, settle) * 1e6)
        return best, None
    finally:
        for c in started:
            c.close()


def measure(models, runners, rounds: int, out: Path, threads: int = 1, cpu_time: bool = False,
            clean_min: int | None = None, children: str = "auto", settle: float | None = None) -> list[dict]:
    from threadpoolctl import threadpool_limits

    from .artifacts import flatten_outputs, load_inputs, load_refs, max_rel_err
    from .cell import Skip, load_runner
    from .openvino_ab import per_runner
    from .prepare import prepare

    rows = []
    with threadpool_limits(threads):
        for name in models:
            prepare(name, out)
            if per_runner(children, threads):
                best, tally = measure_children(name, runners, rounds, out, threads, cpu_time, clean_min, settle)
                rows.append(_row(name, threads, best, tally))
                continue
            art = out / "artifacts" / name
            names, xs = load_inputs(art)
            refs = load_refs(art)
            calls, keep = {}, []
            for r in runners:
                extra: dict = {}
                base, env = _suffix_env(r)
                before = {var: os.environ.get(var) for var in env}
                os.environ.update(env)
                try:
                    fn = load_runner(name, base, threads, art, xs, names, extra)
                except Skip as why:
                    print(f"{name} {r}: skipped ({why})", flush=True)
                    continue
                finally:
                    for var, was in before.items():
                        os.environ.pop(var, None)
                        if was is not None:
                            os.environ[var] = was
                err = max_rel_err(flatten_outputs(fn()), refs)
                if not err <= 1e-3:
                    raise AssertionError(f"{name} {r}: wrong output (max relative error {err:.2e})")
                calls[r] = fn
                keep.append(extra)
            if clean_min is None:
                best, tally = interleaved_best(calls, rounds, cpu_time), None
            else:
                from .clean_calls import clean_medians

                tally = clean_medians(calls, rounds, clean_min)
                best = {r: tally.median_us(r) for r in calls}
            rows.append(_row(name, threads, best, tally))
    return rows


def _row(name: str, threads: int, best: dict, tally) -> dict:
    """The result row of a model (µs per runner, kept/seen calls with a tally, ratios), printed."""
    row = {"model": name, "threads": threads}
    if tally is None:
        line = [f"{name:16s} {threads}t"] + [f"{r} {v:9.1f} µs" for r, v in best.items()]
    else:
        row.update({f"{r}_clean": [tally.count(r), tally.seen[r]] for r in best})
        line = [f"{name:16s} {threads}t"] + [f"{r} {v:9.1f} µs ({tally.summary(r)})" for r, v in best.items()]
    row.update({f"{r}_us": v for r, v in best.items()})
    ratios = peer_ratios(best)
    row.update(ratios)
    line += [f"{k.replace('/', '÷')} {v:.2f}x" for k, v in ratios.items()]
    print("   ".join(line), flush=True)
    return row


def main(argv=None) -> int:
    from .families import FAMILIES

    ap = argparse.ArgumentParser(prog="python -m benchmarks.families_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(FAMILIES))
    ap.add_argument("--runners", default=",".join(DEFAULT_RUNNERS))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads of every runner (default 1)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--cpu-time", action="store_true",
                    help="time calls in process CPU time (1 thread; loaded machines)")
    ap.add_argument("--clean", action="store_true",
                    help="median of the calls no thread waited through for a core (2+ threads; loaded machines)")
    ap.add_argument("--clean-min", type=int, default=30, help="kept calls wanted per runner (--clean)")
    ap.add_argument("--children", choices=("auto", "one", "per-runner"), default="auto",
                    help="all runners in this process, or each in a child of its own (auto: above 1 thread)")
    ap.add_argument("--settle", type=float, default=None,
                    help="seconds of untimed calls that start each turn of a runner's child (default 0.25)")
    ap.add_argument("--priority", action="store_true",
                    help="run in an autogroup of its own at nice -20 (a new session; needs CAP_SYS_NICE)")
    args = ap.parse_args(argv)
    if args.priority:
        from .clean_calls import raise_priority

        rc = raise_priority("benchmarks.families_ab", sys.argv[1:] if argv is None else list(argv))
        if rc is not None:
            return rc
    from .cell import RUNNERS

    unknown = [r for r in args.runners.split(",") if _suffix_env(r)[0] not in RUNNERS]
    if unknown:   # a typo would otherwise only print "skipped" among the timings
        ap.error(f"unknown runner(s) {', '.join(unknown)}; known: {', '.join(RUNNERS)} "
                 f"(suffixes {', '.join([*SUFFIX_OFF, *SUFFIX_ON])})")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    measure(args.models.split(","), args.runners.split(","), args.rounds, Path(args.out), args.threads,
            args.cpu_time, args.clean_min if args.clean else None, args.children, args.settle)
    return 0


if __name__ == "__main__":
    sys.exit(main())

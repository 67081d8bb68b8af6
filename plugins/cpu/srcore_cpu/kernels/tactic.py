"""Choosing between kernels by timing them on this machine, at load.

A matcher with two ways to run a node and a static input shape times both on a zero input of that
shape and keeps the faster: interleaved rounds (each candidate once per round, the order rotating,
so a slow phase of a shared machine hits both), each candidate's best round. Used only where the
crossover depends on the machine (e.g. a direct grouped conv against im2col + GEMM at 8-16 channels
per group); where one way wins by an order of magnitude everywhere, the matcher takes it without
timing.

The clock is the core's (``srcore.plugin.clock``, as trt_like's builder): at one intra-op thread
the candidates run on the calling thread alone and are charged its own time (CPU time plus time
blocked, not the time other processes held the core: on a loaded machine that is noise, and a
candidate that sleeps or waits is still charged it); at more threads a candidate may run on the
part pool or BLAS's threads, invisible to the caller's clocks, so all are timed in wall time.

**Split against threaded BLAS** (:func:`split_vs_blas`). At more than one thread a product split
over the part pool (one-thread BLAS in each part, OpenBLAS held at one thread meanwhile) is timed
against numpy's threaded BLAS. After a threaded OpenBLAS call its idle worker spins ~0.1 s on the
core the split's second part needs; a module whose products all run split never wakes it, so the
split is timed first, once that worker sleeps, and the threaded BLAS after.

**Evidence across builds** (:func:`pooled`, :mod:`.evidence`). The 2-thread split-or-not choices
(MKL's column split, split matmuls, row and pointwise splits) pass a key of their problem; their wall
times are then pooled with every earlier timing of it on this machine (each candidate's least), as
trt_like's timing cache does: one build's rounds, all disturbed by another process on the second
core, no longer move bert_encoder's linears to one thread (4 against 22-23 split nodes in builds
minutes apart before). And on the wall clock a loser after the first round is cut only when that
round was clean (a disturbed split is not clearly slower).

**Two passes over a module's convs** (:func:`deferred`). Timed conv by conv, every conv's part-pool
candidates waited ~0.1 s for the worker its predecessor's threaded-BLAS candidate had woken (~2 s of
resnet_small's load at 2 threads). So the part-pool and one-thread candidates of every conv are timed
as its kernel is built (the first pass: no threaded BLAS call runs in it, so one wait at most), and
the threaded-BLAS ones of all of them, with each conv's choice, at the first call of any of them
(the second pass, at load when the module's warm-up runs, else at the first call).
"""
from __future__ import annotations

import os
import threading
import time
import weakref

from srcore.plugin import clock as _clock

#: a round not *clean*, and the pauses before a losing candidate's extra rounds: the core's (``srcore.clock``,
#: as trt_like's builder uses them)
TAKEN, RETRY_PAUSES_S = _clock.TAKEN, _clock.RETRY_PAUSES_S
#: a first round this far apart decides (two-stage timing: clear losers get no more rounds)
CLEAR = 1.5
#: a candidate whose first call takes at least WARM_LONG_S seconds is called again, up to WARM_CALLS
#: calls or WARM_S seconds in all, before its rounds, and charged the last of those calls, not the
#: first: audio_conv1d's 3199-sample conv on im2col + MKL ran its first calls at 1.8-2.3 ms, then
#: 1.2-1.6 (Sapphire Rapids, thread CPU time), and a best of six calls could still hold the slow ones
WARM_LONG_S = 0.5e-3
WARM_S = 4e-3
WARM_CALLS = 4


def fastest(candidates: dict, args: tuple, rounds: int = 5, budget_s: float = 0.05, clock: str | None = None,
            threaded_blas=(), key=None):
    """The name of the fastest of ``candidates`` (name -> callable) on ``args``; every candidate runs
    once first (warm-up, and a candidate that raises is dropped). Fewer rounds when one call takes
    more than ``budget_s / rounds``. ``clock``, ``threaded_blas``: see :func:`timings`. ``key``: the
    timing problem's parts (:func:`.evidence.key_of`); on the wall clock the times are then pooled
    with every earlier timing of it (:func:`pooled`)."""
    best = timings(candidates, args, rounds=rounds, budget_s=budget_s, clock=clock, threaded_blas=threaded_blas)
    best = pooled(key, best, clock)
    return min(best, key=best.get) if best else None


def pooled(key, times: dict, clock: str | None = None) -> dict:
    """``times`` pooled with the evidence of earlier timings of problem ``key`` (a tuple of plain parts,
    :mod:`.evidence`): each candidate's least time over them all. Only wall-clock times (at one thread the
    thread's own clock is not disturbed by other processes) and only with a ``key``; else ``times``."""
    if key is None or not times or (clock or default_clock()) != "wall":
        return times
    from . import evidence

    return evidence.pooled(evidence.key_of("tactic", *key, sorted(times)), times)


def default_clock() -> str:
    """The clock for candidates built now: ``"cpu"`` at one intra-op thread, else ``"wall"``."""
    from .parallel import intra_op_threads

    return _clock.clock_for(intra_op_threads())


def timings(candidates: dict, args: tuple, rounds: int = 5, budget_s: float = 0.05, clock: str | None = None,
            threaded_blas=()) -> dict:
    """``{name: best seconds}`` of the candidates that ran (see :func:`fastest`). ``clock``: ``"cpu"``
    or ``"wall"`` (:mod:`srcore.clock`), by default :func:`default_clock`. ``threaded_blas``: names of
    candidates that may call numpy's threaded BLAS; on the wall clock the others (part-pool splits,
    one-thread kernels) are timed first, once OpenBLAS's worker sleeps, and these after, as
    :func:`split_vs_blas` does: interleaved, a split ran beside the worker the threaded candidate had
    just woken, spinning on the core its second part needs (resnet_small's 3x3 convs at 2 threads:
    the SIMD conv split 1.79 ms against 1.74 one thread timed so, 1.05 against 1.77 alone). When all
    of them are, their rounds stay interleaved; either way the worker they woke is noted
    (``parallel.note_threaded_blas``) for the next part-pool timing to wait out."""
    from srcore.plugin import KernelError

    clock = _clock.check(clock or default_clock(), "tactic.timings", KernelError)
    late = {k: fn for k, fn in candidates.items() if k in threaded_blas}
    if clock == "wall" and late:
        from . import parallel as _par

        if len(late) == len(candidates):   # all threaded: the worker they wake is noted for the next split
            best = _rounds(candidates, args, rounds, budget_s, clock, alone=False)
        else:
            _par.wait_blas_idle()
            best = _rounds({k: fn for k, fn in candidates.items() if k not in late}, args, rounds, budget_s, clock)
            best.update(_rounds(late, args, rounds, budget_s, clock))
        _par.note_threaded_blas()
        return best
    return _rounds(candidates, args, rounds, budget_s, clock, alone=False)


_queue: list = []                 # weak references to the second pass's jobs, in the order queued
_queue_lock = threading.RLock()   # held for a whole second pass: a kernel's first call waits for it


def deferred(candidates: dict, args, threaded_blas, finish, before=None, rounds: int = 5, budget_s: float = 0.05):
    """A kernel chosen in two passes (the module doc): the candidates not in ``threaded_blas`` timed
    now on the wall clock, once OpenBLAS's worker sleeps; at the second pass (:func:`run_deferred`,
    which the returned kernel's first call runs) ``before()`` (the caller's own threaded-BLAS
    choices, which those candidates depend on), the rounds of the ``threaded_blas`` ones, then
    ``finish(best)`` (``{name: best seconds}`` of every candidate that ran, as :func:`timings`)
    returns the kernel the returned one calls from then on (its ``tactic`` too). ``args``: a
    callable returning the arguments, called in each pass (not kept in between)."""
    from . import parallel as _par

    _par.wait_blas_idle()
    best = _rounds({k: fn for k, fn in candidates.items() if k not in threaded_blas}, args(), rounds, budget_s,
                   "wall")
    late = {k: fn for k, fn in candidates.items() if k in threaded_blas}

    def job():
        if before is not None:
            before()
        best.update(_rounds(late, args(), rounds, budget_s, "wall"))
        fn = finish(best)
        kernel.tactic = getattr(fn, "tactic", None)
        kernel.chosen = fn

    def kernel(*a, **kw):
        fn = kernel.chosen
        if fn is None:
            run_deferred()
            if kernel.chosen is None:   # (its own job, called from inside the second pass)
                job()
            fn = kernel.chosen
        return fn(*a, **kw)
    kernel.chosen = kernel.tactic = None   # the kernel finish returned, its tactic
    kernel.job = job         # the queue holds it weakly: a kernel dropped before its first call is not timed
    with _queue_lock:
        _queue.append(weakref.ref(job))
    return kernel


def run_deferred() -> None:
    """The second pass: every queued job (:func:`deferred`) in order, then OpenBLAS's worker noted
    as woken (``parallel.note_threaded_blas``) once."""
    with _queue_lock:
        jobs = [j for j in (r() for r in _queue) if j is not None]
        _queue.clear()
        if not jobs:
            return
        from . import parallel as _par

        try:
            for j in jobs:
                j()
        finally:
            _par.note_threaded_blas()


def _timed(fn, args: tuple, reps: int, clock: str, clean: set, name) -> float:
    """Seconds per call of ``fn(*args)`` over ``reps`` calls on ``clock``; on the wall clock ``name``
    joins ``clean`` when the process's threads waited for a core less than :data:`TAKEN` of the round
    (or the kernel does not say: no schedstat)."""
    if clock != "wall":
        return _clock.per_call_ns(lambda: fn(*args), reps, clock) * 1e-9
    ns, waited = _clock.wall_ns_waited(lambda: fn(*args), reps)
    if waited is None or waited < TAKEN:
        clean.add(name)
    return ns * 1e-9


def _retry_taken(candidates: dict, args: tuple, best: dict, clean: set, reps: int = 1) -> None:
    """Wall clock: a candidate that lost with no clean round (every round of it ran while a core was
    taken, its time an upper bound) gets up to ``len(RETRY_PAUSES_S)`` more rounds, each after a
    pause and an untimed call. Under load a split's second part waits for a core in every round and
    the one-thread candidate wins: at load 7-8 on the 2-vCPU Sapphire Rapids VM the cpu plugin built
    bert_encoder at 2 threads with 16 of its 20 linears on one thread (per node, process CPU time =
    the caller's; docs/performance-log.md, "issue 16 at 2 threads, where the cpu plugin's time
    goes"). The winner's time, a lower bound of the true, is kept as is.
    ``SRCORE_CPU_TIMING_RETRY=0``: no retry (an A/B of it: ``benchmarks.families_ab``'s ``+noretry``)."""
    if os.environ.get("SRCORE_CPU_TIMING_RETRY", "1") == "0":
        return
    for pause in RETRY_PAUSES_S:
        lead = min(best, key=best.get, default=None)
        again = [k for k in best if k not in clean and k != lead]
        if not again:
            return
        time.sleep(pause)
        for k in again:
            try:
                candidates[k](*args)            # untimed: the pool's threads slept through the pause
                best[k] = min(best[k], _timed(candidates[k], args, reps, "wall", clean, k))
            except Exception:  # noqa: BLE001 - (it ran before: a failure now only loses its retry)
                continue


def _rounds(candidates: dict, args: tuple, rounds: int, budget_s: float, clock: str, alone: bool = True) -> dict:
    """:func:`timings`' rounds on ``clock`` (``alone``: a lone candidate gets its rounds too, a best of
    several calls like the others', not one call). On the wall clock, candidates with no clean round
    that lost get more (:func:`_retry_taken`)."""
    best: dict = {}
    clean: set = set()
    for name, fn in candidates.items():
        try:
            t = _timed(fn, args, 1, clock, clean, name)
        except Exception:  # noqa: BLE001 - a candidate that cannot run this shape is not chosen
            continue
        # a candidate of a millisecond or more warms up for WARM_S, the first call's time dropped
        spent, calls = t, 1
        while t >= WARM_LONG_S and spent < WARM_S and calls < WARM_CALLS:
            clean.discard(name)   # (only the warm rounds count)
            t = _timed(fn, args, 1, clock, clean, name)
            spent, calls = spent + t, calls + 1
        best[name] = t
    if not best or (len(best) == 1 and not alone):
        return best
    names = list(best)
    rounds = max(1, min(rounds, int(budget_s / max(min(best.values()), 1e-7))))
    for r in range(rounds):
        for k in range(len(names)):
            name = names[(k + r) % len(names)]
            best[name] = min(best[name], _timed(candidates[name], args, 1, clock, clean, name))
        if r == 0:   # two stages: what is CLEAR-times slower after a round gets no more rounds
            lead = min(best[n] for n in names)
            # (on the wall clock only a clean loser: a split whose round waited for a core is not
            # clearly slower, and cut after one round it lost every disturbed build)
            names = [n for n in names if best[n] <= CLEAR * lead or (clock == "wall" and n not in clean)]
            if len(names) <= 1 and not (alone and len(best) == 1):
                break
    if clock == "wall" and len(best) > 1:
        _retry_taken(candidates, args, best, clean)
    return best


def split_vs_blas(split, blas, rounds: int = 5, reps: int = 1, budget_s: float | None = 0.05,
                  key=None) -> tuple[float, float]:
    """:func:`_split_vs_blas`, the two times pooled (:func:`pooled`) with the earlier timings of problem
    ``key`` (None: this timing's alone)."""
    t_split, t_blas = _split_vs_blas(split, blas, rounds, reps, budget_s)
    best = pooled(key, {"split": t_split, "blas": t_blas}, "wall")
    return best["split"], best["blas"]


def _split_vs_blas(split, blas, rounds: int = 5, reps: int = 1, budget_s: float | None = 0.05) -> tuple[float, float]:
    """Best wall seconds per call of ``split`` (a part-pool candidate) and ``blas`` (numpy's BLAS on
    the calling thread alone where ``parallel.blas_on_caller()``, the default at more than one
    thread: rounds interleaved; else threaded), each round ``reps`` calls. Threaded (see the module
    doc): the split's rounds first, once OpenBLAS's
    worker sleeps (``parallel.wait_blas_idle``), then the threaded BLAS's, which stop after the
    first round when that is :data:`CLEAR`-times either way. Fewer rounds when a round takes more
    than ``budget_s / rounds`` (None: always ``rounds``)."""
    from . import parallel as _par

    if _par.blas_on_caller():
        # one team (parallel.blas_on_caller): the kernel runs its BLAS path on the calling thread
        # alone, so that is what the split is timed against, rounds interleaved (no worker woken)
        blas = _par.on_caller(blas)
        split(), blas()
        best = {split: float("inf"), blas: float("inf")}
        n = rounds if budget_s is None else max(1, min(rounds, int(budget_s / max(
            _clock.per_call_ns(split, reps, "wall") * 1e-9 * reps, 1e-7))))
        clean: set = set()
        for _ in range(n):
            for fn in best:
                best[fn] = min(best[fn], _timed(fn, (), reps, "wall", clean, fn))
        _retry_taken({fn: fn for fn in best}, (), best, clean, reps)
        return best[split], best[blas]
    _par.wait_blas_idle()
    t_split, rounds = split_rounds(split, rounds, reps, budget_s)
    t_blas = blas_rounds(blas, t_split, rounds, reps)
    _par.note_threaded_blas()
    return t_split, t_blas


def split_rounds(split, rounds: int = 5, reps: int = 1, budget_s: float | None = 0.05) -> tuple[float, int]:
    """:func:`split_vs_blas`' split half (no wait): its best wall seconds per call and the rounds
    :func:`blas_rounds` then gets."""
    split()                                     # warm-up (buffers, packing, the pool's workers)
    t_split = _clock.per_call_ns(split, reps, "wall") * 1e-9
    if budget_s is not None:
        rounds = max(1, min(rounds, int(budget_s / max(t_split * reps, 1e-7))))
    for _ in range(rounds - 1):
        t_split = min(t_split, _clock.per_call_ns(split, reps, "wall") * 1e-9)
    return t_split, rounds


def blas_rounds(blas, t_split: float, rounds: int, reps: int = 1) -> float:
    """:func:`split_vs_blas`' threaded-BLAS half (no note): its best wall seconds per call, cut
    short when the first round is :data:`CLEAR`-times either way from ``t_split``."""
    blas()
    t_blas = _clock.per_call_ns(blas, reps, "wall") * 1e-9
    for _ in range(rounds - 1):
        if t_blas > CLEAR * t_split or CLEAR * t_blas < t_split:
            break
        t_blas = min(t_blas, _clock.per_call_ns(blas, reps, "wall") * 1e-9)
    return t_blas

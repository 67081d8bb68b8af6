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
"""
from __future__ import annotations

from srcore.plugin import clock as _clock

#: a first round this far apart decides (two-stage timing: clear losers get no more rounds)
CLEAR = 1.5
#: a candidate whose first call takes at least WARM_LONG_S seconds is called again, up to WARM_CALLS
#: calls or WARM_S seconds in all, before its rounds, and charged the last of those calls, not the
#: first: audio_conv1d's 3199-sample conv on im2col + MKL ran its first calls at 1.8-2.3 ms, then
#: 1.2-1.6 (Sapphire Rapids, thread CPU time), and a best of six calls could still hold the slow ones
WARM_LONG_S = 0.5e-3
WARM_S = 4e-3
WARM_CALLS = 4


def fastest(candidates: dict, args: tuple, rounds: int = 5, budget_s: float = 0.05, clock: str | None = None):
    """The name of the fastest of ``candidates`` (name -> callable) on ``args``; every candidate runs
    once first (warm-up, and a candidate that raises is dropped). Fewer rounds when one call takes
    more than ``budget_s / rounds``. ``clock``: see :func:`timings`."""
    best = timings(candidates, args, rounds=rounds, budget_s=budget_s, clock=clock)
    return min(best, key=best.get) if best else None


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
    the SIMD conv split 1.79 ms against 1.74 one thread timed so, 1.05 against 1.77 alone)."""
    from srcore.plugin import KernelError

    clock = _clock.check(clock or default_clock(), "tactic.timings", KernelError)
    late = {k: fn for k, fn in candidates.items() if k in threaded_blas}
    if clock == "wall" and late and len(late) < len(candidates):
        from . import parallel as _par

        _par.wait_blas_idle()
        best = _rounds({k: fn for k, fn in candidates.items() if k not in late}, args, rounds, budget_s, clock)
        best.update(_rounds(late, args, rounds, budget_s, clock))
        _par.note_threaded_blas()
        return best
    return _rounds(candidates, args, rounds, budget_s, clock, alone=False)


def _rounds(candidates: dict, args: tuple, rounds: int, budget_s: float, clock: str, alone: bool = True) -> dict:
    """:func:`timings`' rounds on ``clock`` (``alone``: a lone candidate gets its rounds too, a best of
    several calls like the others', not one call)."""
    best: dict = {}
    for name, fn in candidates.items():
        try:
            t = _clock.per_call_ns(lambda fn=fn: fn(*args), 1, clock) * 1e-9
        except Exception:  # noqa: BLE001 - a candidate that cannot run this shape is not chosen
            continue
        # a candidate of a millisecond or more warms up for WARM_S, the first call's time dropped
        spent, calls = t, 1
        while t >= WARM_LONG_S and spent < WARM_S and calls < WARM_CALLS:
            t = _clock.per_call_ns(lambda fn=fn: fn(*args), 1, clock) * 1e-9
            spent, calls = spent + t, calls + 1
        best[name] = t
    if not best or (len(best) == 1 and not alone):
        return best
    names = list(best)
    rounds = max(1, min(rounds, int(budget_s / max(min(best.values()), 1e-7))))
    for r in range(rounds):
        for k in range(len(names)):
            name = names[(k + r) % len(names)]
            fn = candidates[name]
            best[name] = min(best[name], _clock.per_call_ns(lambda fn=fn: fn(*args), 1, clock) * 1e-9)
        if r == 0:   # two stages: what is CLEAR-times slower after a round gets no more rounds
            lead = min(best[n] for n in names)
            names = [n for n in names if best[n] <= CLEAR * lead]
            if len(names) <= 1 and not (alone and len(best) == 1):
                break
    return best


def split_vs_blas(split, blas, rounds: int = 5, reps: int = 1, budget_s: float | None = 0.05) -> tuple[float, float]:
    """Best wall seconds per call of ``split`` (a part-pool candidate) and ``blas`` (numpy's threaded
    BLAS), each round ``reps`` calls (see the module doc): the split's rounds first, once OpenBLAS's
    worker sleeps (``parallel.wait_blas_idle``), then the threaded BLAS's, which stop after the
    first round when that is :data:`CLEAR`-times either way. Fewer rounds when a round takes more
    than ``budget_s / rounds`` (None: always ``rounds``)."""
    from . import parallel as _par

    def per_call():
        return _clock.per_call_ns(fn, reps, "wall") * 1e-9
    _par.wait_blas_idle()
    fn = split
    fn()                                        # warm-up (buffers, packing, the pool's workers)
    t_split = per_call()
    if budget_s is not None:
        rounds = max(1, min(rounds, int(budget_s / max(t_split * reps, 1e-7))))
    for _ in range(rounds - 1):
        t_split = min(t_split, per_call())
    fn = blas
    fn()
    t_blas = per_call()
    for _ in range(rounds - 1):
        if t_blas > CLEAR * t_split or CLEAR * t_blas < t_split:
            break
        t_blas = min(t_blas, per_call())
    _par.note_threaded_blas()
    return t_split, t_blas

"""The one timing algorithm of the builder: how candidate tactics are compared on a layer's real
shapes (:func:`best_times`), used for the engine's layers (:func:`.choose.rank`) and for conv
tactics on their own (:func:`time_tactics`, the benchmarks' entry point).

**Which clock** (:mod:`srcore.clock`, ``srcore.plugin.clock``): a layer built for one intra-op
thread runs on the calling thread alone, so its candidates are charged that thread's own time
(``"cpu"``: CPU time plus blocked time, not the time another process held the core; at load ~7 on
2 vCPUs a build on the wall clock gave Winograd resnet_small's 256-channel 8x8 layer at 809 us where
simd_direct_oc runs 600-700). Layers built for more threads are timed in wall time (``"wall"``):
the team's work is on other threads, which the caller's clocks do not see.

**A taken core** (wall time only). A threaded candidate whose second thread waits for its core
looks slow, and a one-thread candidate wins: on the 2-vCPU Sapphire Rapids VM the cpu runner's
OpenBLAS worker, left spinning in the same process, moved resnet_small's 2-thread engine between
16.5 and 20.9 ms by the timing cache it wrote. So each wall-time round also reads how long the
process's threads waited for a core (``run_delay``, :func:`srcore.clock.wall_ns_waited`); a round
in which they waited :data:`TAKEN` of its time or more does not count as *clean*. A candidate
with no clean round gets up to ``len(RETRY_PAUSES_S)`` more rounds, each after a pause (a
spinning pool's threads go to sleep), in which governed single-region kernels run on their
team even if a wait put them on the calling thread (:class:`..kernels.threads.timing_on_team`; a
regular round in which one ran held there is not clean either). The regular rounds time the
kernels as they run, governors deciding: a whole NCHW16c run timed with every region forced on
its team under load 7-9 took 10-52 ms against 2.8-7.4 ms governed, and mobilenet_v3 lost its
blocked layout. A choice is *trusted* when every candidate but the
fastest had a clean round (a disturbed time is an upper bound: if the fastest's is one, it still
won); an untrusted one is still taken, but the builder does not keep it in the timing cache and
says so (:func:`watch`, :class:`Taken`).
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Callable, Iterator

import attrs
import numpy as np

from srcore.plugin import clock as _clock

from ..errors import TacticSpecError
from ..kernels import threads as _threads

# Bytes per second at which a layer's weights stream in during a whole-network run. Timing a layer
# on its own leaves its weights in cache; in a network they are not (resnet_small's laid-out weights
# are ~60 MB), and a tactic with larger weights (Winograd's transformed ones: 16/9 or 4x) pays for
# it: measured back to back on this machine, each layer was slower than alone by its weight bytes
# at 10-27 GB/s (resnet's 512-channel 3x3 layer: F(2x2) 2.3 -> 3.4 ms, im2col 2.3 -> 2.65 ms).
WEIGHT_STREAM_BYTES_PER_S = 16e9

#: timing rounds per layer (after one warm-up call of each candidate)
ROUNDS = 3
#: the least time one candidate's calls take in a round: a shorter call runs several times a round
#: (its time is their mean), so that a round's reading is not one call's, at the mercy of one
#: interrupt or a cache the previous candidate left cold; at most :data:`MAX_CALLS` calls
MIN_ROUND_S = 1e-3
MAX_CALLS = 64
#: candidates whose best time is within this factor of the fastest's race on for :data:`RACE_ROUNDS`
#: more rounds among themselves: three samples can all land in one noisy phase of a shared machine
#: (a build under load 7 chose im2col + BLAS for a 14x14 NCHW16c conv that runs 3.5x slower than
#: the direct kernel it beat, seen once in five builds); the close ones are where a wrong pick lands
RACE = 1.3
RACE_ROUNDS = 2
#: a round not *clean*, and the pauses before a candidate's extra rounds: the core's (``srcore.clock``)
TAKEN, RETRY_PAUSES_S = _clock.TAKEN, _clock.RETRY_PAUSES_S


@attrs.frozen
class Taken:
    """One :func:`best_times` in which a core was taken during some candidate's round."""

    #: candidates timed (that did not fail)
    candidates: int
    #: extra rounds run for the candidates with no clean round
    retried: int
    #: candidates, the fastest aside, still without a clean round: the choice is not trusted
    untrusted: int

    @property
    def trusted(self) -> bool:
        return self.untrusted == 0


_seen = threading.local()


@contextlib.contextmanager
def watch() -> Iterator[list[Taken]]:
    """A list that collects a :class:`Taken` for every :func:`best_times` of this thread in the block
    that found a core taken (blocks nest: each collects its own)."""
    found: list[Taken] = []
    stack = _seen.__dict__.setdefault("stack", [])
    stack.append(found)
    try:
        yield found
    finally:
        stack.remove(found)


def trusted(found: list[Taken]) -> bool:
    """Whether the choices timed in a :func:`watch` block may be kept (none untrusted)."""
    return all(t.trusted for t in found)


def clock_for(threads: int) -> str:
    """The clock to time a layer built for ``threads`` intra-op threads on (:mod:`srcore.clock`)."""
    return _clock.clock_for(threads)


def best_times(calls: list[Callable[[], object]], rounds: int = ROUNDS, *, skip_failures: bool = False,
               weight_bytes: list[int] | None = None,
               bandwidth: float | None = WEIGHT_STREAM_BYTES_PER_S,
               clock: str | None = None, min_round: float = MIN_ROUND_S) -> list[float]:
    """Seconds per call of each of ``calls``: one warm-up call each (compiled code loads, scratch
    grows; a call shorter than ``min_round`` runs once more, timed, to set how many calls make
    its round), then ``rounds`` rounds in which every candidate runs its calls, the order
    rotating per round so no candidate always follows the same one, then :data:`RACE_ROUNDS` more
    among those within :data:`RACE` of the fastest; a candidate's time is its best round (the least disturbed on a shared machine), plus ``weight_bytes[i]`` streamed in at
    ``bandwidth`` bytes/s (``None``: hot timing only). ``clock``: ``"cpu"`` or ``"wall"`` (see
    the module doc), by default :func:`clock_for` the intra-op thread count; in wall time, rounds
    while a core was taken are re-run and reported (module doc, :func:`watch`). With
    ``skip_failures`` a call that raises in its warm-up gets ``inf`` (a tactic that cannot run
    these shapes is just not chosen); otherwise it raises."""
    clock = _clock.check(clock or clock_for(_threads.count()), "best_times", TacticSpecError)
    return _best_times(calls, rounds, skip_failures, weight_bytes, bandwidth, clock, min_round)


def _best_times(calls, rounds, skip_failures, weight_bytes, bandwidth, clock, min_round) -> list[float]:
    min_ns = min_round * 1e9
    ok, reps = [], [1] * len(calls)
    for i, call in enumerate(calls):
        try:
            t = _clock.per_call_ns(call, 1, clock)      # the warm-up
            if t < min_ns:
                t = _clock.per_call_ns(call, 1, clock)  # warm: how many such calls fill a round
                if t < min_ns:
                    reps[i] = min(MAX_CALLS, math.ceil(min_ns / max(t, 1)))
            ok.append(i)
        except Exception:
            if not skip_failures:
                raise
    best = [math.inf] * len(calls)
    # a round on the calling thread's own clock leaves out what other threads did: clean by construction
    clean = [clock != "wall"] * len(calls)

    def round_of(i: int) -> None:
        if clock == "wall":
            held = _threads.COUNTS["held"]
            ns, waited = _clock.wall_ns_waited(calls[i], reps[i])
            # a governed kernel held on the caller after a wait is no clean sample of the split either
            clean[i] = clean[i] or (waited is None or waited < TAKEN) and _threads.COUNTS["held"] == held
        else:
            ns = _clock.per_call_ns(calls[i], reps[i], clock)
        best[i] = min(best[i], ns * 1e-9)

    for r in range(max(1, rounds)):
        for k in range(len(ok)):
            round_of(ok[(k + r) % len(ok)])
    if ok:
        fastest = min(best[i] for i in ok)
        close = [i for i in ok if best[i] <= RACE * fastest]
        if len(close) > 1:
            for r in range(RACE_ROUNDS):
                for k in range(len(close)):
                    round_of(close[(k + r) % len(close)])
    retried = 0
    for pause in RETRY_PAUSES_S:
        again = [i for i in ok if not clean[i]]
        if not again:
            break
        time.sleep(pause)
        retried += 1
        with _threads.timing_on_team():
            for i in again:
                calls[i]()              # untimed: the team's threads slept through the pause
                round_of(i)
    if retried:
        fastest = min(ok, key=best.__getitem__)
        taken = Taken(len(ok), retried, sum(1 for i in ok if not clean[i] and i != fastest))
        for found in getattr(_seen, "stack", ()):
            found.append(taken)
    if weight_bytes is not None and bandwidth:
        best = [b + w / bandwidth for b, w in zip(best, weight_bytes)]
    return best


def time_tactics(tactics, spec, rounds: int = ROUNDS, seed: int = 0,
                 weight_bandwidth: float | None = WEIGHT_STREAM_BYTES_PER_S) -> list[tuple[str, float]]:
    """``[(name, seconds), ...]`` fastest first: conv tactics (:mod:`srcore_trt_like.conv`) timed on
    random inputs of ``spec`` by :func:`best_times` (``weight_bandwidth``: see there). Costs at least
    ``rounds + 1`` calls per tactic."""
    if not tactics:
        raise TacticSpecError("time_tactics: no tactics to time")
    names = [t.name for t in tactics]
    if len(set(names)) != len(names):
        raise TacticSpecError(f"time_tactics: tactic names must be unique, got {names}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(spec.x_shape, np.float32)
    out_shape = tactics[0].out_shape
    out = np.empty(out_shape, np.float32)
    residual = rng.standard_normal(out_shape, np.float32) if getattr(spec, "residual", False) else None
    calls = [(lambda t=t: t(x, out, residual)) if residual is not None else (lambda t=t: t(x, out)) for t in tactics]
    best = best_times(calls, rounds, weight_bytes=[getattr(t, "weight_bytes", 0) for t in tactics],
                      bandwidth=weight_bandwidth)
    return sorted(zip(names, best), key=lambda p: p[1])


def random_input(tensor, rng) -> np.ndarray:
    """Random data for a timed input: normal floats (float16 / bfloat16 ones too: a half input an engine
    casts), or a quantized tensor's integers over its range."""
    if tensor.dtype in ("float32", "float16", "bfloat16"):
        return rng.standard_normal(tensor.shape).astype(tensor.storage)
    if tensor.dtype == "bool":
        return rng.random(tensor.shape) < 0.5
    if tensor.dtype in ("int64", "int32"):   # indices: 0 is in range of every dim an index reads
        return np.zeros(tensor.shape, tensor.storage)
    info = np.iinfo(tensor.storage)
    return rng.integers(info.min, info.max, tensor.shape, endpoint=True, dtype=tensor.storage)

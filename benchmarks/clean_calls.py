"""Wall time of the calls no thread of the process waited through: multi-threaded timings on a loaded
machine (``families_ab --clean``, ``benchmarks.sequence_profile``).

On the shared 2-vCPU machine a 2-thread call's wall time is the load's more than the code's (ORT's
resnet_small at 2 threads took 68-147 ms under load against 12.6 ms quiet), and CPU time sums the
threads. Here each call is timed in wall time together with the run delay of every thread of the
process (:func:`srcore.clock.call_waited`: the time a runnable thread waited for a core, from
Linux's schedstat); a call is *clean* when the threads waited less than ``max_wait`` of its wall
time, and only clean calls count. Clean calls are those during which the process had its cores, so
their median approximates an idle machine's; the caveats are the cache and memory bandwidth
other processes share, and that a longer call is less often clean (the kept calls lean fast when a
call's time varies). How many calls were kept is reported with every figure.
"""
from __future__ import annotations

import gc
import statistics
import time
from typing import Callable

import attrs

from srcore import clock as _clock

#: a call is clean if the process's threads waited for a core less than this fraction of its wall time
MAX_WAIT = 0.02


class NoSchedstat(RuntimeError):
    """The kernel reports no per-thread run delay (``/proc/self/task/*/schedstat``)."""


@attrs.define
class CleanTally:
    """Per key, the wall times (ns) of the clean calls and how many calls were timed (``seen``), and
    the median wall time of all of them (``all_median_us``: what load does to the plain figure)."""

    max_wait: float = MAX_WAIT
    kept: dict[str, list[int]] = attrs.field(factory=dict)
    seen: dict[str, int] = attrs.field(factory=dict)
    walls: dict[str, list[int]] = attrs.field(factory=dict)

    def add(self, key: str, wall_ns: int, waited_ns: int | None) -> bool:
        """Count one call of ``key``; keep its wall time if it was clean. Whether it was kept."""
        if waited_ns is None:
            raise NoSchedstat("no per-thread run delay on this kernel: clean calls cannot be told apart")
        self.seen[key] = self.seen.get(key, 0) + 1
        self.walls.setdefault(key, []).append(wall_ns)
        clean = waited_ns < self.max_wait * wall_ns
        if clean:
            self.kept.setdefault(key, []).append(wall_ns)
        return clean

    def count(self, key: str) -> int:
        return len(self.kept.get(key, ()))

    def median_us(self, key: str) -> float:
        """Median wall time of ``key``'s clean calls in µs (nan without any)."""
        kept = self.kept.get(key)
        return statistics.median(kept) / 1e3 if kept else float("nan")

    def all_median_us(self, key: str) -> float:
        """Median wall time of all ``key``'s calls in µs, clean or not (nan without any)."""
        walls = self.walls.get(key)
        return statistics.median(walls) / 1e3 if walls else float("nan")

    def summary(self, key: str) -> str:
        return f"{self.count(key)}/{self.seen.get(key, 0)} clean, all {self.all_median_us(key):.0f}"


def clean_medians(calls: dict[str, Callable[[], object]], rounds: int, min_clean: int = 30,
                  max_rounds: int | None = None, max_wait: float = MAX_WAIT,
                  timed: Callable[[Callable[[], object]], tuple[int, int | None]] | None = None,
                  calls_per_round: int | None = None) -> CleanTally:
    """Time every callable of ``calls`` in rounds whose order rotates (each round ``n`` calls of each,
    ~0.1 s of the first), at least ``rounds`` rounds and then on until each has ``min_clean`` clean
    calls or ``max_rounds`` (default ``5 * rounds``) rounds ran. ``timed`` times one call as
    ``(wall ns, waited ns)`` (default :func:`srcore.clock.call_waited`; tests pass stand-in clocks)."""
    timed = timed or _clock.call_waited
    max_rounds = max(rounds, max_rounds if max_rounds is not None else 5 * rounds)
    tally = CleanTally(max_wait)
    order = list(calls)
    n = calls_per_round
    if n is None:   # ~0.1 s of the first callable on a free machine: the fastest of 3 calls
        once = []
        for _ in range(3):
            t0 = time.perf_counter()
            calls[order[0]]()
            once.append(time.perf_counter() - t0)
        n = max(3, min(2000, int(0.1 / max(min(once), 1e-6))))
    gc.disable()
    try:
        for i in range(max_rounds):
            if i >= rounds and all(tally.count(k) >= min_clean for k in order):
                break
            for k in order[i % len(order):] + order[:i % len(order)]:
                for _ in range(n):
                    tally.add(k, *timed(calls[k]))
    finally:
        gc.enable()
    return tally

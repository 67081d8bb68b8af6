"""Wall time of the calls no thread of the process waited through: multi-threaded timings on a loaded
machine (``families_ab --clean``, ``benchmarks.sequence_profile``).

On the shared 2-vCPU machine a 2-thread call's wall time is the load's more than the code's (ORT's
mobilenet_v3 at 2 threads: median 35 ms a call at load 9 against ~1.3 ms with its cores), and CPU
time sums the threads. Here each call is timed in wall time together with the run delay of every
thread of the process (Linux's schedstat: the time a runnable thread waited for a core); a call is
*clean* when the threads waited less than ``max_wait`` of its wall time, and it is *kept* when the
call of the same runner just before it and the gap between them were clean too: a call after its
threads were switched out starts with caches another process used (ORT's mobilenet_v3 at load 10:
clean calls 2.55 ms, kept ones 1.41 ms). The median of kept calls approximates an idle machine's;
the caveats are the memory bandwidth and L3 other processes share, and that a longer call is less
often kept (the kept calls lean fast when a call's time varies). How many calls were kept is
reported with every figure. At plain priority under load 10 few calls are kept (8 of 1,500 for
ORT's mobilenet_v3); :func:`raise_priority` (``--priority``) runs the process in its own scheduler
autogroup at nice -20 (-15 gave 973 of 1,500).
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
    """Per key, the wall times (ns) of the kept calls, how many calls were timed (``seen``) and the
    wall times of all of them (``all_median_us``: what load does to the plain figure)."""

    max_wait: float = MAX_WAIT
    kept: dict[str, list[int]] = attrs.field(factory=dict)
    seen: dict[str, int] = attrs.field(factory=dict)
    walls: dict[str, list[int]] = attrs.field(factory=dict)

    def clean(self, wall_ns: int, waited_ns: int | None) -> bool:
        """Whether the threads waited less than ``max_wait`` of ``wall_ns`` for a core."""
        if waited_ns is None:
            raise NoSchedstat("no per-thread run delay on this kernel: clean calls cannot be told apart")
        return waited_ns < self.max_wait * wall_ns

    def add(self, key: str, wall_ns: int, waited_ns: int | None, warm: bool = True) -> bool:
        """Count one call of ``key`` (``warm``: the call before it and the gap were clean); keep its
        wall time if it was clean and warm. Whether it was clean."""
        clean = self.clean(wall_ns, waited_ns)
        self.seen[key] = self.seen.get(key, 0) + 1
        self.walls.setdefault(key, []).append(wall_ns)
        if clean and warm:
            self.kept.setdefault(key, []).append(wall_ns)
        return clean

    def add_turn(self, key: str, records) -> None:
        """Count a turn of :func:`clean_turn` records ``(wall, waited, gap waited)`` of ``key``: a
        call is warm when the call before it in the turn and the gap between them were clean (a
        turn's first call never is)."""
        last = False
        for wall, waited, gap in records:
            warm = last and gap is not None and self.clean(wall, gap)
            last = self.add(key, wall, waited, warm)

    def count(self, key: str) -> int:
        return len(self.kept.get(key, ()))

    def median_us(self, key: str) -> float:
        """Median wall time of ``key``'s kept calls in µs (nan without any)."""
        kept = self.kept.get(key)
        return statistics.median(kept) / 1e3 if kept else float("nan")

    def all_median_us(self, key: str) -> float:
        """Median wall time of all ``key``'s calls in µs, kept or not (nan without any)."""
        walls = self.walls.get(key)
        return statistics.median(walls) / 1e3 if walls else float("nan")

    def summary(self, key: str) -> str:
        return f"{self.count(key)}/{self.seen.get(key, 0)} kept, all {self.all_median_us(key):.0f}"


def clean_turn(fn: Callable[[], object], n: int, delays: Callable[[], dict[str, int] | None] | None = None,
               wall_clock: Callable[[], int] | None = None) -> list[tuple[int, int | None, int | None]]:
    """``n`` calls of ``fn``, each as ``(wall ns, ns the threads waited for a core during it, ns they
    waited since the call before it)`` (the last None for the first call; the waits None without
    schedstat), for :meth:`CleanTally.add_turn`. Runs in the process whose threads run ``fn`` (a
    runner's child: ``benchmarks.openvino_ab``'s ``serve``)."""
    delays = delays or _clock.thread_delays
    wall_clock = wall_clock or _clock.WALL_CLOCK
    out, d_end = [], None
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(n):
            d0 = delays()
            w0 = wall_clock()
            fn()
            w = wall_clock() - w0
            d1 = delays()
            out.append((w, _clock.delay_between(d0, d1), None if d_end is None else _clock.delay_between(d_end, d0)))
            d_end = d1
    finally:
        if was:
            gc.enable()
    return out


def clean_rounds(turns: dict[str, Callable[[int], list]], n: int, rounds: int, min_clean: int = 30,
                 max_rounds: int | None = None, max_wait: float = MAX_WAIT) -> CleanTally:
    """Rounds of turns whose order rotates, each turn ``turns[key](n)`` -> :func:`clean_turn`
    records (in this process or a runner's child), at least ``rounds`` rounds and then on until each
    key has ``min_clean`` kept calls or ``max_rounds`` (default ``5 * rounds``) rounds ran."""
    max_rounds = max(rounds, max_rounds if max_rounds is not None else 5 * rounds)
    tally = CleanTally(max_wait)
    order = list(turns)
    for i in range(max_rounds):
        if i >= rounds and all(tally.count(k) >= min_clean for k in order):
            break
        for k in order[i % len(order):] + order[:i % len(order)]:
            tally.add_turn(k, turns[k](n))
    return tally


def clean_medians(calls: dict[str, Callable[[], object]], rounds: int, min_clean: int = 30,
                  max_rounds: int | None = None, max_wait: float = MAX_WAIT,
                  delays: Callable[[], dict[str, int] | None] | None = None,
                  wall_clock: Callable[[], int] | None = None,
                  calls_per_round: int | None = None) -> CleanTally:
    """:func:`clean_rounds` of the callables of ``calls`` in this process, each turn ``n`` calls
    (~0.1 s of the first callable unless ``calls_per_round``). ``delays`` and ``wall_clock``
    default to :func:`srcore.clock.thread_delays` and ``WALL_CLOCK`` (tests pass stand-ins)."""
    order = list(calls)
    n = calls_per_round
    if n is None:   # ~0.1 s of the first callable on a free machine: the fastest of 3 calls
        once = []
        for _ in range(3):
            t0 = time.perf_counter()
            calls[order[0]]()
            once.append(time.perf_counter() - t0)
        n = calls_for(min(once))
    turns = {k: (lambda m, fn=fn: clean_turn(fn, m, delays, wall_clock)) for k, fn in calls.items()}
    return clean_rounds(turns, n, rounds, min_clean, max_rounds, max_wait)


def calls_for(per_call_s: float, seconds: float = 0.1) -> int:
    """Calls of a turn: ~``seconds`` of calls of ``per_call_s`` each (5 to 2,000)."""
    return max(5, min(2000, int(seconds / max(per_call_s, 1e-6))))


def raise_priority(module: str, argv: list[str], nice: int = -20) -> int | None:
    """Run ``python -m module *argv`` at high priority: this process when it leads its own session,
    else a child in a new one (whose return code is returned; None means go on here). The session's
    scheduler autogroup and the process are set to ``nice`` before any thread starts (threads inherit
    it): other sessions' jobs then rarely take its cores. Where that is not permitted (or there are
    no autogroups) it says so and the timings run at the priority they have."""
    import os
    import subprocess
    import sys

    if os.getsid(0) != os.getpid():
        return subprocess.run([sys.executable, "-m", module, *argv], start_new_session=True).returncode
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError as e:
        print(f"priority not raised ({type(e).__name__}: {e}): timing at the process's priority", flush=True)
    return None

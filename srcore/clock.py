"""The clock a backend times its candidate kernels on, at build or load (``srcore.plugin.clock``).

**Which clock.** Candidates that run on the calling thread alone are charged that thread's own time
(``"cpu"``): its CPU time (``time.thread_time_ns``) plus any time it was blocked (asleep, waiting for
another thread), but not the time it waited for a core another process held. On a shared machine
that wait is noise, charged to whichever candidate happened to be running: at load ~7 on 2 vCPUs a
2 ms call's wall time was 1-6x its CPU time (docs/performance.md, "Tactic timing on the thread's
own clock"). The wait is Linux's per-thread ``run_delay`` (schedstat); where the kernel does not
report it, a round is charged its CPU time, or its wall time if that was mostly spent off the CPU
(:data:`OFF_THREAD`): a candidate that sleeps never looks free. Candidates that may use more
threads (a part pool, BLAS's or OpenMP's team) are timed in wall time (``"wall"``): their work on
other threads is invisible to the caller's clocks. Such a round can still tell whether a core was
taken meanwhile (:func:`wall_ns_waited`): the time the process's threads waited for one, summed
from each thread's ``run_delay``.
"""
from __future__ import annotations

import os
import time
from typing import Callable

from .errors import SrcoreError

#: without ``run_delay``: a round on the ``"cpu"`` clock that used less than this fraction of its
#: wall time on the CPU spent it blocked (or the machine was starved) and is charged its wall time
OFF_THREAD = 0.1
CLOCKS = ("cpu", "wall")
#: a wall-clock round in which the process's threads waited for a core this fraction of its time or
#: more (:func:`wall_ns_waited`) ran while a core was taken: it is not *clean*, its time an upper bound
TAKEN = 0.1
#: the pauses before the extra rounds a backend gives a candidate with no clean round: OpenBLAS's idle
#: workers spin ~0.1 s, libgomp's ~1 ms, a part pool's a little, before they sleep
RETRY_PAUSES_S = (0.005, 0.03, 0.1)

#: nanosecond clocks: wall time, the calling thread's CPU time
WALL_CLOCK = time.perf_counter_ns
CPU_CLOCK = time.thread_time_ns
_SCHEDSTAT = "/proc/thread-self/schedstat"
_TASKS = "/proc/self/task"


def run_delay() -> int | None:
    """Nanoseconds the calling thread has waited for a core so far (Linux's schedstat), or None."""
    try:
        with open(_SCHEDSTAT, "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def thread_delays() -> dict[str, int] | None:
    """``run_delay`` (ns) of every thread of this process now, by thread id, or None where the kernel
    does not report it."""
    try:
        tids = os.listdir(_TASKS)
    except OSError:
        return None
    out = {}
    for tid in tids:
        try:
            with open(f"{_TASKS}/{tid}/schedstat", "rb") as f:
                out[tid] = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):   # the thread ended, or no schedstat
            continue
    return out or None


def wall_ns_waited(call: Callable[[], object], n: int) -> tuple[float, float | None]:
    """Wall nanoseconds per call of ``n`` calls of ``call``, and the fraction of that wall time the
    process's threads waited for a core, summed over the threads alive before and after (None where
    the kernel does not say): a threaded call whose second thread waited for its core, or whose
    core a spinning thread of another pool held, shows it here, where its wall time cannot."""
    d0 = thread_delays()
    w0 = WALL_CLOCK()
    for _ in range(n):
        call()
    w = WALL_CLOCK() - w0
    waited = delay_between(d0, thread_delays())
    return w / n, None if waited is None else waited / max(w, 1)


def delay_between(d0: dict[str, int] | None, d1: dict[str, int] | None) -> int | None:
    """Nanoseconds the threads of :func:`thread_delays` reading ``d0`` waited for a core until
    reading ``d1``, summed over the threads alive at both (one that started meanwhile has no
    baseline; one that ended took its delay with it), or None if either read had no schedstat."""
    if d0 is None or d1 is None:
        return None
    return sum(max(0, d1[t] - d) for t, d in d0.items() if t in d1)


def call_waited(call: Callable[[], object]) -> tuple[int, int | None]:
    """Wall nanoseconds of one call of ``call`` and the nanoseconds the process's threads waited for
    a core meanwhile (None without schedstat). The reads of the threads' delays lie outside the
    timed span, and a wait during them is counted: the wait can only be overstated."""
    d0 = thread_delays()
    w0 = WALL_CLOCK()
    call()
    w = WALL_CLOCK() - w0
    return w, delay_between(d0, thread_delays())


def clock_for(threads: int) -> str:
    """The clock for candidates that may run on ``threads`` threads (see the module doc)."""
    return "cpu" if threads <= 1 else "wall"


def check(clock: str, who: str, error: type[SrcoreError] = SrcoreError) -> str:
    """``clock`` if it is one of :data:`CLOCKS`, else ``error`` naming ``who`` (the caller)."""
    if clock not in CLOCKS:
        raise error(f"{who}: clock must be 'cpu' or 'wall', got {clock!r}")
    return clock


def per_call_ns(call: Callable[[], object], n: int, clock: str) -> float:
    """Nanoseconds per call of ``n`` calls of ``call`` on ``clock`` (``"cpu"`` or ``"wall"``)."""
    if clock == "wall":
        w0 = WALL_CLOCK()
        for _ in range(n):
            call()
        return (WALL_CLOCK() - w0) / n
    d0 = run_delay()
    w0, c0 = WALL_CLOCK(), CPU_CLOCK()
    for _ in range(n):
        call()
    c, w = CPU_CLOCK() - c0, WALL_CLOCK() - w0
    if d0 is not None:
        d1 = run_delay()
        if d1 is not None:
            return max(c, w - (d1 - d0)) / n
    return (w if c < OFF_THREAD * w else c) / n

"""The parts of one split call, claimed one at a time from a shared counter by the calling thread and
a team of Python worker threads (the kernels release the GIL).

A worker wakes from its queue tens to hundreds of microseconds after a call starts (a futex wake, the
GIL; more when the hypervisor halted its idle vCPU, or milliseconds when another process holds its
core). With a fixed share per thread the caller, done with its own, waited for the late worker's
whole share; here the caller goes on claiming parts until the worker joins and then waits only for
the parts already started. A worker that wakes after the last part was claimed finds nothing left,
and the caller does not wait for it at all. Which thread runs a part never changes its bits: a part
is a function of its index alone.
"""
from __future__ import annotations

import itertools
import os
import queue
import threading


class Claims:
    """One call's parts: a counter handing out the next part index, a count of the parts finished,
    and a lock released when the last one finishes (``next`` on an ``itertools.count`` is atomic
    under the GIL)."""

    __slots__ = ("count", "next", "finished", "done", "errors")

    def __init__(self, count: int):
        self.count = count
        self.next = itertools.count().__next__
        self.finished = itertools.count(1).__next__
        self.done = threading.Lock()
        self.done.acquire()
        self.errors: list = []

    @staticmethod
    def take(claims: "Claims", fn) -> None:
        """Run parts of ``claims`` until none is left (an error is kept for :meth:`wait`)."""
        count = claims.count
        i = claims.next()
        while i < count:
            try:
                fn(i)
            except BaseException as exc:  # handed to the caller, which re-raises it
                claims.errors.append(exc)
            if claims.finished() == count:
                claims.done.release()
            i = claims.next()

    def wait(self) -> None:
        """Until every part ended; then the first part's error, if any, is raised."""
        self.done.acquire()
        if self.errors:
            raise self.errors[0]


class Team:
    """``size - 1`` daemon workers blocking on a queue each (no spinning: nothing to steal a core
    another pool or process needs) and the calling thread. A subclass wraps each worker's parts in
    :meth:`take` (trt_like's BLAS team keeps OpenBLAS on one thread there)."""

    def __init__(self, size: int, name: str = "srcore-conv-team"):
        self.size = size
        self._queues = [queue.SimpleQueue() for _ in range(size - 1)]
        for q in self._queues:
            threading.Thread(target=self._work, args=(q,), daemon=True, name=name).start()

    def _work(self, q: queue.SimpleQueue) -> None:
        while True:
            claims, fn = q.get()
            self.take(claims, fn)

    def take(self, claims: Claims, fn) -> None:
        """A worker's share of a call: parts of ``claims`` until none is left."""
        Claims.take(claims, fn)

    def run(self, fn, count: int, team: int | None = None) -> None:
        """``fn(i)`` for each ``i`` in ``range(count)`` on up to ``team`` (default ``size``) threads,
        the caller one of them; returns when every part ended, re-raising the first error."""
        team = max(1, min(self.size if team is None else team, self.size, count))
        if team == 1:
            for i in range(count):
                fn(i)
            return
        claims = Claims(count)
        for q in self._queues[:team - 1]:
            q.put((claims, fn))
        Claims.take(claims, fn)
        claims.wait()


_teams: dict[tuple, Team] = {}
_lock = threading.Lock()
# a forked child has none of the parent's worker threads: it makes its own teams
os.register_at_fork(after_in_child=_teams.clear)


def team(size: int, kind: type[Team] = Team) -> Team:
    """The process's team of ``size`` threads of class ``kind`` (made on first use)."""
    t = _teams.get((kind, size))
    if t is None:
        with _lock:
            t = _teams.get((kind, size))
            if t is None:
                t = _teams[(kind, size)] = kind(size)
    return t

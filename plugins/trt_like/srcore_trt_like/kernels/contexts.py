"""Execution contexts: the memory an engine call works in, lent to at most one call per usable core.

An engine call needs its plan's arena of intermediates and the kernels' scratch (``scratch.py``);
both are dead once the call returns. Held per Python thread they cost one set per thread that
ever called (a ``RuntimePool`` of 4 runtimes on 2 cores kept 4 sets of resnet_small's 15 MiB,
and 4 calls at once only queue for the cores). So, as TensorRT's execution contexts, the sets
live in a process-wide list of :class:`Context` s, at most one per core this process may run on
(``os.sched_getaffinity``): a call takes a free one (a ``list.pop``, no lock on the fast path)
and gives it back; a call that finds none waits for one, as it would have waited for a core.
A call made while its thread already holds a context (an engine inside another's call) uses
that context. Scratch asked for outside any call (tactic timing while building) is the
thread's own, as before.
"""
from __future__ import annotations

import os
import threading

from .scratch import SCRATCH


class Context:
    """One call's memory: the kernels' scratch buffers and each plan's arena views."""

    __slots__ = ("index", "scratch", "arenas", "depth")

    def __init__(self, index: int):
        self.index = index
        self.scratch: dict = {}      # role -> flat buffer (see scratch.Scratch)
        self.arenas: dict = {}       # plan key -> (arena bytes, that plan's buffers)
        self.depth = 0               # nested calls on the thread holding it

    def nbytes(self) -> int:
        """Bytes held: scratch and arenas."""
        return sum(b.nbytes for b in self.scratch.values()) + sum(n for n, _ in self.arenas.values())


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Contexts:
    """At most ``limit`` contexts, made on demand and reused."""

    def __init__(self, limit: int | None = None):
        self.limit = usable_cores() if limit is None else max(1, int(limit))
        self.free: list[Context] = []
        self.made = 0
        self.waits = 0              # calls that found no free context (a counter for tests/reports)
        self.waiting = 0            # calls waiting for one now
        self._cond = threading.Condition()
        self._tls = threading.local()

    def enter(self) -> Context:
        """A context for this thread's call (the one it holds already for a nested call)."""
        tls = self._tls
        ctx = getattr(tls, "ctx", None)
        if ctx is not None:
            ctx.depth += 1
            return ctx
        try:
            ctx = self.free.pop()
        except IndexError:
            ctx = self._take()
        tls.ctx = ctx
        SCRATCH.bufs = ctx.scratch
        return ctx

    def _take(self) -> Context:
        with self._cond:
            if self.made < self.limit:
                self.made += 1
                return Context(self.made - 1)
            self.waits += 1
            self.waiting += 1
            try:
                while True:
                    try:
                        return self.free.pop()
                    except IndexError:
                        # a give-back between the pop and the wait notifies no one: wait briefly
                        self._cond.wait(0.001)
            finally:
                self.waiting -= 1

    def leave(self, ctx: Context) -> None:
        """Give back what :meth:`enter` returned."""
        if ctx.depth:
            ctx.depth -= 1
            return
        SCRATCH.bufs = SCRATCH.own
        self._tls.ctx = None
        self.free.append(ctx)
        if self.waiting:
            with self._cond:
                self._cond.notify()

    def current(self) -> Context | None:
        return getattr(self._tls, "ctx", None)

    def nbytes(self) -> int:
        """Bytes held by the contexts not in use (all of them when no call runs)."""
        return sum(c.nbytes() for c in list(self.free))


    def _forked(self) -> None:
        """In a forked child: only the forking thread exists, so contexts other threads held at the
        fork would never come back; start afresh."""
        self.free, self.made, self.waiting = [], 0, 0
        self._cond = threading.Condition()
        self._tls = threading.local()


#: the process's contexts, shared by every engine
CONTEXTS = Contexts()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=CONTEXTS._forked)

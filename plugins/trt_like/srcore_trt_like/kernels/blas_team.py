"""A GEMM split in fixed column parts, each part one single-threaded OpenBLAS call, run by a team of
Python threads (numpy releases the GIL inside BLAS).

Why not OpenBLAS's own threads: a threaded OpenBLAS SGEMM does not give the bits of the
single-threaded one (64x1024 @ 1024x512 and every benchmark shape differ), so a layer whose team
shrinks at run time (:class:`.threads.Governor`, beside a busy core) would change its results
from call to call. Here the parts depend only on the weight's shape (:func:`parts`), never on the
team, so the results are bit-identical whichever threads run them. The workers block on a queue
(no spinning: nothing to steal a core another pool or process needs).
"""
from __future__ import annotations

import threading

import numpy as np

from srcore.plugin import conv_team

from . import threads as _threads

#: columns of a part are a multiple of this (OpenBLAS's SGEMM register blocks are 4-16 wide)
PART_QUANTUM = 64
#: a weight is cut in about this many parts: enough to balance 2-8 threads, each part still a
#: full-width GEMM (the per-call cost, ~10 us, is far below a part's milliseconds)
TARGET_PARTS = 8


def parts(n: int) -> list[tuple[int, int]]:
    """The column ranges of an ``n``-column weight: a function of ``n`` alone."""
    share = -(-n // TARGET_PARTS)
    width = max(PART_QUANTUM, -(-share // PART_QUANTUM) * PART_QUANTUM)
    return [(a, min(n, a + width)) for a in range(0, n, width)]


class Team(conv_team.Team):
    """srcore's claiming team (:mod:`srcore.conv.team`: parts handed out one at a time, so the caller
    never waits for a late worker's share) whose workers run their parts with OpenBLAS on one thread."""

    def __init__(self, size: int):
        super().__init__(size, name="srcore-blas-team")

    def take(self, claims, fn) -> None:
        # OpenBLAS on one thread for the parts only: in numpy's OpenBLAS the count is the
        # process's, and a worker that kept it at 1 left every later GEMM (and the intra-op
        # count later tactics are built for) on one thread (kernels/threads.py, _OneThread)
        token = _threads.blas_enter()
        try:
            super().take(claims, fn)
        finally:
            _threads.blas_exit(token)


def team(size: int) -> Team:
    """The process's BLAS team of ``size`` threads (made on first use)."""
    return conv_team.team(size, Team)


class SplitGemm:
    """``out = x @ W.T`` for a constant ``W`` (N, K), its columns cut in :func:`parts`, each part's
    weight laid out (K, part) C-contiguous; a call runs the parts on a governed team of ``threads``."""

    def __init__(self, weight: np.ndarray, threads: int):
        w = np.asarray(weight, np.float32)
        self.n, self.k = w.shape
        self.ranges = parts(self.n)
        self.blocks = [np.ascontiguousarray(w[a:b].T) for a, b in self.ranges]
        self.weight_bytes = sum(b.nbytes for b in self.blocks)
        self.threads = max(1, int(threads))
        self.governor = _threads.Governor(self.threads)
        self._run = _threads.on_caller(self._run_parts)   # the caller's share on one OpenBLAS thread too

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        o = out.reshape(-1, self.n)
        gov = self.governor
        size = gov.team()
        t0 = gov.clock()
        self._run(x.reshape(o.shape[0], self.k), o, size)
        gov.record(size, gov.clock() - t0)

    def _run_parts(self, x2: np.ndarray, o: np.ndarray, size: int) -> None:
        ranges, blocks = self.ranges, self.blocks

        def part(i):
            a, b = ranges[i]
            np.matmul(x2, blocks[i], out=o[:, a:b])
        team(self.threads).run(part, len(ranges), size)


def ranges(total: int, count: int = TARGET_PARTS, quantum: int = 1) -> list[tuple[int, int]]:
    """``range(total)`` cut in at most ``count`` non-empty parts of whole quanta (a function of the
    shape alone, never of the team)."""
    cuts = [_threads.split(total, t, count, quantum) for t in range(count)]
    return [(a, b) for a, b in cuts if b > a]


class TeamParts:
    """For a conv tactic calling numpy's BLAS: its work in phases of fixed parts (:meth:`_parts`), run
    one after the other, or, built with ``team > 1``, each phase on a team of that many threads when
    that phase's own timing says the team pays (the same parts either way).

    Each phase of a call (gather, product, transforms, ...) has its own :class:`.threads.Governor`:
    a phase of ~0.1 ms (a Winograd transform, im2col's gather of a small layer) costs more in
    waking the team's thread and handing the GIL over (~40-100 us a phase on a 2-vCPU EPYC) than
    its second thread saves, while the layer's product beside it halves; one governor per call
    put both on the team or neither. Phases are counted per calling thread and call."""

    team_threads = 1

    def _init_team(self, team: int) -> None:
        self.team_threads = team = max(1, int(team))
        if team > 1:
            #: one governor per phase of a call, in call order (made on first use)
            self.governors: list[_threads.Governor] = []
            self._phase = threading.local()
            inner = self._run

            def run(x, out, residual):
                self._phase.i = 0
                inner(x, out, residual)
            self._run = run

    def _parts(self, fn, count: int) -> None:
        if self.team_threads <= 1 or count <= 1:
            for i in range(count):
                fn(i)
            return
        i = getattr(self._phase, "i", 0)
        self._phase.i = i + 1
        govs = self.governors
        while len(govs) <= i:
            # (timed as it runs: each phase on the team or the caller by its own timing, a
            # short phase's hand-over costing more than its second thread saves)
            govs.append(_threads.Governor(self.team_threads, timed_on_team=False))
        gov = govs[i]
        size = gov.team()
        t0 = gov.clock()
        if size <= 1:
            for k in range(count):
                fn(k)
        else:
            team(self.team_threads).run(fn, count, size)
        gov.record(size, gov.clock() - t0)

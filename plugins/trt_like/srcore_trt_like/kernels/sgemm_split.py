"""The packed-panel SGEMM (:mod:`.sgemm`) on numba's OpenMP team: ``out = x @ W.T`` cut by output columns
(whole panels: each thread streams its share of the packed weight, after packing the rows into its own
scratch) or by rows (each part packs its own rows and streams the whole weight), MLAS's two ways
(``MlasSgemmThreaded`` cuts the larger of M and N). The parts are claimed one at a time
(:func:`.atomics.claim`), so the caller never waits for a late worker's whole share, and every output
value is the one-thread kernel's sum in its order: the bits do not depend on the split or the team.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .atomics import claim
from .jit import PARALLEL_JIT
from .scratch import SCRATCH
from .sgemm import NCP, PackedSgemm, pack_rows, panel_width, sgemm_packed, sgemm_rows


@njit(**PARALLEL_JIT)
def sgemm_split(nt, by_rows, chunk, x, xp, wp, out, M, N, K, L, tag):
    """``out = x @ W.T`` (flat, as :func:`.sgemm.sgemm_rows`) in ``nt`` parts claiming chunks of ``chunk`` rows
    (``by_rows``: a multiple of 6) or ``chunk`` panels; ``xp`` scratch of ``M * K`` floats (by rows), ``nt * M * K``
    (by columns)."""
    if by_rows:
        nxt = np.zeros(1, np.int64)
        for t in prange(nt):
            a = claim(nxt) * chunk
            while a < M:
                b = min(M, a + chunk)
                sgemm_rows(x, xp[a * K:b * K], wp, out, N, K, L, tag, a, b)
                a = claim(nxt) * chunk
        return
    P = 2 * L
    NP = (N + P - 1) // P
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        # every part packs all the rows into its own scratch, once it has a chunk: no barrier between
        # packing and products, so the caller never waits for a late worker (the packing is ~0.2 % of
        # the products here: 56 us of 64 x 4096 rows against 24 ms of mlp_wide's 4096 x 4096 layer)
        xpt = xp[t * M * K:(t + 1) * M * K]
        p = claim(nxt) * chunk
        if p < NP:
            pack_rows(x, xpt, K, 0, M)
        while p < NP:
            sgemm_packed(xpt, wp, out, N, K, L, tag, 0, M, 0, M, p, min(NP, p + chunk))
            p = claim(nxt) * chunk


def split_rows(m: int, n: int) -> bool:
    """Whether a product of ``m`` rows and ``n`` output columns is cut by rows (more rows than columns, as
    MLAS; else by columns)."""
    return m > n


def chunk(m: int, n: int, lanes: int, parts: int, by_rows: bool) -> int:
    """Rows (a multiple of 6) or panels a claim takes: about two claims a part, a panel chunk at most
    one packed block of panels (:data:`.sgemm.NCP`)."""
    if by_rows:
        return max(6, -(-m // (2 * parts * 6)) * 6)
    npan = -(-n // panel_width(lanes))
    return max(1, min(NCP, npan // (2 * parts)))


class SplitSgemm(PackedSgemm):
    """:class:`.sgemm.PackedSgemm` run as :func:`sgemm_split` in ``parts`` parts, on the team a
    :class:`.threads.Governor` picks per call (``governor``; None: numba's team as set)."""

    def __init__(self, w, lanes: int = 8, packed: tuple | None = None, *, parts: int = 2, by_rows=None,
                 governor=None):
        super().__init__(w, lanes, packed)
        self.parts = max(1, int(parts))
        self.by_rows = by_rows
        self.governor = governor

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        n, k = self.n, self.k
        m = out.size // max(n, 1)
        rows = split_rows(m, n) if self.by_rows is None else self.by_rows
        xp = SCRATCH.get("sgemm_rows", ((1 if rows else self.parts) * m * k,))
        args = (self.parts, rows, chunk(m, n, self.lanes, self.parts, rows), x.reshape(-1), xp, self.wp,
                out.reshape(-1), m, n, k, self.lanes, self.tag)
        if self.governor is None:
            sgemm_split(*args)
        else:
            self.governor.run(sgemm_split, *args)

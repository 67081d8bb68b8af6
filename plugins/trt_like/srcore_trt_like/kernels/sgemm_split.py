"""The packed-panel SGEMM (:mod:`.sgemm`) on numba's OpenMP team: ``out = x @ W.T`` cut by output columns
(whole panels: each thread streams its share of the packed weight, the rows packed once before, by
parts) or by rows (each part packs its own rows and streams the whole weight), MLAS's two ways
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
from .sgemm import NCP, PackedSgemm, pack_rows_part, panel_width, sgemm_packed, sgemm_rows

#: rows a claim packs when the columns are split (eight 6-row blocks)
PACK_CHUNK = 48


@njit(**PARALLEL_JIT)
def sgemm_split(nt, by_rows, chunk, x, xp, wp, out, M, N, K, L, tag):
    """``out = x @ W.T`` (flat, as :func:`.sgemm.sgemm_rows`) in ``nt`` parts claiming chunks of ``chunk`` rows
    (``by_rows``: a multiple of 6) or ``chunk`` panels; ``xp`` scratch of ``M * K`` floats."""
    if by_rows:
        nxt = np.zeros(1, np.int64)
        for t in prange(nt):
            a = claim(nxt) * chunk
            while a < M:
                b = min(M, a + chunk)
                sgemm_rows(x, xp[a * K:b * K], wp, out, N, K, L, tag, a, b)
                a = claim(nxt) * chunk
        return
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        a = claim(nxt) * PACK_CHUNK
        while a < M:
            pack_rows_part(x, xp, K, 0, M, a, min(M, a + PACK_CHUNK))
            a = claim(nxt) * PACK_CHUNK
    P = 2 * L
    NP = (N + P - 1) // P
    nxt2 = np.zeros(1, np.int64)
    for t in prange(nt):
        p = claim(nxt2) * chunk
        while p < NP:
            sgemm_packed(xp, wp, out, N, K, L, tag, 0, M, 0, M, p, min(NP, p + chunk))
            p = claim(nxt2) * chunk


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
        xp = SCRATCH.get("sgemm_rows", (m * k,))
        args = (self.parts, rows, chunk(m, n, self.lanes, self.parts, rows), x.reshape(-1), xp, self.wp,
                out.reshape(-1), m, n, k, self.lanes, self.tag)
        if self.governor is None:
            sgemm_split(*args)
        else:
            self.governor.run(sgemm_split, *args)

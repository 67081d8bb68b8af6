"""Precomputed offsets: greedy by size (Pisarchyk & Lee, arXiv:2001.03288, section 5.2).

Tensors are placed largest first; each goes into the lowest gap, among the
tensors already placed whose lifetimes overlap it, that is big enough (the
smallest such gap: best fit), else after the highest of them. Offsets are
computed once per planned signature and never resized: a run that needs more
than was planned re-plans (see the runtime's ``Options``).
"""
from __future__ import annotations

from typing import Sequence

from .planner import Plan, TensorRequest, align


class GreedyBySizePlanner:
    name = "precomputed_offsets"

    def plan(self, requests: Sequence[TensorRequest]) -> Plan:
        order = sorted(requests, key=lambda r: (-r.nbytes, r.lifetime.start, r.key))
        placed: list[tuple[int, int, TensorRequest]] = []   # (offset, aligned size, request), by offset
        offsets: dict[int, int] = {}
        total = 0
        for r in order:
            size = align(r.nbytes)
            best_offset = None
            best_gap = None
            prev_end = 0
            for off, psize, p in placed:
                if not p.lifetime.overlaps(r.lifetime):
                    continue
                gap = off - prev_end
                if gap >= size and (best_gap is None or gap < best_gap):
                    best_gap, best_offset = gap, prev_end
                prev_end = max(prev_end, off + psize)
            if best_offset is None:
                best_offset = prev_end
            offsets[r.key] = best_offset
            placed.append((best_offset, size, r))
            placed.sort(key=lambda t: t[0])
            total = max(total, best_offset + size)
        return Plan(offsets, total, self.name)

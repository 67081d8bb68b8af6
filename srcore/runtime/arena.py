"""A runtime's memory for one block: one slab, and aligned views into it per signature.

Standard resizing: the storage groups of the first planned signature are kept;
a later signature whose tensors fit their slots reuses the slab, one that
outgrows a slot gets those tensors allocated by their kernels for that run
and the slots grow before the next run. Precomputed offsets: the offsets of a
plan are reused while every tensor fits its planned bytes; otherwise the
block re-plans (``Options.replan_on_growth``) or raises MemoryPlanError.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import MemoryPlanError
from ..ir.quant import storage_dtype
from ..memory.planner import ALIGNMENT, Plan
from ..memory.standard_resizing import grow
from .lru import LRU


def aligned_slab(nbytes: int) -> np.ndarray:
    """A uint8 buffer of ``nbytes`` whose first byte is ALIGNMENT-aligned."""
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start:start + nbytes]


def make_view(slab: np.ndarray, offset: int, shape: tuple[int, ...], dtype: str) -> np.ndarray | None:
    """A view of ``slab`` for a tensor of ``shape`` and ``dtype`` (a quantized dtype: its stored
    integers, which its kernel wraps with their parameters); None for a dtype numpy does not know."""
    try:
        dt = np.dtype(storage_dtype(dtype))
    except TypeError:
        return None  # a plugin dtype numpy does not know: its kernel allocates
    return np.ndarray(shape, dtype=dt, buffer=slab, offset=offset)


class BlockArena:
    """The slab of one block in one runtime, and the views of each signature seen."""

    __slots__ = ("module", "block", "plan", "planned", "slab", "pending", "views", "dynamic_allocations",
                 "replans")

    def __init__(self, module, block: int):
        self.module = module
        self.block = block
        self.plan: Plan | None = None
        self.planned: dict[int, int] = {}     # slot -> bytes the plan was made for
        self.slab: np.ndarray | None = None
        self.pending: Plan | None = None
        self.views: LRU = LRU()
        self.dynamic_allocations = 0
        self.replans = 0

    @property
    def nbytes(self) -> int:
        return 0 if self.slab is None else int(self.slab.nbytes)

    def touch(self) -> None:
        """Write the slab's pages now (a fresh slab's first writes fault its pages in, one by one)."""
        if self.slab is not None:
            self.slab.fill(0)

    def buffers(self, key: Any, bsig) -> dict[int, np.ndarray]:
        """slot -> view for this signature (a slot missing means: its kernel allocates)."""
        if self.pending is not None:
            self._adopt(self.pending, self.planned)
            self.pending = None
        views = self.views.get(key)
        if views is not None:
            return views
        reqs = bsig.requests
        if not reqs:
            self.views[key] = {}
            return self.views[key]
        if self.plan is None:
            self._adopt(self.module.plan_for(self.block, key, reqs), {r.key: r.nbytes for r in reqs})
        elif self.plan.algorithm == "standard_resizing":
            grown = grow(self.plan, [r for r in reqs if r.key in self.plan.offsets])
            if grown is not None:
                self.pending = grown
                slot_size = {k: size for members, size in zip(self.plan.groups, self.plan.slot_bytes)
                             for k in members}
                fits = {r.key for r in reqs if r.nbytes <= slot_size.get(r.key, -1)}
                self.dynamic_allocations += len(reqs) - len(fits)
                return self._views(bsig, fits)   # not cached: the slab changes before the next run
        else:
            if any(r.nbytes > self.planned.get(r.key, -1) for r in reqs):
                if not self.module.options.replan_on_growth:
                    worst = max(reqs, key=lambda r: r.nbytes - self.planned.get(r.key, -1))
                    raise MemoryPlanError(
                        f"this run needs {worst.nbytes} bytes for a tensor planned at "
                        f"{self.planned.get(worst.key, 0)} bytes (block {self.block}); precomputed offsets "
                        "never resize: warm up with the largest inputs, or set Options(replan_on_growth=True)")
                self.replans += 1
                self._adopt(self.module.plan_for(self.block, key, reqs), {r.key: r.nbytes for r in reqs})
        views = self._views(bsig, None)
        self.views[key] = views
        return views

    def _adopt(self, plan: Plan, planned: dict[int, int]) -> None:
        self.plan = plan
        self.planned = dict(planned)
        self.slab = aligned_slab(plan.total_bytes)
        self.views.clear()

    def _views(self, bsig, only: set[int] | None) -> dict[int, np.ndarray]:
        out = {}
        for r in bsig.requests:
            if only is not None and r.key not in only:
                continue
            off = self.plan.offsets.get(r.key)
            if off is None:
                continue
            shape, dtype = bsig.layouts[r.key]
            v = make_view(self.slab, off, shape, dtype)
            if v is not None:
                out[r.key] = v
        return out

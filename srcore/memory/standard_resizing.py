"""Standard resizing: storage groups by lifetime, as in PyTorch's Static Runtime.

Managed tensors whose lifetimes do not overlap share one storage group; the
slab holds one slot per group, as large as the group's largest tensor. Sizes
come from the first run of a signature; when a later run needs a bigger slot
the runtime allocates that tensor dynamically for the run and grows the slot
from the next run on (``grow``).
"""
from __future__ import annotations

from typing import Sequence

from .planner import Plan, TensorRequest, align


class StorageGroupPlanner:
    name = "standard_resizing"

    def plan(self, requests: Sequence[TensorRequest]) -> Plan:
        groups: list[list[TensorRequest]] = []
        group_end: list[int] = []      # last position any member of the group is alive
        group_size: list[int] = []
        for r in sorted(requests, key=lambda r: (r.lifetime.start, r.key)):
            free = [g for g, end in enumerate(group_end) if end < r.lifetime.start]
            if free:
                # best fit: the smallest free slot that holds it, else the largest (grows least often)
                fitting = [g for g in free if group_size[g] >= r.nbytes]
                g = min(fitting, key=lambda g: group_size[g]) if fitting else max(free, key=lambda g: group_size[g])
                groups[g].append(r)
                group_end[g] = r.lifetime.end
                group_size[g] = max(group_size[g], r.nbytes)
            else:
                groups.append([r])
                group_end.append(r.lifetime.end)
                group_size.append(r.nbytes)
        return layout_groups([tuple(m.key for m in g) for g in groups], group_size, self.name)


def layout_groups(groups: Sequence[Sequence[int]], slot_bytes: Sequence[int], algorithm: str) -> Plan:
    """Place one slot per group, back to back (aligned); every member of a group gets its slot's offset."""
    offsets: dict[int, int] = {}
    pos = 0
    for members, size in zip(groups, slot_bytes):
        for k in members:
            offsets[k] = pos
        pos += align(size)
    return Plan(offsets, pos, algorithm, tuple(tuple(g) for g in groups), tuple(slot_bytes))


def grow(plan: Plan, requests: Sequence[TensorRequest]) -> Plan | None:
    """The plan with slots grown to hold ``requests`` (same groups), or None if it already fits."""
    size_of = {r.key: r.nbytes for r in requests}
    new_sizes = []
    grew = False
    for members, size in zip(plan.groups, plan.slot_bytes):
        need = max((size_of.get(k, 0) for k in members), default=0)
        if need > size:
            grew = True
        new_sizes.append(max(size, need))
    if not grew:
        return None
    return layout_groups(plan.groups, new_sizes, plan.algorithm)

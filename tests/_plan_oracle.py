"""An independent check of memory plans: byte by byte, node position by node position.

It shares nothing with ``srcore.memory.planner`` (not ``Lifetime.overlaps``, not ``check_plan``):
for every node position it marks the bytes each tensor alive there occupies and fails on the
first byte claimed twice. Slow, but obviously right, so the planners' property tests use it.
"""
from __future__ import annotations

import numpy as np

#: the alignment the runtime promises (srcore.memory.planner.ALIGNMENT), restated on purpose
ALIGNMENT = 64


def plan_violations(requests, offsets: dict[int, int], total_bytes: int) -> list[str]:
    """Every way the plan is wrong: a missing, misaligned or out-of-slab tensor, or a shared byte."""
    problems = []
    for r in requests:
        if r.key not in offsets:
            problems.append(f"tensor {r.key} has no offset")
            continue
        off = offsets[r.key]
        if off < 0 or off % ALIGNMENT:
            problems.append(f"tensor {r.key} at {off} is misaligned")
        if off + r.nbytes > total_bytes:
            problems.append(f"tensor {r.key} at {off}+{r.nbytes} ends past the slab ({total_bytes})")
    if problems:
        return problems
    positions = {p for r in requests for p in range(r.lifetime.start, r.lifetime.end + 1)}
    for p in sorted(positions):
        owner = np.full(max(total_bytes, 1), -1, dtype=np.int64)
        for r in requests:
            if not r.lifetime.start <= p <= r.lifetime.end or r.nbytes == 0:
                continue
            off = offsets[r.key]
            taken = owner[off:off + r.nbytes]
            clash = taken[taken >= 0]
            if clash.size:
                problems.append(f"position {p}: tensors {int(clash[0])} and {r.key} share byte "
                                f"{off + int(np.argmax(taken >= 0))}")
                return problems
            taken[:] = r.key
    return problems


def assert_plan_sound(requests, plan) -> None:
    problems = plan_violations(requests, plan.offsets, plan.total_bytes)
    assert not problems, "; ".join(problems)

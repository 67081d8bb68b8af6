"""The memory planner interface and the data it works on.

A block's *managed tensors* are the outputs of out-variant kernels that never
reach the block's outputs (through views, lists, tuples or sub-blocks). Each
has a lifetime ``[start, end]`` in node positions of its block (``end`` is the
last use of the tensor or of anything aliasing it) and, for one input-shape
signature, a size in bytes. A planner turns these into byte offsets inside
one slab so that tensors alive at the same time never overlap.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import attrs

from .._repr import shared_repr

#: every tensor starts on a multiple of this many bytes (cache line; SIMD loads)
ALIGNMENT = 64


def align(nbytes: int, alignment: int = ALIGNMENT) -> int:
    return (nbytes + alignment - 1) // alignment * alignment


@attrs.frozen
@shared_repr
class Lifetime:
    """A managed tensor's live range in node positions, both ends inclusive."""

    start: int
    end: int

    def overlaps(self, other: "Lifetime") -> bool:
        return self.start <= other.end and other.start <= self.end


@attrs.frozen
@shared_repr
class TensorRequest:
    """One managed tensor for one signature: which value, when alive, how many bytes."""

    key: int          # the value's index in the block's managed list
    lifetime: Lifetime
    nbytes: int


@attrs.frozen
@shared_repr
class Plan:
    """Offsets into one slab of ``total_bytes``; ``offsets[key]`` for each request."""

    offsets: dict[int, int]
    total_bytes: int
    algorithm: str
    #: storage groups (keys sharing one slot), for planners that group; slot sizes in bytes
    groups: tuple[tuple[int, ...], ...] = ()
    slot_bytes: tuple[int, ...] = ()


class MemoryPlanner(Protocol):
    """An algorithm that places managed tensors into one slab."""

    name: str

    def plan(self, requests: Sequence[TensorRequest]) -> Plan:
        """Offsets for ``requests`` (a request with ``nbytes == 0`` still gets an offset)."""
        ...


def lower_bound(requests: Sequence[TensorRequest], alignment: int = ALIGNMENT) -> int:
    """The largest total of (aligned) bytes alive at one node position: no plan can do better."""
    events: dict[int, int] = {}
    for r in requests:
        size = align(r.nbytes, alignment)
        events[r.lifetime.start] = events.get(r.lifetime.start, 0) + size
        events[r.lifetime.end + 1] = events.get(r.lifetime.end + 1, 0) - size
    live = peak = 0
    for pos in sorted(events):
        live += events[pos]
        peak = max(peak, live)
    return peak


def no_reuse_bytes(requests: Sequence[TensorRequest], alignment: int = ALIGNMENT) -> int:
    """Bytes needed if every tensor had its own storage."""
    return sum(align(r.nbytes, alignment) for r in requests)


def check_plan(requests: Sequence[TensorRequest], plan: Plan) -> None:
    """Raise AssertionError-free ValueError if two simultaneously live tensors overlap in the slab."""
    placed = sorted(requests, key=lambda r: plan.offsets[r.key])
    for i, a in enumerate(placed):
        a0 = plan.offsets[a.key]
        if a0 % ALIGNMENT or a0 + a.nbytes > plan.total_bytes:
            raise ValueError(f"tensor {a.key} at {a0}+{a.nbytes} is misaligned or outside the slab")
        for b in placed[i + 1:]:
            b0 = plan.offsets[b.key]
            if b0 >= a0 + a.nbytes:
                break
            if a.nbytes and b.nbytes and a.lifetime.overlaps(b.lifetime):
                raise ValueError(f"tensors {a.key} and {b.key} are alive together and overlap")


def make_planner(name: str) -> MemoryPlanner:
    """The planner called ``name``: ``standard_resizing`` or ``precomputed_offsets``."""
    if name == "standard_resizing":  # only the planner asked for is imported
        from .standard_resizing import StorageGroupPlanner

        return StorageGroupPlanner()
    if name == "precomputed_offsets":
        from .precomputed_offsets import GreedyBySizePlanner

        return GreedyBySizePlanner()
    from ..errors import SrcoreError

    raise SrcoreError(f"unknown memory_planner_algorithm {name!r}; choose one of standard_resizing, precomputed_offsets")

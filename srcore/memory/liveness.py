"""Which tensors of a block can be managed, and how long each lives.

Alias rule (sound for any kernel that only returns its inputs or views of
them): an out-variant output is a fresh tensor; every other output that can
hold a tensor may alias every tensor-holding input of its node (for nodes with
sub-blocks, also every outer value the sub-blocks read). A fresh tensor is
*managed* unless something aliasing it reaches the block's outputs; its
lifetime ends at the last use of anything aliasing it.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import attrs

from .._repr import shared_repr

@attrs.frozen
@shared_repr
class NodeFacts:
    """What liveness needs to know of one node at block position ``position``."""

    position: int
    reads: tuple[int, ...]            # input slots, plus outer slots read inside sub-blocks
    fresh: tuple[int, ...]            # output slots that are fresh tensors (out variants)
    aliasing: tuple[int, ...]         # output slots that may alias the tensors among ``reads``


@attrs.frozen
@shared_repr
class Liveness:
    """Managed slots with their lifetimes, and the fresh slots that escape the block."""

    lifetimes: dict[int, tuple[int, int]]      # slot -> (start, end), node positions, inclusive
    escaping: frozenset[int]


def analyze(nodes: Sequence[NodeFacts], block_outputs: Iterable[int], end_position: int) -> Liveness:
    """Lifetimes of the fresh tensors of one block (``end_position``: the block's return)."""
    roots: dict[int, frozenset[int]] = {}      # slot -> fresh slots it may alias
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for n in nodes:
        for s in n.reads:
            for r in roots.get(s, ()):
                if end[r] < n.position:
                    end[r] = n.position
        if n.aliasing:
            inherited = frozenset().union(*(roots.get(s, frozenset()) for s in n.reads))
            for o in n.aliasing:
                roots[o] = inherited
        for o in n.fresh:
            roots[o] = frozenset((o,))
            start[o] = end[o] = n.position
    escaping = set()
    for s in block_outputs:
        escaping |= roots.get(s, frozenset())
    lifetimes = {s: (start[s], end[s]) for s in start if s not in escaping}
    return Liveness(lifetimes, frozenset(escaping))

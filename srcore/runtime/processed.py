"""Processed nodes and functions: what static dispatch leaves for the run loop.

A :class:`ProcessedFunction` is the kernel chosen for a node plus how to unbox
its arguments (which value slots or constants go to which parameter); it is
shared by every runtime and holds no per-run state. A :class:`ProcessedNode`
maps it onto the value array: input and output slots, and for ``prim::If`` /
``prim::Loop`` the sub-block infos.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs

from .._repr import shared_repr
from ..dispatch.resolve import STRUCTURAL_KINDS  # noqa: F401  (the kinds the runtime runs itself)


@attrs.frozen
@shared_repr
class Arg:
    """Where one kernel argument comes from: a value slot, or a constant bound at load."""

    slot: int | None = None
    const: Any = None

    @property
    def is_const(self) -> bool:
        return self.slot is None


@attrs.frozen(eq=False)
@shared_repr
class ProcessedFunction:
    """The kernel call of one node: ``fn(*args, **kwargs[, out=...])``."""

    fn: Callable[..., Any]
    kind: str                                   # "out", "native", "fallback", or "structural"
    args: tuple[Arg, ...]
    kwargs: tuple[tuple[str, Arg], ...]
    n_outputs: int
    backend: str | None = None
    plugin: str | None = None
    op: str = ""


@attrs.frozen(eq=False)
@shared_repr
class ProcessedNode:
    """One node of a block: its function, input and output slots, and sub-blocks."""

    node: Any                                   # the srcore.ir.Node (for errors and reports)
    fn: ProcessedFunction | None
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    blocks: tuple["BlockInfo", ...] = ()
    position: int = 0

    @property
    def kind(self) -> str:
        return self.node.kind

    def describe(self) -> str:
        src = f"  # {self.node.source}" if self.node.source else ""
        return f"{repr(self.node)}{src}"


@attrs.frozen
@shared_repr
class ManagedTensor:
    """A tensor the block's memory planner owns: an out-variant output that never escapes."""

    slot: int
    start: int
    end: int


@attrs.frozen(eq=False)
@shared_repr
class BlockInfo:
    """One block: its processed nodes, input/output slots, and managed tensors."""

    index: int
    block: Any                                  # the srcore.ir.Block
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    nodes: tuple[ProcessedNode, ...]
    managed: tuple[ManagedTensor, ...]

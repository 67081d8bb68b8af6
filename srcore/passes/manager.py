"""``PassManager``: runs passes in order, records what each did, optionally verifies after each.

A pass is a callable ``pass_(graph) -> bool | None`` (``True`` = "changed"),
optionally wrapped in :class:`Pass` to give it a name. :class:`Fixpoint`
groups passes that run again until none of them changes the graph.
Set ``SRCORE_DEBUG_PASSES=1`` (or ``PassManager(..., verify=True)``) to run
``srcore.ir.verify`` after every pass; a failure raises :class:`PassError`
naming the pass.
"""
from __future__ import annotations

import importlib
import os
import time
from typing import Callable, Iterable, Union

import attrs

from .._convert import to_tuple
from .._repr import shared_repr
from ..errors import PassError, SrcoreError
from ..ir.graph import Graph
from ..ir.names import base_op
from .triggers import Trigger, fires

PassFn = Callable[[Graph], "bool | None"]


@attrs.frozen
@shared_repr
class Pass:
    """A named pass. ``triggers`` (``srcore.passes.triggers``): the op kinds without which it
    changes nothing; a :class:`PassManager` skips it on a graph without them (None: always runs)."""

    name: str
    fn: PassFn
    triggers: Trigger | None = None

    def __call__(self, graph: Graph) -> bool | None:
        return self.fn(graph)


@attrs.frozen
@shared_repr
class LazyFn:
    """``target`` (``"package.module:function"``) called with ``kwargs``, imported at its first call:
    a pass the pipeline skips is never imported."""

    target: str
    kwargs: dict = attrs.field(factory=dict)

    def __call__(self, graph: Graph) -> bool | None:
        mod, _, name = self.target.partition(":")
        return getattr(importlib.import_module(mod), name)(graph, **self.kwargs)


@attrs.frozen
@shared_repr
class Fixpoint:
    """Run ``passes`` repeatedly until none reports a change (at most ``max_iterations`` rounds)."""

    passes: tuple = attrs.field(converter=to_tuple)
    max_iterations: int = 10
    name: str = "fixpoint"


@attrs.frozen
@shared_repr
class PassStats:
    """What one run of one pass did."""

    name: str
    nodes_before: int
    nodes_after: int
    removed: int
    added: int
    seconds: float
    changed: bool
    iteration: int = 0

    def __str__(self) -> str:
        it = f" #{self.iteration}" if self.iteration else ""
        return (f"{self.name + it:<36} {self.nodes_before:>6} -> {self.nodes_after:<6} "
                f"-{self.removed:<5} +{self.added:<5} {self.seconds * 1e3:8.2f} ms")


def pass_name(p) -> str:
    return getattr(p, "name", None) or getattr(p, "__name__", None) or type(p).__name__


def debug_enabled() -> bool:
    return os.environ.get("SRCORE_DEBUG_PASSES", "") not in ("", "0")


class PassManager:
    """Runs passes (and :class:`Fixpoint` groups) over a graph, in place, collecting :class:`PassStats`."""

    def __init__(self, passes: Iterable[Union[PassFn, Pass, Fixpoint]], *, verify: bool | None = None):
        self.passes = list(passes)
        self.verify = debug_enabled() if verify is None else verify
        self.stats: list[PassStats] = []
        #: the graph's op kinds after the latest pass (None: not known yet)
        self._kinds: frozenset | None = None
        #: the names of the passes skipped because none of their trigger kinds was in the graph
        self.skipped: list[str] = []

    def run(self, graph: Graph) -> bool:
        """Run every pass on ``graph`` (modified in place); True if any changed it."""
        self._kinds = None
        changed = False
        for p in self.passes:
            if isinstance(p, Fixpoint):
                changed |= self._run_fixpoint(graph, p)
            else:
                changed |= self._run_one(graph, p)
        return changed

    __call__ = run

    def _run_fixpoint(self, graph: Graph, group: Fixpoint) -> bool:
        any_change = False
        for i in range(1, group.max_iterations + 1):
            round_changed = False
            for p in group.passes:
                round_changed |= self._run_one(graph, p, iteration=i)
            any_change |= round_changed
            if not round_changed:
                break
        return any_change

    def _run_one(self, graph: Graph, p, iteration: int = 0) -> bool:
        name = pass_name(p)
        trigger = getattr(p, "triggers", None)
        if trigger is not None:
            if self._kinds is None:
                self._kinds = frozenset(base_op(k) for k in {n.kind for n in graph.all_nodes()})
            if not fires(trigger, self._kinds):
                self.skipped.append(name)
                return False
        before = {id(n): n for n in graph.all_nodes()}  # keep the nodes alive so ids stay unique
        t0 = time.perf_counter()
        try:
            result = p(graph)
        except SrcoreError:
            raise
        except Exception as exc:
            raise PassError(f"pass {name} failed: {type(exc).__name__}: {exc}") from exc
        seconds = time.perf_counter() - t0
        after, kinds = set(), set()
        for n in graph.all_nodes():
            after.add(id(n))
            kinds.add(n.kind)
        self._kinds = frozenset(base_op(k) for k in kinds)
        removed = sum(1 for k in before if k not in after)
        added = sum(1 for k in after if k not in before)
        changed = bool(result) if result is not None else bool(removed or added)
        self.stats.append(PassStats(name, len(before), len(after), removed, added, seconds, changed,
                                    iteration))
        if self.verify:
            self._verify(graph, name)
        return changed

    @staticmethod
    def _verify(graph: Graph, name: str) -> None:
        from ..ir.verify import verify

        try:
            verify(graph)
        except SrcoreError as exc:
            raise PassError(f"the graph is invalid after pass {name}: {exc}") from exc


def summarize(stats: Iterable[PassStats]) -> str:
    """A table of per-pass stats (what ``srcore inspect --graph`` prints)."""
    lines = [f"{'pass':<36} {'before':>6} -> {'after':<6} {'removed':<6} {'added':<6} {'time':>8}"]
    lines += [str(s) for s in stats]
    return "\n".join(lines)

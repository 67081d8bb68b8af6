"""Partition a graph and build its engines, with automatic fallback; the partition report."""
from __future__ import annotations

import logging
import time
from typing import Any

import attrs

from ..dispatch.lazy import resolve_ref
from ..errors import EngineBuildError, SrcoreError
from ..ir.graph import Graph, Node
from ..progress import progress
from ..plugin.types import Segment
from .extract import ENGINE_KIND, replace_with_engine, segment_graph
from .fallback import SegmentFallback
from .segments import Eligibility, boundary, find_candidates

log = logging.getLogger("srcore.partition")


@attrs.frozen
class SegmentReport:
    """One run of eligible nodes and what became of it.

    ``status``: ``"engine"`` (built; runs as one ``srcore::engine`` node), ``"fallback"``
    (the builder refused or failed: ``reason`` says why; its nodes run one by one) or
    ``"too small"`` (fewer nodes than ``Options.engine_min_block_size``).
    """

    name: str
    backend: str
    ops: tuple[str, ...]
    source: str | None
    status: str
    reason: str = ""
    build_seconds: float = 0.0
    describe: Any = attrs.field(default=None, eq=False, repr=False)  # the engine's describe(), if any
    #: the engine itself (for its optional ``profile()`` and ``memory()``); None unless built
    engine: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def description(self) -> str:
        """The engine's own account (layers, tactics, plans so far); empty if it has none."""
        return self.describe() if callable(self.describe) else ""


@attrs.frozen
class Refused:
    """A node no engine took, and why."""

    backend: str
    node: str
    source: str | None
    reason: str


@attrs.frozen
class PartitionReport:
    """What the partitioner did: every segment, and every node left out of engines."""

    segments: tuple[SegmentReport, ...] = ()
    refused: tuple[Refused, ...] = ()

    @property
    def engines(self) -> tuple[SegmentReport, ...]:
        return tuple(s for s in self.segments if s.status == "engine")

    def format(self) -> str:
        """A readable report (``srcore inspect --partition``)."""
        if not self.segments and not self.refused:
            return "no engine backend among the module's backends: every node runs on its own kernel"
        lines = []
        for s in self.segments:
            head = f"{s.name} [{s.backend}] {len(s.ops)} node(s): {s.status}"
            if s.status == "engine":
                head += f" (built in {s.build_seconds * 1e3:.1f} ms)"
            lines.append(head)
            lines.append("  ops: " + ", ".join(_count(s.ops)))
            if s.source:
                lines.append(f"  from: {s.source}")
            if s.reason:
                lines.append(f"  why: {s.reason}")
            if s.description:
                lines.extend("  " + ln for ln in s.description.splitlines())
        if self.refused:
            lines.append(f"{len(self.refused)} node(s) outside engines:")
            for r in self.refused:
                where = f"  # {r.source}" if r.source else ""
                lines.append(f"  [{r.backend}] {r.node}: {r.reason}{where}")
        return "\n".join(lines)


def _count(ops) -> list[str]:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return [f"{op} x{n}" if n > 1 else op for op, n in counts.items()]


def _node_text(n: Node) -> str:
    outs = ", ".join(f"%{o.name}" for o in n.outputs)
    return f"{outs} = {n.kind}" if outs else n.kind


def partition_graph(graph: Graph, registry: Any, table: Any, options: Any,
                    plugin_manager: Any = None) -> tuple[PartitionReport, dict]:
    """Cut ``graph`` (in place) into engine segments for every engine backend in
    ``options.backends``; returns the report and ``{engine node: engine}``. ``plugin_manager``
    (default: the process's) serves the segments' node-by-node fallbacks."""
    engines: dict[Node, Any] = {}
    segments: list[SegmentReport] = []
    refused: list = []
    for backend in options.backends:
        eb = registry.engine_builders.get(backend)
        if eb is None:
            continue
        what = f"the {backend} engine builder"
        supports = resolve_ref(eb.supports, provider=eb.provider, op=ENGINE_KIND, what=f"supports of {what}")
        build = resolve_ref(eb.build, provider=eb.provider, op=ENGINE_KIND, what=f"build of {what}")
        elig = Eligibility(graph, table, supports, backend, options.engine_fallback_ops)
        runs, refusals = find_candidates(graph.block, elig)
        refused.extend((backend, r) for r in refusals if r.node.kind != ENGINE_KIND)
        for run in progress(runs, f"build {backend} engines", total=len(runs), unit="engine"):
            name = f"{backend}_engine_{sum(1 for s in segments if s.backend == backend)}"
            whole = run.block is graph.block and len(run.nodes) == _n_compute(graph.block)
            report, engine_node, engine = _build_one(graph, run.nodes, backend, name, build, options, whole,
                                                     plugin_manager)
            _log_segment(report)
            segments.append(report)
            if engine_node is not None:
                engines[engine_node] = engine
    # a node one engine backend refused may be in a later backend's engine by now
    left = tuple(Refused(b, _node_text(r.node), _src(r.node), r.reason) for b, r in refused
                 if r.node.in_block_list)
    report = PartitionReport(tuple(segments), left)
    if options.require_full_compilation:
        _require_full(report)
    return report, engines


def _log_segment(r: SegmentReport) -> None:
    if r.status == "engine":
        log.info("%s: %d node(s) built into an engine in %.1f ms", r.name, len(r.ops), r.build_seconds * 1e3)
    else:  # the nodes fall back to per-node kernels
        log.info("%s: %d node(s) run node by node (%s): %s", r.name, len(r.ops), r.status, r.reason)


def _n_compute(block) -> int:
    return sum(1 for n in block.nodes if n.kind != "prim::Constant")


def _build_one(graph, nodes, backend, name, build, options, whole: bool, plugin_manager=None):
    ops = tuple(n.kind for n in nodes)
    source = _src(nodes[0])
    if len(nodes) < options.engine_min_block_size and not whole:
        why = f"{len(nodes)} node(s) < Options.engine_min_block_size={options.engine_min_block_size}"
        return SegmentReport(name, backend, ops, source, "too small", why), None, None
    inputs, outputs = boundary(nodes)
    if not outputs:
        return SegmentReport(name, backend, ops, source, "fallback", "the segment's results are unused"), None, None
    sub = segment_graph(nodes, inputs, outputs)
    segment = Segment(name, backend, sub, options.engine_options, _fallback(sub, backend, options, plugin_manager))
    t0 = time.perf_counter()
    try:
        engine = build(segment)
    except EngineBuildError as exc:
        return SegmentReport(name, backend, ops, source, "fallback", str(exc)), None, None
    except SrcoreError as exc:
        return SegmentReport(name, backend, ops, source, "fallback",
                             f"{type(exc).__name__}: {exc}"), None, None
    except Exception as exc:  # a builder bug: keep the model running on the other backends
        return SegmentReport(name, backend, ops, source, "fallback",
                             f"the builder failed: {type(exc).__name__}: {exc}"), None, None
    if not callable(engine):
        return SegmentReport(name, backend, ops, source, "fallback",
                             f"the builder returned {type(engine).__name__}, not a callable engine"), None, None
    seconds = time.perf_counter() - t0
    describe = getattr(engine, "describe", None)
    node = replace_with_engine(graph, nodes, inputs, outputs, backend=backend, name=name, subgraph=sub)
    return SegmentReport(name, backend, ops, source, "engine", "", seconds, describe, engine), node, engine


def _fallback(sub: Graph, backend: str, options: Any, plugin_manager: Any) -> SegmentFallback | None:
    """The node-by-node runner an engine may hand the signatures it cannot plan to: the
    segment on the backends after ``backend``; none if the user requires full compilation."""
    if options.require_full_compilation:
        return None
    rest = options.backends[options.backends.index(backend) + 1:]
    return SegmentFallback(sub, attrs.evolve(options, backends=rest), plugin_manager) if rest else None


def _src(n: Node) -> str | None:
    return str(n.source) if n.source is not None else None


def _require_full(report: PartitionReport) -> None:
    problems = [f"  {s.name} ({len(s.ops)} nodes{f' from {s.source}' if s.source else ''}): "
                f"{s.status}: {s.reason}" for s in report.segments if s.status != "engine"]
    problems += [f"  {r.node}: {r.reason}" + (f"  # {r.source}" if r.source else "") for r in report.refused]
    if problems:
        raise EngineBuildError("Options(require_full_compilation=True), but not every node is in an engine:\n"
                               + "\n".join(problems))

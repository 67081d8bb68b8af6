"""Partition a graph and build its engines, with automatic fallback; the partition report."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import attrs

from ..dispatch.lazy import resolve_ref
from ..errors import EngineBuildError, EngineOptionError, SrcoreError, SrcoreFormatError
from ..ir.graph import Graph, Node
from ..progress import progress
from ..plugin.engine_types import Segment
from .extract import ENGINE_KIND, replace_with_engine, segment_graph
from .fallback import SegmentFallback
from .dependencies import program_order
from ..passes.split_unpack import slice_unpacked_splits
from .lists import freeze_appended_lists
from .segments import Eligibility, boundary, find_candidates
from .short import short_tail, slower_than_fallback

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
    #: the engine itself (for its optional ``profile()``, ``memory()``, ``prepare()``, ``serialize()``)
    engine: Any = attrs.field(default=None, eq=False, repr=False)
    #: the :class:`srcore.plugin.Segment` the engine was built from; None unless built
    segment: Any = attrs.field(default=None, eq=False, repr=False)
    #: True when the engine was loaded from the model's serialized engines (``srcore build``)
    loaded: bool = False

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
                head += f" ({'loaded' if s.loaded else 'built'} in {s.build_seconds * 1e3:.1f} ms)"
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


#: engine options srcore itself interprets (not handed to builders): see StaticModule.warmup and
#: srcore.quantization.engine_calibration
CORE_ENGINE_OPTIONS = frozenset({"profiles", "calibration", "calibrator", "calibration_batch_size"})


def partition_graph(graph: Graph, registry: Any, table: Any, options: Any,
                    fallback_factory: Callable[[Graph, Any], Any] | None = None,
                    stored: dict | None = None, known: dict | None = None) -> tuple[PartitionReport, dict]:
    """Cut ``graph`` (in place) into engine segments for every engine backend in
    ``options.backends``; returns the report and ``{engine node: engine}``.

    ``fallback_factory(graph, options)`` loads a segment's graph for node-by-node execution on
    the backends after the engine's (what ``Segment.fallback`` runs; a ``StaticModule`` in
    practice: the partitioner builds none itself); without it, segments get no fallback.
    ``stored``: the model's serialized engines by segment key (``srcore build``), loaded instead
    of built. ``known``: what the load's shape propagation knew (``Value -> value``), handed to
    each segment (``Segment.known``) so that engines specialize without propagating again."""
    engines: dict[Node, Any] = {}
    segments: list[SegmentReport] = []
    refused: list = []
    if any(registry.engine_builders.get(b) is not None for b in options.backends):
        freeze_appended_lists(graph)   # an appended list would keep its reader out of engines
        # a split whose input's shape only the load's propagation knew (YOLOv8's detect head splits
        # a cat of views with -1): engines take its pieces as slices, not the list and its unpack
        if slice_unpacked_splits(graph):
            for n in graph.all_nodes():   # (the views it made: after the load resolved the schemas)
                if n.schema is None and n.kind in ("aten::slice", "aten::select"):
                    n.schema = registry.schemas.resolve(n)
    for backend in options.backends:
        eb = registry.engine_builders.get(backend)
        if eb is None:
            continue
        what = f"the {backend} engine builder"
        supports = resolve_ref(eb.supports, provider=eb.provider, op=ENGINE_KIND, what=f"supports of {what}")
        elig = Eligibility(graph, table, supports, backend, options.engine_fallback_ops,
                           options.engine_fallback_modules)
        builder = _Builder(graph, backend, eb, options, fallback_factory, elig.chains,
                           {k: d for k, d in (stored or {}).items() if d.backend == backend}, known)
        runs, refusals = find_candidates(graph.block, elig)
        refused.extend((backend, r) for r in refusals if r.node.kind != ENGINE_KIND)
        for run in progress(runs, f"build {backend} engines", total=len(runs), unit="engine"):
            name = f"{backend}_engine_{sum(1 for s in segments if s.backend == backend)}"
            whole = run.block is graph.block and len(run.nodes) == _n_compute(graph.block, elig.chains)
            report, engine_node, engine = builder.one(run.nodes, name, whole)
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
        log.info("%s: %d node(s) %s into an engine in %.1f ms", r.name, len(r.ops), "loaded" if r.loaded else "built",
                 r.build_seconds * 1e3)
    else:  # the nodes fall back to per-node kernels
        log.info("%s: %d node(s) run node by node (%s): %s", r.name, len(r.ops), r.status, r.reason)


def _n_compute(block, chains) -> int:
    """The nodes of ``block`` an engine would hold (not constants, not non-tensor chains)."""
    return sum(1 for n in block.nodes if n.kind != "prim::Constant" and not chains.is_chain(n))


@attrs.define
class _Builder:
    """Builds (or loads) the engines of one backend."""

    graph: Graph
    backend: str
    eb: Any
    options: Any
    fallback_factory: Any
    chains: Any
    stored: dict
    known: dict | None

    def one(self, nodes, name: str, whole: bool):
        """``(report, engine node or None, engine or None)`` for one run of eligible nodes."""
        backend, options = self.backend, self.options
        ops = tuple(n.kind for n in nodes)
        source = _src(nodes[0])

        def refused(status, why):
            return SegmentReport(name, backend, ops, source, status, why), None, None
        small = len(nodes) < options.engine_min_block_size and not whole
        too_small = f"{len(nodes)} node(s) < Options.engine_min_block_size={options.engine_min_block_size}"
        chain = self.chains.needed(nodes)
        absorbed = frozenset(self.chains.absorbed(nodes, chain)) if chain else frozenset()
        inputs, outputs = boundary(nodes, tuple(chain), absorbed)
        if small and not short_tail(nodes, inputs, outputs):
            return refused("too small", too_small)
        if not outputs:
            return refused("fallback", "the segment's results are unused")
        members = program_order([*nodes, *chain]) if chain else nodes
        sub = segment_graph(members, inputs, outputs)
        known = None if self.known is None else {
            o.name: self.known[o] for n in members for o in n.outputs if o in self.known}
        segment = Segment(name, backend, sub, _builder_options(options),
                          _fallback(sub, backend, options, self.fallback_factory), known=known)
        t0 = time.perf_counter()
        try:
            engine, segment = self._make(segment)
        except EngineBuildError as exc:
            return refused("fallback", str(exc))
        except (SrcoreFormatError, EngineOptionError):   # a corrupt serialized engine, a bad option: the user's
            raise
        except SrcoreError as exc:
            return refused("fallback", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a builder bug: keep the model running on the other backends
            return refused("fallback", f"the builder failed: {type(exc).__name__}: {exc}")
        if not callable(engine):
            return refused("fallback", f"the builder returned {type(engine).__name__}, not a callable engine")
        if small:   # a short tail: kept only if the build's timing says it pays (short.py)
            why = slower_than_fallback(engine, segment)
            if why:
                return refused("too small", f"{too_small}; {why}")
        seconds = time.perf_counter() - t0
        describe = getattr(engine, "describe", None)
        taken = tuple(n for n in chain if id(n) in absorbed)   # originals nothing else reads: they go
        node = replace_with_engine(self.graph, nodes, inputs, outputs, backend=backend, name=name, subgraph=sub,
                                   also=taken)
        report = SegmentReport(name, backend, ops, source, "engine", "", seconds, describe, engine, segment,
                               segment.stored is not None)
        return report, node, engine

    def _make(self, segment: Segment):
        """The engine of ``segment``: loaded from the model's serialized engine for its key, if any
        (the builder's ``load``), else built."""
        data = self.stored.get(segment.key()) if self.stored and self.eb.load is not None else None
        if data is not None:
            segment = attrs.evolve(segment, stored=data)
            load = resolve_ref(self.eb.load, provider=self.eb.provider, op=ENGINE_KIND,
                               what=f"load of the {self.backend} engine builder")
            return load(segment), segment
        build = resolve_ref(self.eb.build, provider=self.eb.provider, op=ENGINE_KIND,
                            what=f"build of the {self.backend} engine builder")
        return build(segment), segment


def _builder_options(options: Any) -> dict:
    return {k: v for k, v in dict(options.engine_options).items() if k not in CORE_ENGINE_OPTIONS}


def _fallback(sub: Graph, backend: str, options: Any, factory: Any) -> SegmentFallback | None:
    """The node-by-node runner an engine may hand the signatures it cannot plan to: the
    segment on the backends after ``backend``; none if the user requires full compilation."""
    if options.require_full_compilation:
        return None
    rest = options.backends[options.backends.index(backend) + 1:]
    return SegmentFallback(sub, attrs.evolve(options, backends=rest), factory) if rest and factory else None


def _src(n: Node) -> str | None:
    return str(n.source) if n.source is not None else None


def _require_full(report: PartitionReport) -> None:
    problems = [f"  {s.name} ({len(s.ops)} nodes{f' from {s.source}' if s.source else ''}): "
                f"{s.status}: {s.reason}" for s in report.segments if s.status != "engine"]
    problems += [f"  {r.node}: {r.reason}" + (f"  # {r.source}" if r.source else "") for r in report.refused]
    if problems:
        raise EngineBuildError("Options(require_full_compilation=True), but not every node is in an engine:\n"
                               + "\n".join(problems))

"""``StaticModule``: a model loaded once for static execution (immutable, shareable).

Loading does everything the run loop must not: schema resolution, the
default pass pipeline, shape/dtype propagation, static dispatch (one kernel
per node, per the backend priority list), value slots, liveness of managed
tensors, and (with the codegen executor) the generated block functions. Per
input signature (shapes and dtypes of the inputs) it also computes, once, the
concrete shape of every managed tensor, which the runtimes' memory planners
need.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Sequence

import attrs
import numpy as np

from .._lazylog import INFO, LazyLogger
from .._repr import shared_repr
from ..errors import ShapeError, SrcoreError, SrcoreInputError, UnknownBackendError, UnsupportedOpError
from ..ir.graph import Graph
from ..ir.types import TensorType, Type
from ..memory.planner import TensorRequest, Lifetime, lower_bound, make_planner, no_reuse_bytes
from .inputs import is_scalar_spec
from .inputs import input_types as input_types_of
from .lru import LRU, MAX_SIGNATURES
from ..plugin.types import KERNEL_KINDS
from .options import DEFAULT_BACKENDS, Options
from .process import GraphProcessor, enumerate_values
from .processed import BlockInfo

log = LazyLogger("srcore.runtime")


@attrs.frozen
@shared_repr
class BlockSignature:
    """Concrete facts about one block for one input signature."""

    requests: tuple[TensorRequest, ...]               # managed tensors with a known size (key = slot)
    layouts: dict[int, tuple[tuple[int, ...], str]]   # slot -> (shape, dtype) for those tensors


@attrs.frozen
@shared_repr
class SignatureInfo:
    """Concrete facts about the whole graph for one input signature."""

    blocks: tuple[BlockSignature, ...]
    outputs: dict[int, tuple[tuple[int, ...], str]]   # escaping fresh top-level tensors with known layout


class StaticModule:
    """A model prepared for static execution: immutable after construction, shared by runtimes.

    ``StaticModule(model, options=Options(...), backends=("cpu",))`` accepts a
    :class:`srcore.Model`, or a :class:`srcore.ir.Graph` (whose input types act as
    input specs). ``sm(x)`` runs on the calling thread's own cached runtime, so it is
    safe from any thread (each thread gets its own arena); :class:`srcore.RuntimePool`
    bounds how many exist.
    """

    def __init__(self, model: Any, options: Options | None = None, backends: Sequence[str] | None = None,
                 *, plugin_manager: Any = None):
        from .._gcpause import paused

        with paused():   # a load makes little cyclic garbage: no collection meanwhile (srcore._gcpause)
            self._load(model, options, backends, plugin_manager)

    def _load(self, model: Any, options: Options | None, backends: Sequence[str] | None, plugin_manager: Any) -> None:
        t0 = time.perf_counter()
        clock = _StageClock()
        options = options or Options()
        if backends is not None:
            options = attrs.evolve(options, backends=backends)
        if options.engine_options:   # precision="int8" with calibration data: quantize a float model first
            from ..quantization.engine_calibration import calibrate_for_engines

            model, options = calibrate_for_engines(model, options)
        self.options = options
        self.model = model
        from ..plugin.manager import get_plugin_manager

        pm = plugin_manager or get_plugin_manager()
        self.plugin_manager = pm
        #: the registry this module was loaded with (a selective build's with ``Options.selection``)
        self.registry = registry = pm.registry if options.selection is None else pm.registry_for(options.selection)
        if options.backends == DEFAULT_BACKENDS:
            installed = tuple(b for b in DEFAULT_BACKENDS if b in registry.backends)
            if installed and installed != options.backends:
                options = self.options = attrs.evolve(options, backends=installed)
        required = getattr(model, "plugins", None)  # what the model's file says it needs
        _check_backends(options.backends, registry.backends, required)
        schemas = registry.schemas
        clock.stage("plugins")
        #: the prepared-model cache's part in this load: "hit" (the graph came prepared from it), "miss" (it
        #: will be kept there after the first call, unless nothing is written: PYTHONDONTWRITEBYTECODE), None
        #: (not cached: ``srcore.runtime.prepared_cache``)
        self.prepared_cache = None
        self._cache_entry = None
        self._writer = None
        self._loading = True   # a warm-up call is no first call (``_keep_prepared``)
        cacheable = options.prepared_cache and options.optimize and not options.engine_options \
            and not any(b in registry.engine_builders for b in options.backends)
        hit = None
        if cacheable and not _has_prepared_record(model):
            hit = self._from_cache(model, options, registry, pm)   # before anything parses the model's graph
        if hit is None:
            graph, specs, names = _unpack(model)
            graph = graph.copy()
            input_types = [_spec_type(s) for s in specs]
            rec = _prepared_record(model, input_types, options, registry, pm)
            if rec is None and cacheable and _has_prepared_record(model):   # saved prepared for another load
                hit = self._from_cache(model, options, registry, pm)
        if hit is not None:
            model, graph, specs, names, input_types, rec = hit
        self.input_specs = specs
        self.input_names = names
        #: the model's graph was saved prepared for this load (``save(prepared=True)``): no pass runs
        self.prepared_before = rec is not None
        #: ... and with its propagated types: no shape propagation either (``srcore.runtime.prepared``)
        self.types_before = rec is not None and rec["types"] and not any(
            b in registry.engine_builders for b in options.backends)
        if not self.prepared_before:
            from ..passes.aliases import normalize_aliases
            from ..passes.out_overloads import lower_out_overloads

            normalize_aliases(graph)  # aten::absolute runs as aten::abs: one kernel, one rule (as NormalizeOps)
            lower_out_overloads(graph, schemas)  # aten::sigmoid.out(x, out=b) runs as copy_(b, sigmoid(x))
        #: schemas the model recorded for ops no installed plugin declares (torch's, from its converter)
        self.model_schemas = _model_schemas(model, registry.declared)
        _resolve_schemas(graph, schemas, self.model_schemas)
        if registry.selection is not None:
            _check_selected(graph, registry)
        #: the model's graph as given, schemas resolved (before decompositions and passes)
        self.source_graph = graph.copy()
        from .load_report import LoadReport

        #: what this load could not do at full strength (ops without a shape rule, decomposed ops,
        #: fallbacks, dtypes checked at run time, failed plugins of the model's namespaces)
        self.load_report = LoadReport()
        if not self.prepared_before:   # a graph saved prepared decomposed nothing (srcore.runtime.prepared)
            from ..passes.decompose import decompose

            self.load_report.decomposed.extend(decompose(graph, registry, options.backends))
        clock.stage("schemas")
        earlier = None   # the passes' propagation: the one below re-runs rules only where they changed the graph
        if options.optimize and not self.prepared_before:
            from ..passes.prepare import prepare

            from ..passes.routing_timer import TIMER

            token = None   # a routed MoE layer near its break-even: timed in both forms on these backends
            if TIMER.get() is None:
                def timer(layer, options=options, pm=pm):
                    from .routing_choice import LoadTimer

                    return LoadTimer(options, pm)(layer)
                token = TIMER.set(timer)
            try:
                prepared = prepare(graph, input_types=input_types, rules=registry.shape_rules, schemas=schemas)
            finally:
                if token is not None:
                    TIMER.reset(token)
            graph, earlier = prepared.graph, prepared.propagation
            _resolve_schemas(graph, schemas, self.model_schemas)
            clock.stage("passes")
        _set_input_types(graph, input_types)
        if self.types_before:   # saved with the types this propagation would set (checked at save)
            shapes = None
            _register_ml_dtypes([v.type for v in enumerate_values(graph)])
        else:
            shapes = _propagate(graph, input_types, registry, previous=earlier)
        if _holds_half(graph):   # nodes no backend runs in float16/bfloat16 compute in float32 (opmath)
            from ..passes.widen_half import widen_half

            whole = any(b in registry.engine_builders for b in options.backends)   # engines: float32 end to end
            if widen_half(graph, registry, options.backends, whole=whole):
                _resolve_schemas(graph, schemas, self.model_schemas)
                shapes = _propagate(graph, input_types, registry)
        self.graph = graph
        #: the input types the graph's value types were propagated from: a run whose inputs have exactly
        #: these types (static shapes) plans with them instead of propagating again
        self._typed_for = tuple(input_types)
        if shapes is not None and shapes.missing_rules:
            from .load_report import missing_shape_rules

            self.load_report.missing_shape_rules.extend(missing_shape_rules(shapes.missing_rules, schemas))
        clock.stage("shapes")
        #: what the partitioner did (``srcore.partition.PartitionReport``); None without engine backends
        self.partition = None
        fixed = {}
        if any(b in registry.engine_builders for b in options.backends):
            from ..partition import partition_graph
            from ..partition.kernel import engine_kernels

            self.partition, engines = partition_graph(
                graph, registry, registry.kernel_table, options,
                fallback_factory=lambda g, opts: StaticModule(g, opts, plugin_manager=pm),
                stored=getattr(model, "engines", None), known=shapes.known)
            fixed = engine_kernels(engines, registry)
            clock.stage("partition")
        from ..dispatch import resolve_graph

        failed = _failed_plugins(graph, pm, required)
        try:
            kinds = tuple(k for k in KERNEL_KINDS if options.allow_fallback or k != "fallback")
            resolved = resolve_graph(graph, registry.kernel_table, options.backends, kinds=kinds, fixed=fixed)
        except UnsupportedOpError as exc:
            hints = _install_hints(graph, pm, registry, required, exc.missing)
            if not hints:
                raise
            err = UnsupportedOpError("\n".join([str(exc), *hints]), exc.missing)
            err.hint = hints[0]  # what to install, or the selection to redo, before the generic advice
            raise err from None
        #: the kernel static dispatch chose for every node ({node: ResolvedKernel}; ``srcore select`` reads it)
        self.resolved_kernels = resolved
        self.load_report.failed_plugins.extend(failed)
        self.load_report.dtype_guards.extend(_dtype_guards(resolved))
        self.load_report.fallbacks.extend(_fallbacks(resolved))
        lost = [*self.load_report.failed_plugins,
                *(e.describe() for e in self.load_report.missing_shape_rules)]
        if lost:
            import warnings

            from ..errors import SrcoreWarning

            warnings.warn("loading this model, srcore lost facts it needs:\n  " + "\n  ".join(lost),
                          SrcoreWarning, stacklevel=3)  # the caller of StaticModule(...)
        clock.stage("dispatch")
        proc = GraphProcessor(graph, resolved, plan_memory=options.enable_out_variant)
        self.top: BlockInfo = proc.run()
        self.blocks: tuple[BlockInfo, ...] = tuple(proc.blocks)
        self.values = proc.values
        self.constants = proc.constants
        self.n_slots = len(proc.values)
        self._signatures: LRU = LRU()
        #: signature key -> {slot: (shape, dtype)} the prepared record holds (its first call propagates nothing)
        self._recorded = _recorded_layouts(rec) if self.types_before else {}
        self._plans: LRU = LRU(4 * MAX_SIGNATURES)
        self._lock = threading.Lock()
        clock.stage("process")
        #: the generated Python the codegen executor runs (``srcore.runtime.codegen``); None with the interpreter
        self.codegen = None
        if options.executor == "codegen":
            from .codegen import generate

            self.codegen = generate(self)
            clock.stage("codegen")
        self._local = threading.local()   # this thread's runtime (sm(x), sm.runtime())
        #: inputs of the one signature the specs allow (every input a tensor of fixed shape and
        #: dtype), or None: its facts are computed now and runtimes plan its buffers when created,
        #: so that no call pays for them (the first call costs what any other does)
        self.declared_inputs = _declared_inputs(specs)
        if self.declared_inputs is not None:
            try:
                rt_key = tuple((a.shape, a.dtype.num) for a in self.declared_inputs)
                self.signature_info(rt_key, input_types_of(self.declared_inputs, specs))
                clock.stage("signature")
            except SrcoreError:   # the first call with these inputs reports it, as for any other
                self.declared_inputs = None
        if self._cache_entry is not None:   # its writer, waiting for the first call (before the warm-up: the
            from .prepared_cache import Writer   # first call finds its caches as the warm-up left them)

            self._writer = Writer(self, self._cache_entry)
        if self.declared_inputs is not None:
            # and this thread's runtime (entry point, arenas, the signature's buffers): the first
            # call made from here is then a steady call (other threads build theirs on first use)
            rt = self.runtime()
            clock.stage("runtime")
            if options.warm_up and _warm_up(self, rt, self.declared_inputs, graph):
                clock.stage("warm_up")
        self._loading = False
        self.setup_time = time.perf_counter() - t0
        #: seconds spent in each load stage (plugins, schemas, passes, shapes, [partition,] dispatch, process,
        #: codegen)
        self.load_stages: dict[str, float] = clock.stages
        profiles = dict(options.engine_options).get("profiles")
        if profiles is not None:   # optimization profiles: the engines plan these shapes now
            from .engines import parse_profiles, warmup

            parsed = parse_profiles(profiles, self.input_specs, what="engine_options['profiles']")
            if self.partition is not None:
                warmup(self, parsed)
            self.setup_time = time.perf_counter() - t0
        if log.isEnabledFor(INFO):
            log.info("loaded %d nodes on %s (%s executor) in %.1f ms: %s", self.num_nodes,
                     ",".join(options.backends), options.executor, self.setup_time * 1e3,
                     ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in clock.stages.items()))

    def _from_cache(self, model: Any, options: Options, registry: Any, pm: Any) -> tuple | None:
        """``(model, graph, specs, names, input types, prepared record)`` of the prepared-model cache's entry for
        this load, or None: then ``prepared_cache`` is "miss" if the entry will be written after the first call."""
        from . import prepared_cache

        entry = prepared_cache.entry_for(model, options, registry, pm)
        if entry is None:
            return None
        cached = prepared_cache.read(entry)
        if cached is not None:
            graph, specs, names = _unpack(cached)   # its graph was parsed just now: no one else holds it
            input_types = [_spec_type(s) for s in specs]
            rec = _prepared_record(cached, input_types, options, registry, pm)
            if rec is not None:
                self.prepared_cache = "hit"
                return cached, graph, specs, names, input_types, rec
        # nothing is written under PYTHONDONTWRITEBYTECODE: then no first call hands an entry over
        self.prepared_cache, self._cache_entry = "miss", (None if sys.dont_write_bytecode else entry)
        return None

    def _keep_prepared(self) -> None:
        """After a first call: write this module's prepared-cache entry, if it is to be written, on a thread of its
        own (``StaticRuntime`` calls this; the call's layouts go with the entry). Not for the load's own warm-up
        call: the entry would then be written while the caller's first call runs."""
        if self._loading:
            return
        with self._lock:
            writer, self._writer, self._cache_entry = self._writer, None, None
        if writer is not None:
            writer.go()

    # -- engines ---------------------------------------------------------------------------
    def warmup(self, *profiles, **shapes) -> list[tuple[str, tuple]]:
        """Build the engines' plans for these input shapes now (TensorRT's optimization profiles),
        so that the first call with them pays nothing: ``sm.warmup(x=(8, 3, 64, 64))``,
        ``sm.warmup({"x": (1, 3, 64, 64)}, {"x": (8, 3, 64, 64)})`` or a min/opt/max range
        (``srcore.runtime.engines``); an array stands for its shape. Returns the
        ``(engine, input shapes)`` prepared; without engines, nothing happens."""
        from .engines import parse_profiles, warmup

        given = list(profiles) + ([shapes] if shapes else [])
        if not given or self.partition is None:
            return []
        return warmup(self, parse_profiles(given, self.input_specs, what="warmup"))

    def save(self, path, *, producer: str | None = None, prepared: bool = False) -> list[str]:
        """Write the model with the serialized plans of its engines (every input signature planned
        so far, e.g. by :meth:`warmup`): loading that file rebuilds and times nothing on this
        machine. Returns the names of the engines written (``srcore build``).

        ``prepared=True`` writes the graph as this load's passes left it instead, with a record that
        lets a load with the same input types and backends skip the passes (``srcore.runtime.prepared``;
        not for a load with engines, which rewrite the graph, nor one that decomposed ops)."""
        if prepared:
            return _save_prepared(self, path, producer)
        from .engines import save

        return save(self, path, producer=producer)

    # -- runtimes ------------------------------------------------------------------------
    def runtime(self):
        """The calling thread's cached runtime, the one ``sm(x)`` uses here (created on first use)."""
        rt = getattr(self._local, "rt", None)
        if rt is None:
            from .static_runtime import StaticRuntime

            rt = self._local.rt = StaticRuntime(self)
        return rt

    def __call__(self, *args, **kwargs):
        """Run the model on the calling thread's runtime: safe to call from several threads."""
        try:
            rt = self._local.rt
        except AttributeError:
            rt = self.runtime()
        return rt(*args, **kwargs)

    @property
    def input_tree(self) -> dict | None:
        """A torch.export model's input structure (its metadata's ``input_tree`` JSON, how calls with
        lists and dicts are flattened), parsed once for all the module's runtimes (one per thread);
        None for other models (a StaticModule of a bare Graph has no metadata)."""
        try:
            return self._input_tree
        except AttributeError:
            pass
        from .inputs import INPUT_TREE

        tree = (getattr(self.model, "metadata", None) or {}).get(INPUT_TREE)
        if tree:
            import json   # only for such models: a first run imports no more than it needs

            tree = json.loads(tree)
        self._input_tree = tree or None
        return self._input_tree

    @property
    def num_nodes(self) -> int:
        return sum(len(b.nodes) for b in self.blocks)

    # -- per-signature facts ---------------------------------------------------------------------
    def signature_info(self, key: Any, input_types: Sequence[Type]) -> SignatureInfo:
        """Concrete layouts of every plannable tensor for one input signature (computed once)."""
        info = self._signatures.get(key)
        if info is not None:
            return info
        with self._lock:
            info = self._signatures.get(key)
            if info is None:
                recorded = self._recorded.get(key)   # saved prepared with this signature's layouts
                info = self._compute_signature(input_types) if recorded is None else self._signature(recorded.get)
                self._signatures[key] = info
        return info

    def _compute_signature(self, input_types: Sequence[Type], *, reuse: bool = True) -> SignatureInfo:
        if reuse and tuple(input_types) == self._typed_for:
            types = [v.type for v in enumerate_values(self.graph)]  # the load propagated these very types
        else:
            g = self.graph.copy()
            _set_input_types(g, input_types)
            try:
                _propagate(g, input_types, self.registry)
            except ShapeError as exc:
                raise SrcoreInputError(f"the inputs' shapes do not fit the model: {exc}") from None
            types = [v.type for v in enumerate_values(g)]
        return self._signature(lambda slot: _layout(types[slot]))

    def _signature(self, layout) -> SignatureInfo:
        """The signature facts from ``layout(slot)``: a value's (shape, dtype), None if not static."""
        blocks = []
        for b in self.blocks:
            reqs, layouts = [], {}
            for m in b.managed:
                lay = layout(m.slot)
                if lay is None:
                    continue
                layouts[m.slot] = lay
                reqs.append(TensorRequest(m.slot, Lifetime(m.start, m.end), _nbytes(*lay)))
            blocks.append(BlockSignature(tuple(reqs), layouts))
        outputs = {}
        if self.options.manage_output_tensors:
            for pn in self.top.nodes:
                if pn.fn is not None and pn.fn.kind == "out":
                    for s in pn.outputs:
                        if s in self.top.outputs:
                            lay = layout(s)
                            if lay is not None:
                                outputs[s] = lay
        return SignatureInfo(tuple(blocks), outputs)

    def plan_for(self, block: int, key: Any, requests: Sequence[TensorRequest]):
        """The planner's plan for one block and signature (cached, shared by runtimes)."""
        k = (block, key)
        plan = self._plans.get(k)
        if plan is None:
            plan = make_planner(self.options.memory_planner_algorithm).plan(requests)
            self._plans[k] = plan
        return plan

    # -- reports ----------------------------------------------------------------------------
    def memory_report(self, *inputs) -> list[dict[str, Any]]:
        """Per block: managed tensors, arena bytes, no-reuse sum and the liveness lower bound."""
        rt = self.runtime()
        key, types = rt.signature_of(rt.bind(inputs, {}))
        info = self.signature_info(key, types)
        rows = []
        for b, bs in zip(self.blocks, info.blocks):
            plan = self.plan_for(b.index, key, bs.requests)
            rows.append({
                "block": b.index,
                "owner": b.block.owning_node.kind if b.block.owning_node is not None else "graph",
                "managed_tensors": len(bs.requests),
                "arena_bytes": plan.total_bytes,
                "no_reuse_bytes": no_reuse_bytes(bs.requests),
                "lower_bound_bytes": lower_bound(bs.requests),
                "algorithm": plan.algorithm,
                "requests": bs.requests,
                "plan": plan,
            })
        return rows

    def benchmark_individual_ops(self, inputs: Sequence[Any], warmup: int = 5, runs: int = 20):
        """Per-node timings (the seed's benchmark tool); see :mod:`srcore.runtime.metrics`."""
        from .metrics import benchmark_individual_ops

        return benchmark_individual_ops(self, inputs, warmup, runs)

    def __repr__(self) -> str:
        return (f"<StaticModule {self.num_nodes} nodes, {len(self.blocks)} blocks, "
                f"executor={self.options.executor}, planner={self.options.memory_planner_algorithm}>")


# -- helpers -------------------------------------------------------------------------------------
def _save_prepared(sm: StaticModule, path, producer: str | None, *, cache_entry: bool = False) -> list[str]:
    from ..format.srm import write
    from ..model import Model, collect_params
    from .prepared import KEY, fingerprint, record, same_types

    why = ("it was loaded with optimize=False" if not sm.options.optimize
           else "its engines rewrote the graph" if sm.partition is not None
           else "it decomposed ops" if sm.load_report.decomposed else None)
    if why is not None:
        raise SrcoreError(f"cannot save {path} prepared: {why} (save the model itself: srcore.save)")
    model = sm.model if not isinstance(sm.model, Graph) else Model.from_graph(sm.model)
    graph = sm.graph.copy()
    with sm._lock:   # the signatures planned so far (a call on another thread may be adding one)
        layouts = _signature_layouts(sm)

    def prepared_record(back) -> dict:
        # the types go with the record only if the text carries them exactly and every node had a rule
        types = not sm.load_report.missing_shape_rules and same_types(graph, back)
        return {KEY: record(sm._typed_for, sm.options.backends, fingerprint(sm.registry, sm.options, sm.plugin_manager),
                            types, layouts if types else ())}

    write(Model(graph, collect_params(graph), model.input_specs, model.output_names, model.metadata,
                plugins=model.plugins, op_schemas=model.op_schemas), path, producer=producer, registry=sm.registry,
          more_metadata=prepared_record, data_blake2b=cache_entry, graph_form=cache_entry)
    return []


class _StageClock:
    def __init__(self):
        self.stages: dict[str, float] = {}
        self._t = time.perf_counter()

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        self.stages[name] = now - self._t
        self._t = now


def _signature_layouts(sm: StaticModule) -> list:
    """The layouts of the signatures ``sm`` planned so far (tensor inputs only), as the prepared record
    keeps them: ``[[[shape, dtype number], ...], [[slot, shape, dtype], ...]]`` each."""
    out = []
    for key, info in list(sm._signatures.items()):
        if not all(len(k) == 2 and isinstance(k[0], tuple) and all(type(d) is int for d in k[0]) for k in key):
            continue
        layouts = dict(info.outputs)
        for bs in info.blocks:
            layouts.update(bs.layouts)
        out.append([[[list(shape), num] for shape, num in key],
                    [[slot, list(shape), dtype] for slot, (shape, dtype) in sorted(layouts.items())]])
    return out


def _recorded_layouts(rec: dict) -> dict:
    try:
        return {tuple((tuple(shape), num) for shape, num in key): {slot: (tuple(shape), dtype)
                                                                 for slot, shape, dtype in lays}
                for key, lays in rec.get("signatures", ())}
    except (TypeError, ValueError):   # not what _signature_layouts writes: the first call propagates
        return {}


def _has_prepared_record(model) -> bool:
    return isinstance((getattr(model, "metadata", None) or {}).get("srcore.prepared"), str)


def _prepared_record(model, input_types, options, registry, pm) -> dict | None:
    """The prepared record of ``model`` if it was saved for this very load (``srcore.runtime.prepared``)."""
    if not options.optimize or not _has_prepared_record(model):
        return None
    from .prepared import fingerprints, match

    return match(model, input_types, options.backends, fingerprints(registry, options, pm))


def _check_backends(wanted, known, required=None) -> None:
    """Every backend asked for is installed: a typo must not read as "no kernel for any node"."""
    for b in wanted:
        if b not in known:
            import difflib  # only for the error: ~5 ms of imports at start-up otherwise

            from ..plugin.requirements import backend_hint

            close = difflib.get_close_matches(b, list(known), n=1)
            hint = backend_hint(required, b) or (f" (did you mean {close[0]!r}?)" if close else "")
            raise UnknownBackendError(f"unknown backend {b!r}{hint}; installed backends: "
                                      f"{', '.join(sorted(known)) or 'none'} (srcore plugins lists them)")


def _failed_plugins(graph, pm, required) -> list[str]:
    """Failed plugins whose namespace the graph touches, one line each (named on every such load)."""
    # the plugins this manager loaded (a selective load's: those its registry is built from)
    reports = pm.loaded_reports()
    if not any(r.status == "failed" for r in reports):   # the usual load: requirements' module unimported
        return []
    from ..plugin.requirements import describe_failure, failed_plugins_touching, namespaces_of

    return [describe_failure(r) for r in failed_plugins_touching(namespaces_of(graph), reports, required)]


def _install_hints(graph, pm, registry, required, missing=()) -> list[str]:
    from ..plugin.requirements import install_hints, namespaces_of

    hints = install_hints(required, namespaces_of(graph), registry, pm.reports)
    if registry.selection is not None:
        ops = sorted({m.op for m in missing})
        hints.append(f"the registry is the selective build {registry.selection.source}: "
                     f"{', '.join(ops)} {'is' if len(ops) == 1 else 'are'} not in it, or not for these dtypes "
                     "(run srcore select with this model too)")
    return hints


def _unpack(model) -> tuple[Any, tuple, tuple[str, ...]]:
    from ..ir.graph import Graph

    if isinstance(model, Graph):
        from ..model import InputSpec

        specs = []
        for i, v in enumerate(model.inputs):
            name = v.name or f"input{i}"
            t = v.type
            if isinstance(t, TensorType):
                specs.append(InputSpec(name, t.dtype, t.shape))
            else:
                from .scalar_spec import ScalarSpec

                specs.append(ScalarSpec(name, t))
        model_graph = model
    elif hasattr(model, "graph") and hasattr(model, "input_specs"):
        model_graph = model.graph
        specs = list(model.input_specs)
        if len(specs) != len(model_graph.inputs):  # non-tensor inputs have no InputSpec
            by_name = {s.name: s for s in specs}
            specs = []
            for i, v in enumerate(model_graph.inputs):
                s = by_name.get(v.name)
                if s is None:
                    from .scalar_spec import ScalarSpec

                    s = ScalarSpec(v.name or f"input{i}", v.type)
                specs.append(s)
    else:
        raise SrcoreError(f"StaticModule needs a srcore.Model or a srcore.ir.Graph, not {type(model).__name__}")
    return model_graph, tuple(specs), tuple(s.name for s in specs)


#: runs of the load's warm-up (``_warm_up``) at least: the second binds what kernels bind at a second call
WARM_UP_RUNS = 2
#: and at most: more runs while they are cheap (:data:`WARM_UP_BUDGET`), so that the functions of a call run
#: specialised: CPython 3.11 quickens a function's bytecode at its 8th execution and specialises its instructions
#: at the next (a model of microseconds spent up to 3x its steady time in its first calls, all interpreter)
WARM_UP_MAX_RUNS = 12
#: seconds the warm-up's runs may take before it stops after :data:`WARM_UP_RUNS` (a model of a millisecond or
#: more runs twice: the interpreter's part of its calls is small)
WARM_UP_BUDGET = 0.01


def _warm_up(sm, rt, declared: tuple[np.ndarray, ...], graph) -> bool:
    """Run ``sm`` on inputs of the declared signature through the caller's own path (``sm(x)``: the entry
    point, its signature checks, the output), ``rt``'s arena pages written first, so that the first user
    calls find warm pages, caches, first-use paths and specialised bytecode (Options.warm_up). Twice on the
    same zeros first: what a kernel binds at its second call on the same arrays (trt_like's packed conv
    calls, whose wrappers numba compiles or loads from its cache) is then made here, not in the user's
    second call. Then up to :data:`WARM_UP_MAX_RUNS` runs within :data:`WARM_UP_BUDGET`, other values
    (:func:`_other_values`) in turn with the zeros, so that a branch zeros never take (``if x.sum() > 0``)
    is warm too (zeros only in a graph with a loop of computed trip count: other values might make it
    long). Not for graphs whose run is observable (random, printing, raising, stateful ops) or may not
    end (a while loop); any error is left to the first call. True if it ran."""
    import warnings

    from ..ir.effects import NONDETERMINISTIC_OPS, SIDE_EFFECT_OPS

    if any(n.kind in SIDE_EFFECT_OPS or n.kind in NONDETERMINISTIC_OPS or _while_loop(n) for n in graph.all_nodes()):
        return False
    for arena in rt.arenas:
        arena.touch()
    zeros = [np.zeros(a.shape, a.dtype) for a in declared]
    # other values only where they cannot make a run long: no loop whose trip count is computed
    other = zeros if any(_counted_loop(n) for n in graph.all_nodes()) else None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        for i in range(WARM_UP_MAX_RUNS):
            if i >= WARM_UP_RUNS and time.perf_counter() - t0 > WARM_UP_BUDGET:
                break
            if i < WARM_UP_RUNS or i % 2:
                xs = zeros
            else:
                xs = other = _other_values(declared) if other is None else other
            try:
                sm(*xs)
            except Exception as exc:   # noqa: BLE001 - invalid values (an index); the first call reports its own
                log.debug("warm-up run failed (left to the first call): %s", exc)
                if xs is zeros:
                    break
                other = zeros
    return True


def _other_values(declared: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """Warm-up inputs other than zeros: seeded normal values for floating point, ones for integers (a valid
    index wherever zero is but for a dimension of one), alternating values for booleans."""
    rng = np.random.default_rng(0)
    out = []
    for a in declared:
        if a.dtype.kind in "fc":
            out.append(rng.standard_normal(a.shape).astype(a.dtype))
        elif a.dtype.kind == "b":
            out.append((np.arange(a.size) % 2 == 0).reshape(a.shape))
        else:
            out.append(np.ones(a.shape, a.dtype))
    return out


def _counted_loop(node) -> bool:
    """A ``prim::Loop`` whose trip count is computed at run time (it may come from the inputs' values)."""
    if node.kind != "prim::Loop":
        return False
    count = node.inputs[0]
    return count.node is None or count.node.kind != "prim::Constant"


def _while_loop(node) -> bool:
    """A ``prim::Loop`` whose continue condition is computed in its body: on zeros it may never end."""
    if node.kind != "prim::Loop":
        return False
    cond = node.blocks[0].outputs[0]
    return cond.node is None or cond.node.kind != "prim::Constant"


def _declared_inputs(specs) -> tuple[np.ndarray, ...] | None:
    """Stand-ins (read-only zero views, no memory) of the inputs when every spec is a tensor of fixed
    shape and numpy dtype, i.e. the one signature the model accepts; else None."""
    arrays = []
    for s in specs:
        if is_scalar_spec(s) or s.shape is None or not all(type(d) is int for d in s.shape):
            return None
        try:
            dt = np.dtype(s.dtype) if s.dtype is not None else None
        except TypeError:   # a quantized or extension dtype
            return None
        if dt is None or dt.kind not in "biufc":
            return None
        arrays.append(np.broadcast_to(np.zeros((), dt), s.shape))
    return tuple(arrays)


def _spec_type(spec) -> Type:
    if is_scalar_spec(spec):
        return spec.type
    return TensorType(spec.dtype, spec.shape)


def _set_input_types(graph, types: Sequence[Type]) -> None:
    for v, t in zip(graph.inputs, types):
        v.type = t


def _resolve_schemas(graph, schemas, model_schemas=None) -> None:
    from ..dispatch.resolve import STRUCTURAL_KINDS

    for n in graph.all_nodes():
        if n.schema is None and n.kind not in STRUCTURAL_KINDS:
            try:
                n.schema = schemas.resolve(n)
            except SrcoreError:
                if model_schemas is not None and model_schemas.overloads(n.kind):
                    try:
                        n.schema = model_schemas.resolve(n)
                    except SrcoreError:
                        pass
                # else dispatch reports the node as unsupported, with its kind and source


def _check_selected(graph, registry) -> None:
    """With a selective build, every op of the model as given must be in the selection: named here,
    before the passes rewrite the graph into ops the user never wrote."""
    from ..dispatch.resolve import STRUCTURAL_KINDS

    missing = {}
    for n in graph.all_nodes():
        if n.kind not in STRUCTURAL_KINDS and n.schema is None and registry.shape_rules.get(n.kind) is None:
            missing.setdefault(n.kind, str(n.source) if n.source else None)
    if missing:
        lines = [f"  {op}" + (f"  # {src}" if src else "") for op, src in sorted(missing.items())]
        err = UnsupportedOpError("\n".join([f"{len(missing)} op(s) of this model are not in the selective build "
                                             f"{registry.selection.source}:", *lines]))
        err.hint = "run 'srcore select' with this model too (or load without the selection)"
        raise err


def _model_schemas(model, declared):
    """A schema registry of the model's own recorded schemas (None if it has none)."""
    recorded = getattr(model, "op_schemas", ())
    if not recorded:
        return None
    from ..ops.registry import SchemaRegistry

    reg = SchemaRegistry()
    for s in recorded:
        if s.qualified_name not in declared:
            reg.add(s, provider="the model file (recorded from torch)")
    return reg


def _propagate(graph, input_types, registry, previous=None):
    from ..ops.shapes import propagate

    result = propagate(graph, list(input_types), rules=registry.shape_rules, schemas=registry.schemas,
                       previous=previous)
    for v, t in result.types.items():
        v.type = t
    _register_ml_dtypes([*input_types, *result.types.values()])
    return result


def _holds_half(graph) -> bool:
    from ..ir.types import TensorType

    return any(isinstance(v.type, TensorType) and v.type.dtype in ("float16", "bfloat16")
               for n in graph.all_nodes() for v in n.outputs) or any(
        isinstance(v.type, TensorType) and v.type.dtype in ("float16", "bfloat16") for v in graph.inputs)


def _register_ml_dtypes(types) -> None:
    """Import ml_dtypes if the graph holds a tensor of one of its dtypes (bfloat16, float8, int4): it
    registers them with numpy, and the arenas, kernels and engines allocate them by name. Only then:
    its import is ~5-10 ms of a cold start most models do not need."""
    if "ml_dtypes" in sys.modules:
        return
    from ..ir.types import holds_ml_dtype

    if any(holds_ml_dtype(t) for t in types if t is not None):
        import importlib

        try:
            importlib.import_module("ml_dtypes")
        except ImportError:  # not a core dependency (srcore-cpu brings it): such tensors are then left to their kernels
            pass


def _fallbacks(resolved) -> list:
    if not any(rk.kind == "fallback" for rk in resolved.values()):
        return []
    from .load_entries import Fallback

    return [Fallback(n.schema.qualified_name if n.schema is not None else n.kind, repr(n).strip(),
                     str(n.source) if n.source else None, _who(rk), rk.reason or "")
            for n, rk in resolved.items() if rk.kind == "fallback"]


def _who(rk) -> str:
    p = rk.kernel.provider
    return f"{p.dist or p.name} {p.version or ''}".strip() if p is not None else "?"


def _dtype_guards(resolved) -> list:
    out = []
    for node, rk in resolved.items():
        if rk.checks_dtypes:
            from .load_entries import DtypeGuard

            p = rk.kernel.provider
            who = f"{p.dist or p.name} {p.version or ''}".strip() if p is not None else "?"
            out.append(DtypeGuard(rk.kernel.op, repr(node).strip(), str(node.source) if node.source else None,
                                  f"the {rk.kind} kernel of {who} on {rk.backend} (dtypes {', '.join(rk.kernel.dtypes)})"))
    return out


def _layout(t: Type) -> tuple[tuple[int, ...], str] | None:
    if isinstance(t, TensorType) and t.is_static:
        return tuple(t.shape), t.dtype
    return None


_ITEMSIZE = {"float64": 8, "int64": 8, "complex64": 8, "float32": 4, "int32": 4, "qint32": 4,
             "float16": 2, "bfloat16": 2, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "quint8": 1,
             "qint8": 1, "complex128": 16}


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    """Bytes of a tensor of ``shape`` and ``dtype`` (plugin dtypes by their storage size)."""
    n = _ITEMSIZE.get(dtype, 8)
    for d in shape:
        n *= d
    return n

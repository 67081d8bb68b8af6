"""The records of engine backends: the :class:`Segment` an engine builder compiles, the ops an engine
takes (:class:`EngineOp`) and a serialized engine (:class:`EngineData`).

Part of :mod:`srcore.plugin.types` (which still exports them), in a module of their own so that a start
without engine backends does not build their classes; ``srcore.plugin`` exports them on first use.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs

from .._repr import shared_repr


@attrs.frozen
@shared_repr
class Segment:
    """What an engine builder compiles: one subgraph cut out of a model by the partitioner.

    ``graph`` is a :class:`srcore.ir.Graph` whose inputs are the segment's inputs (typed:
    dtype and shape, possibly with symbolic dims), whose nodes are the segment's nodes in
    program order (constants and parameters as ``prim::Constant``) and whose outputs are the
    values the rest of the model reads. ``options`` are the builder options the user gave
    (``Options(engine_options={...})``).

    The builder returns an *engine*: a callable taking the segment's inputs as numpy arrays
    and returning its outputs the way a native kernel does (one array for one output, a
    tuple for several). Returned arrays belong to the caller (fresh, not views of the inputs
    or of the engine's scratch). An engine may be called from several threads at once (one
    per runtime). Optional: ``describe() -> str`` (layers, fusions, tactics; shown by
    ``srcore inspect --partition``), ``profile(*inputs) -> [(layer, seconds)]`` (``srcore bench
    --per-op``) and ``memory() -> dict`` (its scratch: ``arena_bytes``, ``lower_bound_bytes``,
    ``no_reuse_bytes``, ``tensors``). To refuse a segment, raise
    :class:`srcore.EngineBuildError`: its nodes then run one at a time on the next backends.

    ``fallback`` (None when the user asked for ``require_full_compilation``): a callable that
    runs the segment's graph node by node on the backends after this one, thread-safe, with
    the engine's calling convention. An engine that plans per input signature calls it for
    a signature it cannot plan (a size no tactic takes) instead of failing. Its ``optimized()``
    gives a runtime of the segment's graph as the next backends run it inside the model (optimized),
    what an engine that times itself at build compares against.

    Serialized engines: an engine may offer ``serialize() -> EngineData`` (what
    ``StaticModule.save`` and ``srcore build`` write into the ``.srm``) and ``prepare(shapes)``
    (build what a call with inputs of these shapes needs: optimization profiles,
    ``StaticModule.warmup``). A model that carries an engine for a segment (same
    :meth:`key`) is loaded through ``EngineBuilder.load(segment)`` with :attr:`stored` set.
    """

    name: str
    backend: str
    graph: Any = attrs.field(eq=False)
    options: tuple[tuple[str, Any], ...] = attrs.field(default=(), converter=lambda o: tuple(dict(o).items()))
    fallback: Callable[..., Any] | None = attrs.field(default=None, eq=False, repr=False)
    #: the serialized engine the model carries for this segment (``EngineBuilder.load`` gets it)
    stored: "EngineData | None" = attrs.field(default=None, eq=False, repr=False)
    #: what the load's shape propagation knew of the graph's non-tensor values, by value name (None:
    #: not given): :meth:`specialize` for the shapes the graph is typed with uses it instead of
    #: propagating again
    known: dict | None = attrs.field(default=None, eq=False, repr=False)

    def option(self, key: str, default: Any = None) -> Any:
        """The builder option ``key`` (``default`` when the user did not set it)."""
        return dict(self.options).get(key, default)

    def key(self) -> str:
        """What identifies this segment across processes and machines: a SHA-256 of the backend, the
        segment graph's IR text and its constants' bytes (computed on each call: it reads every
        weight). Engine caches and serialized engines are keyed by it."""
        from ..partition.keys import segment_key

        return segment_key(self.backend, self.graph)

    def specialize(self, shapes) -> Any:
        """The segment's graph for concrete input ``shapes`` (one per input): every value typed,
        derived non-tensor values (``aten::size`` chains, see :class:`srcore.plugin.ArgInfo`) folded into
        constants. Raises :class:`srcore.EngineBuildError` when the shapes do not fit."""
        from ..partition.specialize import specialize

        return specialize(self.graph, shapes, known=self.known)


@attrs.frozen
@shared_repr
class EngineOp:
    """One op an engine backend takes: the arguments it needs as constants (baked into the engine)
    and what else it requires (ranks, values), for ``srcore list-ops --engine``."""

    op: str
    constants: tuple[str, ...] = ()
    notes: str = ""


@attrs.frozen
@shared_repr
class EngineData:
    """A serialized engine: ``meta`` (JSON-able: str keys; lists, numbers, strings, bools, None)
    and named numpy ``arrays``, written into a ``.srm`` file beside the model (no pickle)."""

    backend: str
    meta: dict = attrs.field(eq=False)
    arrays: dict = attrs.field(factory=dict, eq=False, repr=False)

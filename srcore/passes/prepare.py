"""``prepare_for_static_runtime``: the default pass pipeline.

Order (see ``docs/passes.md``)::

    normalize_aliases, lower_out_overloads, inline_calls, fixpoint(fold_identity_tests, inline_constant_ifs),
    remove_training_ops, functionalize_inplace, fold_cell_decompositions,
    fixpoint(inline_constant_ifs, fold_constants, fold_known_values, peephole, simplify_loops, unroll_loops,
             eliminate_dead_code, eliminate_common_subexpressions, slice_unpacked_splits, scalar_operands,
             fold_identity_tests(same_ssa=False)),
    dense_routing, fold_batch_norm, merge_parallel_convs, fuse_ops (if fuse), eliminate_dead_code

The input graph is never modified: the pipeline runs on a copy, which is returned.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import attrs

from .._repr import shared_repr
from ..ir.graph import Graph
from ..ir.types import Type
from . import triggers as T
from .constant_fold import DEFAULT_MAX_ELEMENTS
from .known_values import KnownValues
from .manager import Fixpoint, LazyFn, Pass, PassManager, PassStats  # noqa: F401  (PassStats: the results')


@attrs.define
@shared_repr
class PrepareResult:
    """The prepared graph and what each pass did."""

    graph: Graph
    stats: list[PassStats]
    #: the pipeline's latest shape propagation (a ``PropagationResult``; None without input types):
    #: a propagation of the prepared graph given it as ``previous`` re-runs rules only where passes
    #: changed the graph since
    propagation: object = None


def _named(name: str, target: str, triggers: T.Trigger | None = None, **kwargs) -> Pass:
    """The pass ``srcore.passes.<target>`` (``"module:function"``), imported when it first runs."""
    return Pass(name, LazyFn(f"srcore.passes.{target}", kwargs), triggers)


def default_pipeline(*, fuse: bool = True, inference: bool = True, evaluator=None,
                     max_fold_elements: int = DEFAULT_MAX_ELEMENTS, unroll_max_nodes: int | None = None,
                     functions: Mapping[str, Graph] | None = None, max_iterations: int = 10,
                     known: KnownValues | None = None, rules=None, schemas=None) -> list:
    """The passes ``prepare_for_static_runtime`` runs, for a :class:`PassManager`. ``known``: what the
    propagation before the passes found, reused by ``fold_known_values`` until a pass changes the graph.
    ``rules`` and ``schemas``: the shape rules and ``SchemaRegistry`` the passes read (a load's registry;
    default: the process-wide one). ``unroll_max_nodes``: default ``srcore.passes.unroll.DEFAULT_MAX_NODES``.
    A pass with triggers (``srcore.passes.triggers``) is skipped, unimported, on a graph without them."""
    unroll = {} if unroll_max_nodes is None else {"max_nodes": unroll_max_nodes}
    core = Fixpoint((
        _named("inline_constant_ifs", "inline:inline_constant_ifs", T.INLINE_CONSTANT_IFS),
        _named("fold_constants", "constant_fold:fold_constants", evaluator=evaluator, max_elements=max_fold_elements),
        _named("fold_known_values", "known_values:fold_known_values", reuse=known, rules=rules, schemas=schemas),
        _named("peephole", "peephole:peephole", T.peephole_rules),
        _named("simplify_loops", "loops:simplify_loops", T.LOOPS),
        _named("unroll_loops", "unroll:unroll_loops", T.LOOPS, **unroll),
        _named("eliminate_dead_code", "dce:eliminate_dead_code"),
        _named("eliminate_common_subexpressions", "cse:eliminate_common_subexpressions"),
        _named("remove_list_mutation", "list_mutation:remove_list_mutation", T.list_mutations),
        _named("slice_unpacked_splits", "split_unpack:slice_unpacked_splits", T.SPLITS),
        _named("scalar_operands", "scalar_operands:scalar_operands", T.SCALAR_OPERANDS),
        _named("fold_identity_tests", "identity_tests:fold_identity_tests", T.IDENTITY_TESTS, same_ssa=False),
    ), max_iterations=max_iterations, name="simplify")
    passes: list = [
        _named("normalize_aliases", "aliases:normalize_aliases"),
        _named("lower_out_overloads", "out_overloads:lower_out_overloads", schemas=schemas),
        _named("inline_calls", "inline:inline_calls", T.INLINE_CALLS, functions=functions or {}),
        Fixpoint((_named("fold_identity_tests", "identity_tests:fold_identity_tests", T.IDENTITY_TESTS),
                  _named("inline_constant_ifs", "inline:inline_constant_ifs", T.INLINE_CONSTANT_IFS)),
                 max_iterations=max_iterations, name="identity_tests"),
        _named("remove_training_ops", "training_ops:remove_training_ops", T.TRAINING_OPS, inference=inference),
        _named("functionalize_inplace", "functionalize:functionalize_inplace", T.in_place_ops, schemas=schemas),
        _named("fold_cell_decompositions", "recurrent_cells:fold_cell_decompositions", T.cell_decompositions),
        core,
        _named("dense_routing", "dense_routing:dense_routing", T.ROUTING, rules=rules, schemas=schemas),
        _named("fold_batch_norm", "fold_bn:fold_batch_norm", T.BATCH_NORMS),
        _named("merge_parallel_convs", "merge_convs:merge_parallel_convs", T.parallel_convs),
    ]
    if fuse:
        passes.append(_named("fuse_ops", "fuse:fuse_ops"))
    passes.append(_named("eliminate_dead_code", "dce:eliminate_dead_code"))
    return passes


def _set_input_types(graph: Graph, input_types: Sequence[Type] | Mapping[str, Type]) -> None:
    if isinstance(input_types, Mapping):
        by_name = {v.name: v for v in graph.inputs}
        unknown = sorted(set(input_types) - set(by_name))
        if unknown:
            from ..errors import PassError

            raise PassError(f"prepare_for_static_runtime: no graph input named {', '.join(unknown)} "
                            f"(inputs: {', '.join(str(n) for n in by_name)})")
        for name, t in input_types.items():
            if t is not None:
                by_name[name].type = t
    else:
        if len(input_types) != len(graph.inputs):
            from ..errors import PassError

            raise PassError(f"prepare_for_static_runtime: {len(input_types)} input types for "
                            f"{len(graph.inputs)} graph inputs")
        for v, t in zip(graph.inputs, input_types):
            if t is not None:  # None: keep the graph's own type
                v.type = t


def _propagate(graph: Graph, rules, schemas) -> KnownValues | None:
    """Type the graph from its input types; what it knew, for fold_known_values to reuse."""
    from ..ops.shapes import propagate

    result = propagate(graph, rules=rules, schemas=schemas)
    return KnownValues(graph, result.known, result)


def prepare_for_static_runtime(graph: Graph, *, input_types=None, fuse: bool = True, inference: bool = True,
                               evaluator=None, verify: bool | None = None, report: list | None = None,
                               propagate_shapes: bool = True, **options) -> Graph:
    """Run the default pipeline on a copy of ``graph`` and return the prepared copy.

    ``input_types`` (a list, or a mapping by input name) sets the graph inputs'
    types first, and shapes are propagated so that shape-dependent rewrites
    can fire. ``report``, if given,
    is a list extended with one :class:`PassStats` per pass run. ``verify``
    (default: ``SRCORE_DEBUG_PASSES``) checks the graph after every pass.
    Other keyword ``options`` go to :func:`default_pipeline`.
    """
    result = prepare(graph, input_types=input_types, fuse=fuse, inference=inference, evaluator=evaluator,
                     verify=verify, propagate_shapes=propagate_shapes, **options)
    if report is not None:
        report.extend(result.stats)
    return result.graph


def prepare(graph: Graph, *, input_types=None, fuse: bool = True, inference: bool = True, evaluator=None,
            verify: bool | None = None, propagate_shapes: bool = True, rules=None, schemas=None,
            **options) -> PrepareResult:
    """Like :func:`prepare_for_static_runtime`, returning a :class:`PrepareResult`."""
    g = graph.copy()
    if input_types is not None:
        _set_input_types(g, input_types)
    known = _propagate(g, rules, schemas) if propagate_shapes and input_types is not None else None
    pm = PassManager(default_pipeline(fuse=fuse, inference=inference, evaluator=evaluator, known=known, rules=rules,
                                      schemas=schemas, **options), verify=verify)
    pm.run(g)
    return PrepareResult(g, pm.stats, known.result if known is not None else None)

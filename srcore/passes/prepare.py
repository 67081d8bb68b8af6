"""``prepare_for_static_runtime``: the default pass pipeline.

Order (see ``docs/passes.md``)::

    normalize_aliases, lower_out_overloads, inline_calls, fixpoint(fold_identity_tests, inline_constant_ifs),
    remove_training_ops, functionalize_inplace, fold_cell_decompositions,
    fixpoint(inline_constant_ifs, fold_constants, fold_known_values, peephole, simplify_loops, unroll_loops,
             eliminate_dead_code, eliminate_common_subexpressions, remove_list_mutation, slice_unpacked_splits,
             scalar_operands, fold_identity_tests(same_ssa=False)),
    fold_batch_norm, fuse_ops (if fuse), eliminate_dead_code

The input graph is never modified: the pipeline runs on a copy, which is returned.
"""
from __future__ import annotations

import functools
from typing import Callable, Mapping, Sequence

import attrs

from .._repr import shared_repr
from ..ir.graph import Graph
from ..ir.types import Type
from .aliases import normalize_aliases
from .out_overloads import lower_out_overloads
from .recurrent_cells import fold_cell_decompositions
from .constant_fold import DEFAULT_MAX_ELEMENTS, fold_constants
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_bn import fold_batch_norm
from .functionalize import functionalize_inplace
from .fuse import fuse_ops
from .inline import inline_calls, inline_constant_ifs
from .known_values import KnownValues, fold_known_values
from .list_mutation import remove_list_mutation
from .loops import simplify_loops
from .manager import Fixpoint, Pass, PassManager, PassStats
from .peephole import peephole
from .scalar_operands import scalar_operands
from .identity_tests import fold_identity_tests
from .split_unpack import slice_unpacked_splits
from .training_ops import remove_training_ops
from .unroll import DEFAULT_MAX_NODES, unroll_loops


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


def _named(name: str, fn: Callable, **kwargs) -> Pass:
    return Pass(name, functools.partial(fn, **kwargs) if kwargs else fn)


def default_pipeline(*, fuse: bool = True, inference: bool = True, evaluator=None,
                     max_fold_elements: int = DEFAULT_MAX_ELEMENTS, unroll_max_nodes: int = DEFAULT_MAX_NODES,
                     functions: Mapping[str, Graph] | None = None, max_iterations: int = 10,
                     known: KnownValues | None = None, rules=None, schemas=None) -> list:
    """The passes ``prepare_for_static_runtime`` runs, for a :class:`PassManager`. ``known``: what the
    propagation before the passes found, reused by ``fold_known_values`` until a pass changes the graph.
    ``rules`` and ``schemas``: the shape rules and ``SchemaRegistry`` the passes read (a load's registry;
    default: the process-wide one)."""
    core = Fixpoint((
        _named("inline_constant_ifs", inline_constant_ifs),
        _named("fold_constants", fold_constants, evaluator=evaluator, max_elements=max_fold_elements),
        _named("fold_known_values", fold_known_values, reuse=known, rules=rules, schemas=schemas),
        _named("peephole", peephole),
        _named("simplify_loops", simplify_loops),
        _named("unroll_loops", unroll_loops, max_nodes=unroll_max_nodes),
        _named("eliminate_dead_code", eliminate_dead_code),
        _named("eliminate_common_subexpressions", eliminate_common_subexpressions),
        _named("remove_list_mutation", remove_list_mutation),
        _named("slice_unpacked_splits", slice_unpacked_splits),
        _named("scalar_operands", scalar_operands),
        _named("fold_identity_tests", fold_identity_tests, same_ssa=False),
    ), max_iterations=max_iterations, name="simplify")
    passes: list = [
        _named("normalize_aliases", normalize_aliases),
        _named("lower_out_overloads", lower_out_overloads, schemas=schemas),
        _named("inline_calls", inline_calls, functions=functions or {}),
        Fixpoint((_named("fold_identity_tests", fold_identity_tests), _named("inline_constant_ifs", inline_constant_ifs)),
                 max_iterations=max_iterations, name="identity_tests"),
        _named("remove_training_ops", remove_training_ops, inference=inference),
        _named("functionalize_inplace", functionalize_inplace, schemas=schemas),
        _named("fold_cell_decompositions", fold_cell_decompositions),
        core,
        _named("fold_batch_norm", fold_batch_norm),
    ]
    if fuse:
        passes.append(_named("fuse_ops", fuse_ops))
    passes.append(_named("eliminate_dead_code", eliminate_dead_code))
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

"""Graph passes and ``prepare_for_static_runtime`` (the default pipeline); see docs/passes.md.

Names are imported on first use: a load imports only the passes its graph's op kinds can trigger
(``srcore.passes.triggers``)."""
from __future__ import annotations

from .._lazy import lazy_getattr
# these three share their module's name: imported here, so that importing the module (the pipeline
# does) cannot leave the package's attribute the module instead of the function
from .peephole import RULES, peephole
from .prepare import PrepareResult, default_pipeline, prepare, prepare_for_static_runtime
from .scalar_operands import scalar_operands

_TABLE = {
    "normalize_aliases": "srcore.passes.aliases:normalize_aliases",
    "lower_out_overloads": "srcore.passes.out_overloads:lower_out_overloads",
    "default_evaluator": "srcore.passes.constant_fold:default_evaluator",
    "fold_constants": "srcore.passes.constant_fold:fold_constants",
    "eliminate_common_subexpressions": "srcore.passes.cse:eliminate_common_subexpressions",
    "eliminate_dead_code": "srcore.passes.dce:eliminate_dead_code",
    "fold_batch_norm": "srcore.passes.fold_bn:fold_batch_norm",
    "merge_parallel_convs": "srcore.passes.merge_convs:merge_parallel_convs",
    "functionalize_inplace": "srcore.passes.functionalize:functionalize_inplace",
    "FUSIONS": "srcore.passes.fuse:FUSIONS",
    "fuse_ops": "srcore.passes.fuse:fuse_ops",
    "inline_calls": "srcore.passes.inline:inline_calls",
    "inline_constant_ifs": "srcore.passes.inline:inline_constant_ifs",
    "remove_list_mutation": "srcore.passes.list_mutation:remove_list_mutation",
    "simplify_loops": "srcore.passes.loops:simplify_loops",
    "Fixpoint": "srcore.passes.manager:Fixpoint",
    "Pass": "srcore.passes.manager:Pass",
    "PassManager": "srcore.passes.manager:PassManager",
    "PassStats": "srcore.passes.manager:PassStats",
    "summarize": "srcore.passes.manager:summarize",
    "fold_cell_decompositions": "srcore.passes.recurrent_cells:fold_cell_decompositions",
    "slice_unpacked_splits": "srcore.passes.split_unpack:slice_unpacked_splits",
    "remove_training_ops": "srcore.passes.training_ops:remove_training_ops",
    "unroll_loops": "srcore.passes.unroll:unroll_loops",
}

__all__ = [
    "prepare_for_static_runtime", "prepare", "PrepareResult", "default_pipeline",
    "PassManager", "Pass", "Fixpoint", "PassStats", "summarize",
    "eliminate_dead_code", "fold_constants", "default_evaluator", "peephole", "RULES",
    "eliminate_common_subexpressions", "inline_calls", "inline_constant_ifs", "simplify_loops",
    "unroll_loops", "remove_training_ops", "fold_batch_norm", "merge_parallel_convs", "fuse_ops", "FUSIONS", "normalize_aliases",
    "lower_out_overloads", "functionalize_inplace", "slice_unpacked_splits", "scalar_operands",
    "fold_cell_decompositions", "remove_list_mutation",
]


__getattr__ = lazy_getattr(__name__, _TABLE, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""Graph passes and ``prepare_for_static_runtime`` (the default pipeline); see docs/passes.md.

Names are imported on first use: a load imports only the passes its graph's op kinds can trigger
(``srcore.passes.triggers``), and the package itself nothing."""
from __future__ import annotations

import sys
import types

from .._lazy import lazy_getattr

#: names that are a function of this package and the module defining it
_SAME_NAME = frozenset({"peephole", "prepare", "scalar_operands"})


class _Package(types.ModuleType):
    """Importing ``srcore.passes.<name>`` binds the module to the package's attribute ``<name>``: for
    the names of ``_SAME_NAME`` the package keeps the function (as if imported here eagerly), so a
    pipeline importing ``peephole`` only when it runs leaves ``srcore.passes.peephole`` the function."""

    def __setattr__(self, name, value):
        if name in _SAME_NAME and isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

_TABLE = {
    "peephole": "srcore.passes.peephole:peephole",
    "RULES": "srcore.passes.peephole:RULES",
    "prepare": "srcore.passes.prepare:prepare",
    "PrepareResult": "srcore.passes.prepare:PrepareResult",
    "default_pipeline": "srcore.passes.prepare:default_pipeline",
    "prepare_for_static_runtime": "srcore.passes.prepare:prepare_for_static_runtime",
    "scalar_operands": "srcore.passes.scalar_operands:scalar_operands",
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

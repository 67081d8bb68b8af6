"""Graph passes and ``prepare_for_static_runtime`` (the default pipeline); see docs/passes.md."""
from __future__ import annotations

from .aliases import normalize_aliases
from .out_overloads import lower_out_overloads
from .constant_fold import default_evaluator, fold_constants
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_bn import fold_batch_norm
from .functionalize import functionalize_inplace
from .fuse import FUSIONS, fuse_ops
from .inline import inline_calls, inline_constant_ifs
from .list_mutation import remove_list_mutation
from .loops import simplify_loops
from .manager import Fixpoint, Pass, PassManager, PassStats, summarize
from .peephole import RULES, peephole
from .recurrent_cells import fold_cell_decompositions
from .prepare import PrepareResult, default_pipeline, prepare, prepare_for_static_runtime
from .scalar_operands import scalar_operands
from .split_unpack import slice_unpacked_splits
from .training_ops import remove_training_ops
from .unroll import unroll_loops

__all__ = [
    "prepare_for_static_runtime", "prepare", "PrepareResult", "default_pipeline",
    "PassManager", "Pass", "Fixpoint", "PassStats", "summarize",
    "eliminate_dead_code", "fold_constants", "default_evaluator", "peephole", "RULES",
    "eliminate_common_subexpressions", "inline_calls", "inline_constant_ifs", "simplify_loops",
    "unroll_loops", "remove_training_ops", "fold_batch_norm", "fuse_ops", "FUSIONS", "normalize_aliases",
    "lower_out_overloads", "functionalize_inplace", "slice_unpacked_splits", "scalar_operands",
    "fold_cell_decompositions", "remove_list_mutation",
]

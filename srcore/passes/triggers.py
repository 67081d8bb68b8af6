"""The op kinds that can make each default pass fire, so the pipeline skips (and never imports) a
pass none of whose kinds is in the graph.

Each set is read off the pass's own matching code (the module named beside it): a pass looks only
at nodes of these kinds (base names, ``srcore.ir.names.base_op``), so on a graph without them it
changes nothing. A pass without an entry here always runs. ``tests/test_passes_triggers.py`` builds
a graph on which each pass fires and checks that the pipeline runs it, and checks over the zoo that
skipping gives the same prepared graph as running every pass.
"""
from __future__ import annotations

from typing import Callable, Union

#: a frozenset of base op kinds (the pass may fire when one is present) or a predicate over the set
Trigger = Union[frozenset, Callable[[frozenset], bool]]

#: inline.inline_calls: ``node.kind != "prim::CallFunction"`` -> skip
INLINE_CALLS = frozenset({"prim::CallFunction"})
#: inline.inline_constant_ifs: ``node.kind != "prim::If"`` -> skip
INLINE_CONSTANT_IFS = frozenset({"prim::If"})
#: identity_tests.fold_identity_tests: ``n.kind not in ("aten::__is__", "aten::__isnot__")`` -> skip
IDENTITY_TESTS = frozenset({"aten::__is__", "aten::__isnot__"})
#: training_ops: the kinds ``_removable`` accepts (the module takes its tables from here)
DROPOUT_OPS = frozenset({"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
                         "aten::feature_alpha_dropout", "aten::dropout_", "aten::feature_dropout_",
                         "aten::alpha_dropout_", "aten::feature_alpha_dropout_"})
#: dropout with the output's quantization parameters before ``p`` and ``training``
QUANTIZED_DROPOUT = "quantized::dropout"
IDENTITY_OPS = frozenset({"aten::detach", "aten::detach_", "prim::profile", "prim::profile_ivalue"})
TRAINING_OPS = DROPOUT_OPS | IDENTITY_OPS | {QUANTIZED_DROPOUT}
#: loops.simplify_loops and unroll.unroll_loops: ``node.kind == "prim::Loop"`` only
LOOPS = frozenset({"prim::Loop"})
#: split_unpack._rewrite: ``kind not in (chunk, split, split_with_sizes, unbind)`` -> no rewrite
SPLITS = frozenset({"aten::chunk", "aten::split", "aten::split_with_sizes", "aten::unbind"})
#: scalar_operands: ``_OPS.get(base_kind(n))`` (the module takes its table from here)
SCALAR_OPERAND_OPS = {"aten::add": 3, "aten::sub": 3, "aten::rsub": 3, "aten::mul": 2, "aten::div": 2}
SCALAR_OPERANDS = frozenset(SCALAR_OPERAND_OPS)
#: fold_bn.fold_batch_norm: ``kind == "aten::batch_norm"`` or ``_native_batch_norm_legit_no_training``
BATCH_NORMS = frozenset({"aten::batch_norm", "aten::_native_batch_norm_legit_no_training"})
#: dense_routing: ``base_kind(n) in _SOURCES`` (the module takes them from here), or a bool mask's
#: ``out[mask] = y``: its sinks
ROUTING_SOURCES = frozenset({"aten::where", "aten::nonzero_numpy", "aten::nonzero"})
ROUTING = ROUTING_SOURCES | {"aten::index_put", "aten::index_put_"}
#: merge_convs.merge_parallel_convs: a sum (``_is_add``) with a conv term (``_conv_spec``)
CONVS = frozenset({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution"})


#: peephole: the op kinds of its rules (``peephole.RULES_LIST``: ``table.get(base_kind(node))``), but for
#: ``f(permute(x))``, whose ``f`` (one of these; the module takes them from here) fires only on a permute's output
PERMUTE_COMMUTING = ("aten::sigmoid", "aten::tanh", "aten::relu", "aten::silu", "aten::exp", "aten::neg",
                     "aten::abs", "aten::hardswish", "aten::hardsigmoid", "aten::gelu", "aten::leaky_relu")
PEEPHOLE_OPS = frozenset({
    "aten::t", "aten::transpose", "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::contiguous", "aten::to",
    "aten::type_as", "aten::detach", "aten::clone", "prim::unchecked_cast", "aten::size", "aten::dim", "aten::len",
    "aten::is_floating_point", "prim::ListUnpack", "prim::TupleUnpack", "prim::TupleIndex", "aten::__getitem__",
    "aten::cat", "aten::__is__", "aten::__isnot__", "aten::_native_multi_head_attention", "aten::max", "aten::min",
    "aten::sort", "aten::topk"})


def peephole_rules(kinds: frozenset) -> bool:
    return not kinds.isdisjoint(PEEPHOLE_OPS) or ("aten::permute" in kinds and not kinds.isdisjoint(PERMUTE_COMMUTING))


def parallel_convs(kinds: frozenset) -> bool:
    return "aten::add" in kinds and not kinds.isdisjoint(CONVS)


#: list_mutation: a ``prim::ListConstruct`` list is rewritten only if one of these writes it (or
#: ``aten::list`` copies it); a list a split made, only if a split is there (``_rewrite``)
LIST_WRITES = ("aten::append", "aten::extend", "aten::add_", "aten::insert", "aten::_set_item")


def list_mutations(kinds: frozenset) -> bool:
    return not kinds.isdisjoint(LIST_WRITES) or "aten::list" in kinds or not kinds.isdisjoint(SPLITS)


def in_place_ops(kinds: frozenset) -> bool:
    """functionalize.functionalize_inplace rewrites only ``aten::<name>_`` (not ``__<name>__``)."""
    return any(k.startswith("aten::") and k.endswith("_") and not k.endswith("__") for k in kinds)


#: recurrent_cells: every LSTM / GRU match needs a tanh, a sigmoid, a linear and a
#: ``prim::ListUnpack`` of a chunk or split (``_match_lstm``, ``_match_gru``, ``_chunk_part``, ``_linear``)
CELL_ADD = ("aten::add", "aten::add_")
CELL_MUL = ("aten::mul", "aten::mul_")
CELL_SUB = ("aten::sub",)   # (sub_ would write the state the cell reads)
CELL_SIGMOID = ("aten::sigmoid", "aten::sigmoid_")
CELL_TANH = ("aten::tanh", "aten::tanh_")
CELL_CHUNK = ("aten::chunk", "aten::unsafe_chunk")
CELL_SPLIT = ("aten::split_with_sizes", "aten::unsafe_split_with_sizes")


def cell_decompositions(kinds: frozenset) -> bool:
    return ("aten::linear" in kinds and "prim::ListUnpack" in kinds
            and not kinds.isdisjoint(CELL_SIGMOID) and not kinds.isdisjoint(CELL_TANH)
            and not kinds.isdisjoint(CELL_CHUNK + CELL_SPLIT))


def fires(trigger: Trigger | None, kinds: frozenset) -> bool:
    """Whether a pass with ``trigger`` may change a graph whose base op kinds are ``kinds``."""
    if trigger is None:
        return True
    if isinstance(trigger, frozenset):
        return not trigger.isdisjoint(kinds)
    return bool(trigger(kinds))

"""Constant propagation and folding.

A node whose inputs are all constants is evaluated and replaced by a
``prim::Constant``. Never folded: nodes with side effects or blocks, random
ops (``aten::rand``, dropout in training, ...), in-place ops and list
mutators, lists that someone mutates, and tensor results larger than
``max_elements``. ``prim::If`` with a constant condition is replaced by the
branch taken; ``prim::Loop`` with 0 trips or a constant-false condition by its
initial values.

Lists of tensors are never constants, but an op reading a ``prim::ListConstruct`` of
constant tensors is folded when what it makes can be: a tensor (``stack``, ``cat`` of
constant tensors), or a list of tensors that only ``prim::ListUnpack`` nodes read
(``meshgrid``, ``split``, ``unbind``): each unpacked tensor becomes a constant. So an
anchor grid built from constant ``arange`` calls (``stack(meshgrid(...))``) is one constant.

The evaluator is a callable ``evaluate(node, args) -> list`` (one value per
output) that raises ``NotImplementedError`` when it cannot; the default tries
the scalar/list table (:mod:`.scalar_eval`), then tensor ops through the
kernel table when one is available (:func:`kernel_evaluator`).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir.constants import type_of_constant
from ..ir.graph import Graph, Node
from ..ir.types import AnyType, BoolType, FloatType, IntType, NumberType, TensorType, contains_tensor
from ..ir.alias import is_mutated, mutated_inputs
from ._util import (const_or, has_side_effects, inline_block, is_const, is_nondeterministic, replace_with_values,
                    unique_param_name, walk_blocks)

Evaluator = Callable[[Node, list], list]

#: never folded even with constant inputs
NEVER_FOLD = frozenset({"prim::Constant", "prim::Param", "prim::Return", "prim::Uninitialized",
                        "prim::CallFunction", "prim::CallMethod", "prim::GetAttr", "prim::profile",
                        "prim::profile_ivalue", "aten::empty", "aten::empty_like", "aten::new_empty"})

DEFAULT_MAX_ELEMENTS = 1 << 16


def default_evaluator(node: Node, args: list) -> list:
    """The scalar table first, then tensor kernels (if the dispatch table can provide one)."""
    from .scalar_eval import eval_scalar_op   # (imported on the first foldable node: most graphs have none)

    try:
        return eval_scalar_op(node.kind, args, len(node.outputs))
    except NotImplementedError:
        pass
    except Exception as exc:  # e.g. ZeroDivisionError: leave the node to fail at run time
        if not any(_is_tensor(a) for a in args):
            raise NotImplementedError(str(exc)) from exc
    return kernel_evaluator(node, args)  # tensors: the kernels decide


def kernel_evaluator(node: Node, args: list) -> list:
    """Evaluate a tensor op with a kernel of the loaded plugins; ``NotImplementedError`` if none."""
    if not any(contains_tensor(o.type) for o in node.outputs) and not any(_is_tensor(a) for a in args):
        raise NotImplementedError("not a tensor op")
    from .kernel_eval import evaluate_with_kernels

    try:
        return evaluate_with_kernels(node, args)
    except NotImplementedError:
        raise
    except Exception as exc:  # the kernel rejected the arguments: leave it to fail at run time
        raise NotImplementedError(f"kernel evaluation failed: {exc}") from exc


def fold_constants(graph: Graph, *, evaluator: Evaluator | None = None,
                   max_elements: int = DEFAULT_MAX_ELEMENTS) -> bool:
    """Fold constant nodes, inline constant ``prim::If``, drop loops that never run; True if changed."""
    evaluate = evaluator or default_evaluator
    changed = False
    progress = True
    while progress:  # inlining an If can expose more constants
        progress = False
        for block in list(walk_blocks(graph.block)):
            for node in list(block.nodes):
                if node.owning_block is None:  # removed with an enclosing node
                    continue
                if _fold_control(node) or _fold_node(node, evaluate, max_elements) \
                        or _fold_through_lists(node, evaluate, max_elements):
                    progress = changed = True
    return changed


def _fold_control(node: Node) -> bool:
    if node.kind == "prim::If":
        cond = const_or(node.inputs[0], None)
        if isinstance(cond, bool):
            inline_block(node, 0 if cond else 1)
            return True
    elif node.kind == "prim::Loop":
        from .loops import never_runs

        if never_runs(node):
            replace_with_values(node, list(node.inputs[2:]))
            return True
    return False


def foldable(node: Node) -> bool:
    if node.kind in NEVER_FOLD or node.blocks or not node.outputs:
        return False
    if not all(is_const(v) for v in node.inputs):
        return False
    if is_nondeterministic(node) or mutated_inputs(node) or has_side_effects(node):
        return False
    # a list the program mutates later must stay a fresh list per execution
    return not any(is_mutated(o) for o in node.outputs)


def _fold_node(node: Node, evaluate: Evaluator, max_elements: int) -> bool:
    if not foldable(node):
        return False
    args = [const_or(v) for v in node.inputs]
    try:
        results = evaluate(node, args)
    except NotImplementedError:
        return False
    if len(results) != len(node.outputs) or not all(_small(r, max_elements) for r in results):
        return False
    results = [_coerce(out.type, r) for out, r in zip(node.outputs, results)]
    if any(r is _MISMATCH for r in results):
        return False
    values = []
    for out, r in zip(node.outputs, results):
        try:
            t = _const_type(out.type, r)
        except TypeError:
            return False
        if _is_tensor(r):  # a fresh contiguous array, never a view of a (read-only) parameter
            r = np.array(r, order="C", copy=True)   # (np.ascontiguousarray makes a 0-d array 1-d)
        c = node.graph.insert_constant(r, t, before=node)
        c.node.source = node.source
        if _is_tensor(r):
            c.node.attrs["param"] = unique_param_name(node.graph, f"{out.name or 'folded'}.folded")
        values.append(c)
    names = [o.name for o in node.outputs]
    replace_with_values(node, values)
    for c, name in zip(values, names):
        if name is not None:
            node.graph.rename(c, name)
    return True


def _const_list(v) -> list | None:
    """The elements of ``v`` when a ``prim::ListConstruct`` of known constants makes it and nothing
    mutates it, else None."""
    n = v.node
    if n.kind != "prim::ListConstruct" or is_mutated(v) or not all(is_const(i) for i in n.inputs):
        return None
    return [const_or(i) for i in n.inputs]


def _fold_through_lists(node: Node, evaluate: Evaluator, max_elements: int) -> bool:
    """Fold ``node`` whose inputs are constants or constant lists of tensors (at least one): its
    tensor and scalar outputs become constants, a list-of-tensors output (read only by
    ``prim::ListUnpack`` nodes of its length) one constant per element; True if folded."""
    if node.kind in NEVER_FOLD or node.kind == "prim::ListConstruct" or node.blocks or not node.outputs:
        return False
    args, lists = [], 0
    for v in node.inputs:
        if is_const(v):
            args.append(const_or(v))
            continue
        elems = _const_list(v)
        if elems is None:
            return False
        args.append(elems)
        lists += 1
    if not lists or is_nondeterministic(node) or mutated_inputs(node) or has_side_effects(node) \
            or any(is_mutated(o) for o in node.outputs):
        return False
    try:
        results = evaluate(node, args)
    except NotImplementedError:
        return False
    if len(results) != len(node.outputs):
        return False
    plan = []   # (output, [(value to replace, result)])
    for out, r in zip(node.outputs, results):
        if isinstance(r, (list, tuple)) and any(_is_tensor(e) for e in r):
            if not all(_is_tensor(e) and _small(e, max_elements) for e in r) or not out.uses or \
                    any(u.user.kind != "prim::ListUnpack" or len(u.user.outputs) != len(r) for u in out.uses):
                return False
            plan.append((out, [(o, e) for u in out.uses for o, e in zip(u.user.outputs, r)]))
        else:
            r = _coerce(out.type, r)
            if r is _MISMATCH or not _small(r, max_elements):
                return False
            plan.append((out, [(out, r)]))
    made = []
    for _, pairs in plan:
        for old, r in pairs:
            try:
                t = _const_type(old.type, r)
            except TypeError:
                return False
            made.append((old, r, t))
    unpacks = {id(u.user): u.user for out, _ in plan for u in out.uses if u.user.kind == "prim::ListUnpack"}
    names = []
    for old, r, t in made:
        if _is_tensor(r):
            r = np.array(r, order="C", copy=True)
        c = node.graph.insert_constant(r, t, before=node)
        c.node.source = node.source
        if _is_tensor(r):
            c.node.attrs["param"] = unique_param_name(node.graph, f"{old.name or 'folded'}.folded")
        names.append((c, old.name))
        old.replace_all_uses_with(c)
    for unpack in unpacks.values():
        unpack.destroy()
    node.destroy()
    for c, name in names:
        if name is not None:
            node.graph.rename(c, name)
    return True


_MISMATCH = object()


def _coerce(declared, value):
    """``value`` as the output's declared scalar type (``min(2.5, 2)`` is the float 2.0 in TorchScript)."""
    if isinstance(declared, FloatType) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(declared, IntType) and (isinstance(value, float) or isinstance(value, bool)):
        return _MISMATCH
    if isinstance(declared, BoolType) and not isinstance(value, bool):
        return _MISMATCH
    return value


def _is_tensor(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def _small(x: Any, max_elements: int) -> bool:
    if _is_tensor(x):
        return int(getattr(x, "size", 0)) <= max_elements
    if isinstance(x, (list, tuple)):  # lists of tensors stay lists built at run time
        return not any(_is_tensor(e) for e in x) and all(_small(e, max_elements) for e in x) \
            and len(x) <= max_elements
    return True


def _const_type(declared, value):
    computed = type_of_constant(value)
    if _is_tensor(value) or isinstance(declared, (AnyType, NumberType)) or contains_tensor(declared):
        return computed
    if isinstance(declared, TensorType):
        return computed
    return declared

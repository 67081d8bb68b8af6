"""Removal of ops that only matter in training.

* ``aten::dropout``, ``feature_dropout``, ``alpha_dropout``,
  ``feature_alpha_dropout`` (and their in-place ``_`` forms): replaced by
  their input when the ``train`` argument is the constant ``False``; with
  ``inference=True`` (what ``prepare_for_static_runtime`` uses) whatever the
  flag says, because a static runtime only runs inference (a model scripted
  in training mode still evaluates as in ``model.eval()``).
* ``quantized::dropout(x, scale, zero_point, p, training)`` (FX's quantized ``F.dropout``): the
  same; in eval torch returns ``x`` itself, its parameters kept (the scale and zero point unused).
* ``aten::detach`` / ``aten::detach_``: the input (no autograd here).
* profiling nodes (``prim::profile``, ``prim::profile_ivalue``): their input.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node
from ._util import base_kind, const_or, replace_with_values, walk_blocks

from .triggers import DROPOUT_OPS, IDENTITY_OPS, QUANTIZED_DROPOUT  # noqa: F401  (the pipeline skips by them)


def identity_observed(node: Node) -> bool:
    """True when the graph compares the node's output by identity (``x.detach() is x`` is False in torch:
    ``detach`` makes a new tensor object), so replacing it by its input would change the answer."""
    return any(u.user.kind in ("aten::__is__", "aten::__isnot__") for o in node.outputs for u in o.uses)


def _removable(node: Node, inference: bool) -> bool:
    kind = base_kind(node)
    if kind in IDENTITY_OPS:
        return len(node.inputs) >= 1 and len(node.outputs) <= 1 and not identity_observed(node)
    if kind in DROPOUT_OPS and len(node.inputs) == 3:
        return inference or const_or(node.inputs[2], None) is False
    if kind == QUANTIZED_DROPOUT and len(node.inputs) == 5:
        return inference or const_or(node.inputs[4], None) is False
    return False


def remove_training_ops(graph: Graph, *, inference: bool = True) -> bool:
    """Replace dropout/detach/profiling nodes by their input; True if any was removed."""
    changed = False
    for block in list(walk_blocks(graph.block)):
        for node in list(block.nodes):
            if _removable(node, inference):
                replace_with_values(node, [node.inputs[0]] * len(node.outputs))
                changed = True
    return changed

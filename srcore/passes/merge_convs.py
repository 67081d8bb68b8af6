"""Merging parallel convolutions that read one input and are summed (structural re-parameterisation).

``conv_kxk(x) + conv_1x1(x) + x`` (RepVGG, MobileOne), ``conv_1xk(x) + conv_kx1(x) + conv_kxk(x)``
(ACNet) and the like become one ``conv_kxk(x)``: each smaller kernel is zero-padded into the largest
one at its centre, an identity term ``x`` becomes a centred one-hot kernel per group, an inference
``batch_norm(x)`` term the same one-hot scaled by ``gamma / sqrt(var + eps)``, and the biases (and
the batch norm's shift) are summed. Runs after :mod:`srcore.passes.fold_bn`, which has folded each
branch's batch norm into its conv.

A sum is a tree of ``aten::add(a, b, 1)`` whose inner adds have no other reader. Its terms on one
input ``x`` merge when: at least two are convs (``aten::conv1d/2d/3d`` or non-transposed
``aten::_convolution``) with constant weight, bias (or ``None``), stride, integer padding, dilation
and groups; the convs agree on stride, dilation, groups and weight shape but the kernel; each
conv's output has the sum as its only reader; every conv is centred on the same point
(``2 * padding - dilation * (kernel - 1)`` equal) and one conv has the largest kernel in every
dimension (its padding and lists are kept); an ``x`` or ``batch_norm(x)`` term needs stride 1, as
many input as output channels and ``2 * padding == dilation * (kernel - 1)``. The result equals the
sum up to reassociation of the float additions. Other terms of the sum are added to the merged conv.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from ._util import base_kind, const_or, is_const, unique_param_name, walk_blocks
from .fold_bn import CONV_OPS, inference_affine, tensor_const

#: a term of the sum: ("conv", node) / ("identity", None) / ("bn", node)
_IDENTITY, _BN, _CONV = "identity", "bn", "conv"


def merge_parallel_convs(graph: Graph) -> bool:
    """Merge every eligible sum of parallel convolutions into one conv; True if any was merged."""
    changed = False
    for block in list(walk_blocks(graph.block)):
        for node in list(block.nodes):
            if node.in_block_list and _is_add(node) and not _inner_add(node):
                changed |= _merge(node)
    return changed


def _is_add(node: Node) -> bool:
    return (base_kind(node) == "aten::add" and len(node.inputs) == 3
            and const_or(node.inputs[2], None) == 1 and len(node.outputs) == 1)


def _inner_add(node: Node) -> bool:
    """Whether ``node`` is a non-root add of a larger sum (its parent handles it)."""
    uses = node.output.uses
    return len(uses) == 1 and _is_add(uses[0].user) and uses[0].offset < 2 and uses[0].user.owning_block is node.owning_block


def _sum_tree(root: Node) -> tuple[list[Node], list[Value]]:
    adds, leaves, stack = [], [], [root]
    while stack:
        add = stack.pop()
        adds.append(add)
        for v in add.inputs[:2]:
            n = v.node
            if (_is_add(n) and n.owning_block is root.owning_block and len(v.uses) == 1):
                stack.append(n)
            else:
                leaves.append(v)
    return adds, leaves


def _conv_spec(node: Node):
    """(x, W, b, stride, padding, dilation, groups) of a mergeable conv, else None."""
    kind = base_kind(node)
    if kind not in CONV_OPS or len(node.outputs) != 1 or len(node.output.uses) != 1:
        return None
    if kind == "aten::_convolution":
        if len(node.inputs) < 9 or const_or(node.inputs[6], None) is not False:
            return None
        groups = const_or(node.inputs[8], None)
    else:
        if len(node.inputs) != 7:
            return None
        groups = const_or(node.inputs[6], None)
    W = tensor_const(node.inputs[1])
    b_value = node.inputs[2]
    b = None if is_const(b_value) and const_or(b_value) is None else tensor_const(b_value)
    if W is None or (b is None and not (is_const(b_value) and const_or(b_value) is None)):
        return None
    nd = W.ndim - 2
    lists = [const_or(node.inputs[i], None) for i in (3, 4, 5)]
    lists = [[v] * nd if isinstance(v, int) else v for v in lists]
    if (not isinstance(groups, int) or groups < 1 or nd < 1
            or not all(isinstance(v, (list, tuple)) and len(v) == nd and all(isinstance(i, int) for i in v)
                       for v in lists)):
        return None  # a string padding ("same") or an unknown list keeps its conv
    return node.inputs[0], W, b, tuple(lists[0]), tuple(lists[1]), tuple(lists[2]), groups


def _classify(v: Value):
    """(input, term kind, node) of a sum leaf; the input is None for a term on no conv's input."""
    n = v.node
    spec = _conv_spec(n)
    if spec is not None:
        return spec[0], _CONV, n
    if len(v.uses) == 1 and inference_affine(n) is not None and len(n.outputs) == 1:
        return n.inputs[0], _BN, n
    return v, _IDENTITY, None


def _merge(root: Node) -> bool:
    adds, leaves = _sum_tree(root)
    if len(leaves) < 2:
        return False
    terms = [_classify(v) for v in leaves]
    # the input read by most conv terms
    inputs = [x for x, kind, _ in terms if kind == _CONV]
    if len(inputs) == 0:
        return False
    x = max(inputs, key=lambda v: sum(v is u for u in inputs))
    chosen = [(kind, n, v) for (xi, kind, n), v in zip(terms, leaves) if xi is x]
    convs = [(n, _conv_spec(n)) for kind, n, _ in chosen if kind == _CONV]
    if len(convs) < 2 or any(n.owning_block is not root.owning_block for kind, n, _ in chosen if n is not None):
        return False
    plan = _plan(convs, [kind for kind, _, _ in chosen if kind != _CONV], [n for kind, n, _ in chosen if kind == _BN])
    if plan is None:
        return False
    keep, W, b = plan
    g = root.graph
    wname = keep.inputs[1].node.attrs.get("param") or "weight"
    for index, value, name in ((1, W, wname), (2, b, wname[:-len("weight")] + "bias" if wname.endswith("weight")
                                               else wname + ".bias")):
        const = g.insert_constant(value, before=keep)
        const.node.attrs["param"] = unique_param_name(g, f"{name}.merged")
        keep.replace_input(index, const)
    merged_leaves = {id(v) for _, _, v in chosen}
    rest = [v for v in leaves if id(v) not in merged_leaves]
    total = keep.output
    for v in rest:  # the other terms of the sum, added to the merged conv
        add = g.create(root.kind, (total, v, root.inputs[2]), (root.output.type,))
        add.source = root.source
        add.insert_before(root)
        total = add.output
    total.type = root.output.type
    root.output.replace_all_uses_with(total)
    name = root.output.name
    for add in adds:  # root first: each add's only reader is destroyed before it
        add.destroy()
    if rest and name is not None:
        g.rename(total, name)
    for kind, n, _ in chosen:
        if n is not None and n is not keep:
            n.destroy()
    return True


def _plan(convs, extra_kinds, bns):
    """(the conv kept, merged weight, merged bias) or None when the terms do not merge exactly."""
    specs = [s for _, s in convs]
    W0 = specs[0][1]
    nd = W0.ndim - 2
    stride, dil, groups = specs[0][3], specs[0][5], specs[0][6]
    if any(s[3] != stride or s[5] != dil or s[6] != groups or s[1].shape[:2] != W0.shape[:2]
           or s[1].dtype != W0.dtype for s in specs):
        return None
    if not np.issubdtype(W0.dtype, np.floating):
        return None
    # centre of each conv relative to the output grid (in half input steps): all equal
    centres = {tuple(2 * p - d * (k - 1) for p, d, k in zip(s[4], s[5], s[1].shape[2:])) for s in specs}
    if extra_kinds:
        centres.add((0,) * nd)
        cout, cin_g = W0.shape[:2]
        if any(s != 1 for s in stride) or cin_g * groups != cout:
            return None
    if len(centres) != 1:
        return None
    K = tuple(max(s[1].shape[2 + i] for s in specs) for i in range(nd))
    keep = next((n for n, s in convs if tuple(s[1].shape[2:]) == K), None)
    if keep is None:
        return None
    cout, cin_g = W0.shape[:2]
    W = np.zeros((cout, cin_g) + K, np.float64)
    b = np.zeros(cout, np.float64)
    for s in specs:
        k = s[1].shape[2:]
        if any((Ki - ki) % 2 for Ki, ki in zip(K, k)):
            return None
        W[(slice(None), slice(None)) + tuple(slice((Ki - ki) // 2, (Ki - ki) // 2 + ki)
                                              for Ki, ki in zip(K, k))] += s[1]
        if s[2] is not None:
            if s[2].shape != (cout,):
                return None
            b += s[2]
    if extra_kinds:
        if any(Ki % 2 == 0 for Ki in K):
            return None
        centre = tuple(Ki // 2 for Ki in K)
        one_hot = np.zeros((cout, cin_g), np.float64)
        one_hot[np.arange(cout), np.arange(cout) % cin_g] = 1.0
        n_identity = sum(kind == _IDENTITY for kind in extra_kinds)
        scale = np.full(cout, float(n_identity))
        for bn in bns:
            s, shift = inference_affine(bn)
            if s.shape != (cout,):
                return None
            scale += s
            b += shift
        W[(slice(None), slice(None)) + centre] += one_hot * scale[:, None]
    return keep, W.astype(W0.dtype), b.astype(W0.dtype)

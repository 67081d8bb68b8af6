"""``functionalize_inplace``: an in-place op whose write nobody can see becomes its functional op.

TorchScript keeps ``nn.ReLU6(inplace=True)`` as ``%y = aten::hardtanh_(%x, ...)`` (and
``ReLU(inplace=True)``, ``x += y``, ``x.mul_(s)`` alike). Engine backends refuse a node that
writes in place and every node sharing memory with what it writes, and fusions match the
functional ops; so ``%y = aten::op_(%x, ...)`` becomes ``%y = aten::op(%x, ...)`` when:

* ``aten::op`` has an overload with the in-place overload's name and arguments;
* ``%x`` is a fresh tensor, made by a node of the same block that is no view, in-place op,
  container or control flow (not a graph or block input, nor a constant), and the in-place node
  is its only use: nothing reads ``%x`` after the write, or before it through an alias;
* ``%x`` is floating point and every other tensor argument has its dtype, so the functional
  op's type promotion gives ``%x``'s dtype, as the in-place op does (``masked_fill``'s bool mask
  takes no part in promotion: ``F.multi_head_attention_forward``'s
  ``zeros_like(mask, dtype=float).masked_fill_(mask, -inf)``), nor do integer indices
  (``index_add_``, ``scatter_``, ...); or ``%x`` is quantized and
  the op takes no other tensor (an activation, which keeps ``%x``'s scale and zero point).
"""
from __future__ import annotations

from ..ir.alias import alias_sources, mutated_inputs
from ..ir.graph import Graph, Node
from ..ir.quant import is_quantized
from ..ir.types import TensorType
from ._util import dtype_of, has_side_effects, is_floating

__all__ = ["functionalize_inplace"]


#: (in-place op, argument position) of tensors that take no part in type promotion: a bool mask,
#: an integer index (a GCN's ``torch.zeros(n, d).index_add_(0, dst, messages)``)
_NOT_PROMOTED = frozenset({("aten::masked_fill_", 1), ("aten::index_add_", 2), ("aten::index_copy_", 2),
                           ("aten::index_fill_", 2), ("aten::scatter_", 2), ("aten::scatter_add_", 2),
                           ("aten::scatter_reduce_", 2)})


def _fresh(node: Node) -> bool:
    """True if ``node``'s input 0 is a tensor no other value can see."""
    x = node.inputs[0]
    src = x.node
    if src.owning_block is not node.owning_block or src.kind in ("prim::Param", "prim::Constant"):
        return False
    if src.blocks or alias_sources(src) or has_side_effects(src) or len(x.uses) != 1:
        return False
    dtype = dtype_of(x)
    others = [v for i, v in enumerate(node.inputs[1:], 1) if isinstance(v.type, TensorType)
              and (node.kind, i) not in _NOT_PROMOTED]
    if is_quantized(dtype):  # ReLU6(inplace=True) after a quantized conv: an activation keeps x's qparams
        return not others
    return is_floating(dtype) and all(dtype_of(v) == dtype for v in others)


def functionalize_inplace(graph: Graph, schemas=None) -> bool:
    """Rewrite every eligible in-place node in place; True if any changed. ``schemas``: the
    ``SchemaRegistry`` to find functional overloads in (default: the core's declarations)."""
    if schemas is None:
        from ..ops.registry import cached_default_registry

        schemas = cached_default_registry()
    changed = False
    for n in list(graph.all_nodes()):
        name = n.kind.rpartition("::")[2]
        if (not n.kind.startswith("aten::") or not name.endswith("_") or name.endswith("__")
                or len(n.outputs) != 1 or not n.inputs or mutated_inputs(n) != [0] or not _fresh(n)):
            continue
        try:
            schema = n.schema or schemas.resolve(n)
        except Exception:  # noqa: BLE001 - an op srcore does not declare: dispatch reports it
            continue
        functional = n.kind[:-1]
        qname = f"{functional}.{schema.overload_name}" if schema.overload_name else functional
        func = schemas.find(qname)
        if func is None or [a.name for a in func.arguments] != [a.name for a in schema.arguments]:
            continue
        n.meta["functionalized"] = n.kind  # the name the model used, for reports
        n.kind = functional
        n.schema = None  # resolved again against the functional overload
        n.meta.pop("shapes.unresolved", None)
        changed = True
    return changed

"""``slice_unpacked_splits``: a split into a list that is only unpacked becomes one view per piece.

``x1, x2 = x.chunk(2, dim=1)`` (ShuffleNet's channel split; also ``split``, ``split_with_sizes``,
``unbind``) is a ``Tensor[]`` op followed by ``prim::ListUnpack``: engine backends hold neither,
so the model is cut in two around every split. When the list has no other use and the split
dim's size is static, each piece becomes ``aten::slice(x, dim, start, end, 1)`` (``aten::select``
for ``unbind``): the same views, in ops every backend takes.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.types import TensorType
from ._util import base_kind, const_or

__all__ = ["slice_unpacked_splits"]

_Missing = object()


def _bounds(kind: str, args: list, n: int) -> list[tuple[int, int]] | None:
    """``(start, end)`` of each piece of a dim of size ``n``, or None."""
    if kind == "aten::chunk":
        chunks = args[0]
        if not isinstance(chunks, int) or chunks <= 0:
            return None
        size = -(-n // chunks) if n else 0
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if size else [0] * chunks
    elif kind == "aten::split" and isinstance(args[0], int):
        size = args[0]
        if size <= 0 or n == 0:
            return None
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    elif kind in ("aten::split", "aten::split_with_sizes") and isinstance(args[0], (list, tuple)):
        sizes = list(args[0])
        if not all(isinstance(s, int) and s >= 0 for s in sizes) or sum(sizes) != n:
            return None
    else:
        return None
    out, start = [], 0
    for s in sizes:
        out.append((start, start + s))
        start += s
    return out


def _rewrite(unpack: Node) -> bool:
    lst = unpack.inputs[0]
    split = lst.node
    kind = base_kind(split)
    if kind not in ("aten::chunk", "aten::split", "aten::split_with_sizes", "aten::unbind") or len(lst.uses) != 1:
        return False
    x = split.inputs[0]
    shape = x.type.shape if isinstance(x.type, TensorType) else None
    args = [const_or(v, _Missing) for v in split.inputs[1:]]
    if shape is None or _Missing in args or not args:
        return False
    dim = args[-1]
    if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
        return False
    dim %= len(shape)
    n = shape[dim]
    if not isinstance(n, int):
        return False
    g = split.graph
    if kind == "aten::unbind":
        if n != len(unpack.outputs):
            return False
        pieces = [("aten::select", [dim, i]) for i in range(n)]
    else:
        bounds = _bounds(kind, args[:-1], n)
        if bounds is None or len(bounds) != len(unpack.outputs):
            return False
        pieces = [("aten::slice", [dim, s, e, 1]) for s, e in bounds]
    views = []
    for out, (op, consts) in zip(list(unpack.outputs), pieces):
        inputs = [x] + [g.insert_constant(c, before=unpack) for c in consts]
        view = g.create(op, inputs, [out.type], source=split.source)
        if "scope" in split.meta:
            view.meta["scope"] = split.meta["scope"]
        view.insert_before(unpack)
        out.replace_all_uses_with(view.output)
        views.append((view.output, out.name))
    unpack.destroy()
    split.destroy()
    for v, name in views:  # the pieces keep the names the model gave them
        if name is not None:
            g.rename(v, name)
    return True


def slice_unpacked_splits(graph: Graph) -> bool:
    """Rewrite every eligible split + unpack pair; True if any changed."""
    changed = False
    for n in list(graph.all_nodes()):
        if n.kind == "prim::ListUnpack" and n.inputs:
            changed |= _rewrite(n)
    return changed

"""``slice_unpacked_splits``: a split into a list that is only unpacked (or indexed by constants)
becomes one view per piece.

``x1, x2 = x.chunk(2, dim=1)`` (ShuffleNet's channel split; also ``split``, ``split_with_sizes``,
``unbind``) is a ``Tensor[]`` op followed by ``prim::ListUnpack``: engine backends hold neither,
so the model is cut in two around every split. When the list has no other use and the split
dim's size is static, each piece becomes ``aten::slice(x, dim, start, end, 1)`` (``aten::select``
for ``unbind``): the same views, in ops every backend takes. A scripted loop over the pieces
(Res2Net's ``spx[i]``), once unrolled, reads the list by ``aten::__getitem__`` with constant
indices instead of unpacking it: those reads become the same views.
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


def _readers(lst) -> list[tuple[Node, list]] | None:
    """``(node, [(output, piece index)])`` for each reader of list ``lst``: one ``prim::ListUnpack``,
    or only ``aten::__getitem__`` with constant int indices (a negative one still unresolved); None
    if anything else reads it (an append, a len, a return...)."""
    uses = [u.user for u in lst.uses]
    if len(uses) == 1 and uses[0].kind == "prim::ListUnpack":
        return [(uses[0], list(zip(uses[0].outputs, range(len(uses[0].outputs)))))]
    out = []
    for n in uses:
        i = const_or(n.inputs[1], _Missing) if n.kind == "aten::__getitem__" and len(n.inputs) == 2 else _Missing
        if type(i) is not int or n.inputs[0] is not lst:
            return None
        out.append((n, [(n.output, i)]))
    return out or None


def _rewrite(lst) -> bool:
    split = lst.node
    kind = base_kind(split)
    if kind not in ("aten::chunk", "aten::split", "aten::split_with_sizes", "aten::unbind"):
        return False
    readers = _readers(lst)
    if readers is None:
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
        pieces = [("aten::select", [dim, i]) for i in range(n)]
    else:
        bounds = _bounds(kind, args[:-1], n)
        if bounds is None:
            return False
        pieces = [("aten::slice", [dim, s, e, 1]) for s, e in bounds]
    unpacking = readers[0][0].kind == "prim::ListUnpack"
    if unpacking and len(pieces) != len(readers[0][0].outputs):
        return False
    if not all(-len(pieces) <= i < len(pieces) for _, outs in readers for _, i in outs):
        return False   # torch raises at run time: leave it to the kernel
    views = []
    for reader, outs in readers:
        for out, i in outs:
            op, consts = pieces[i]
            inputs = [x] + [g.insert_constant(c, before=reader) for c in consts]
            view = g.create(op, inputs, [out.type], source=split.source)
            if "scope" in split.meta:
                view.meta["scope"] = split.meta["scope"]
            view.insert_before(reader)
            out.replace_all_uses_with(view.output)
            views.append((view.output, out.name))
        reader.destroy()
    split.destroy()
    for v, name in views:  # the pieces keep the names the model gave them
        if name is not None:
            g.rename(v, name)
    return True


def slice_unpacked_splits(graph: Graph) -> bool:
    """Rewrite every eligible split and its unpack or constant reads; True if any changed."""
    changed = False
    for n in list(graph.all_nodes()):
        if len(n.outputs) == 1 and n.kind.startswith("aten::") and n.output.uses:
            changed |= _rewrite(n.output)
    return changed

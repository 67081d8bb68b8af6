"""``remove_list_mutation``: a list built and mutated in straight-line code becomes plain SSA values.

TorchScript keeps Python's mutable lists: YOLOv8's C2f does ``y = list(self.cv1(x).chunk(2, 1));
y.extend(m(y[-1]) for m in self.m); return self.cv2(torch.cat(y, 1))``, a DenseNet appends each
layer's output to the feature list the next layer's ``cat`` reads, ``F.interpolate`` appends its
scale factors, ``nn.MultiheadAttention`` unpacks a list it appended to. Every write makes the list
and what reads it "share memory with a value written in place", so no engine takes them and the
model is cut around each one. As torch's ``RemoveListMutation`` and ``UseVariadicCat`` do, this pass
follows such a list through its block and gives every reader the list as it stands there:
``__getitem__`` with a constant index becomes the element, ``len`` a constant, ``ListUnpack`` the
elements, ``list(l)`` a new ``ListConstruct``, and any other reader (``cat``, ``stack``, an op taking
a ``Tensor[]``, the block's return) a ``ListConstruct`` of the elements so far (a ``prim::Constant``
when they are all constants); the writes go.

A list qualifies when it is made by ``prim::ListConstruct`` or by a split (``chunk``, ``split``,
``split_with_sizes``, ``unbind`` of a static dim: its pieces become a ``ListUnpack``'s outputs, which
``slice_unpacked_splits`` then makes views), and every use of it (or of what ``+=`` / ``_set_item``
return, the same list) is

- a write in the list's own block (not in a loop or branch) whose result is not otherwise used:
  ``append``, ``extend`` or ``+=`` of a ``ListConstruct`` nothing writes, ``insert`` or ``_set_item``
  at a constant index (in range for ``_set_item``);
- a read, anywhere after it (in a nested block too: it sees the list as the node holding it does):
  one of those above, or an ``aten::`` op that writes none of its inputs and returns no list, tuple
  or dict that could hold the list itself;
- the return of the list's own block.

Anything else (a loop carrying the list, a branch writing it, a container or call receiving it, an
unknown op, an index that is not a constant or out of range) leaves the list as it is.
"""
from __future__ import annotations

from ..ir.alias import CONTAINER_MUTATORS, mutated_inputs
from ..ir.graph import RETURN, Block, Graph, Node, Use, Value
from ..ir.types import ANY, ListType, OptionalType, TensorType, _SimpleType
from ._util import base_kind, const_or
from .split_unpack import _bounds
from .triggers import LIST_WRITES, SPLITS

__all__ = ["remove_list_mutation", "rewrite_lists", "list_elements"]

_Missing = object()
_SPLITS = tuple(sorted(SPLITS))
_WRITES = LIST_WRITES
_ELEMENT_READS = ("aten::__getitem__", "aten::len", "prim::ListUnpack", "aten::list")


def _anchor(node: Node, block: Block) -> Node | None:
    """The node of ``block`` that is or holds ``node``; None if ``node`` is outside ``block``."""
    while node.owning_block is not block:
        owner = node.owning_block.owning_node if node.owning_block is not None else None
        if owner is None:
            return None
        node = owner
    return node


def _holds_container(t) -> bool:
    """True unless ``t`` is a tensor or a scalar (optional or not): what could hold a list."""
    if isinstance(t, OptionalType):
        t = t.elem
    return not (isinstance(t, TensorType) or (isinstance(t, _SimpleType) and t != ANY))


def _plain_reader(user: Node, offset: int) -> bool:
    """An op that reads the list and keeps no reference to the list object itself."""
    kind = base_kind(user)
    if not kind.startswith("aten::") or user.blocks or kind in CONTAINER_MUTATORS:
        return False
    if offset in mutated_inputs(user):
        return False
    return not any(_holds_container(o.type) for o in user.outputs)


def _static_list(v: Value) -> list[Value] | None:
    """The elements of ``v`` if a ``ListConstruct`` made it and nothing writes it."""
    n = v.node
    if n.kind != "prim::ListConstruct" or any(u.offset in mutated_inputs(u.user) for u in v.uses):
        return None
    return list(n.inputs)


class _Walk:
    """The list's uses in program order with the elements each sees; ``ok`` False if it does not qualify."""

    def __init__(self, lst: Value, elements: list, start: Node):
        self.ok = False
        self.reads: list[tuple[Use, tuple, Node]] = []   # (use, elements it sees, the last write before it)
        self.writes: list[Node] = []
        block = lst.node.owning_block
        names = [lst]     # the list and what += / _set_item return (the same list)
        uses: list[tuple[int, Use]] = []
        block._renumber()
        k = 0
        while k < len(names):
            for u in names[k].uses:
                anchor = _anchor(u.user, block) if u.user.kind != RETURN or u.user.owning_block is not block \
                    else block.return_node
                if anchor is None:
                    return
                pos = 1 << 62 if anchor is block.return_node else anchor._topo
                uses.append((pos, u))
                if base_kind(u.user) in _WRITES and u.offset == 0 and u.user.outputs:
                    names += [o for o in u.user.outputs if o.uses]
            k += 1
        uses.sort(key=lambda p: (p[0], p[1].user.kind != RETURN and base_kind(p[1].user) in _WRITES))
        state, last = list(elements), start
        for pos, u in uses:
            user, kind = u.user, base_kind(u.user)
            if kind in _WRITES and u.offset == 0:
                if user.owning_block is not block or not self._write(user, kind, state, names):
                    return
                self.writes.append(user)
                last = user
            elif user.kind == RETURN:
                if user.owning_block is not block:
                    return
                self.reads.append((u, tuple(state), last))
            elif kind in _ELEMENT_READS or _plain_reader(user, u.offset) or \
                    (kind in ("aten::extend", "aten::add_") and u.offset == 1):   # copied into another list
                if not self._read(user, kind, len(state)):
                    return
                self.reads.append((u, tuple(state), last))
            else:
                return
        self.ok = True

    @staticmethod
    def _write(node: Node, kind: str, state: list, names: list) -> bool:
        if any(v in names for v in node.inputs[1:]):
            return False
        if kind == "aten::append" and len(node.inputs) == 2:
            state.append(node.inputs[1])
        elif kind in ("aten::extend", "aten::add_") and len(node.inputs) == 2:
            more = _static_list(node.inputs[1])
            if more is None:
                return False
            state.extend(more)
        elif kind in ("aten::insert", "aten::_set_item") and len(node.inputs) == 3:
            i = const_or(node.inputs[1], _Missing)
            if type(i) is not int:
                return False
            if kind == "aten::insert":
                state.insert(i, node.inputs[2])   # Python's (and torch's) clamping
            elif -len(state) <= i < len(state):
                state[i] = node.inputs[2]
            else:
                return False   # torch raises at run time
        else:
            return False
        return True

    @staticmethod
    def _read(node: Node, kind: str, n: int) -> bool:
        if kind == "aten::__getitem__":
            i = const_or(node.inputs[1], _Missing) if len(node.inputs) == 2 else _Missing
            return type(i) is int and -n <= i < n
        if kind == "prim::ListUnpack":
            return len(node.outputs) == n
        return kind != "aten::list" or len(node.inputs) == 1


def _split_pieces(split: Node) -> list | None:
    """The pieces' types of a split of a static dim, or None."""
    x = split.inputs[0]
    shape = x.type.shape if isinstance(x.type, TensorType) else None
    args = [const_or(v, _Missing) for v in split.inputs[1:]]
    if shape is None or _Missing in args or not args:
        return None
    dim = args[-1]
    if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
        return None
    dim %= len(shape)
    n = shape[dim]
    if not isinstance(n, int):
        return None
    if base_kind(split) == "aten::unbind":
        return [TensorType(x.type.dtype, shape[:dim] + shape[dim + 1:])] * n
    bounds = _bounds(base_kind(split), args[:-1], n)
    if bounds is None:
        return None
    return [TensorType(x.type.dtype, shape[:dim] + (e - s,) + shape[dim + 1:]) for s, e in bounds]


def _snapshot(graph: Graph, lst: Value, elements: tuple, after: Node, made: dict) -> Value:
    """The list holding ``elements``: a constant where the list was made when they are all constants,
    else a ``ListConstruct`` right after ``after``, the write that completed it (one per state)."""
    key = tuple(id(e) for e in elements)
    if key in made:
        return made[key]
    if elements and all(e.node.kind == "prim::Constant" and "param" not in e.node.attrs for e in elements):
        v = graph.insert_constant([e.node.attrs.get("value") for e in elements], lst.type, before=lst.node)
    else:
        node = graph.create("prim::ListConstruct", elements, (lst.type,), {})
        node.source = lst.node.source
        node.insert_after(after)
        v = node.outputs[0]
    made[key] = v
    return v


def _rewrite(lst: Value) -> bool:
    origin = lst.node
    graph = origin.graph
    unpack = None
    if origin.kind == "prim::ListConstruct":
        elements = list(origin.inputs)
        if not any(base_kind(u.user) in _WRITES + ("aten::list",) and (u.offset == 0 or base_kind(u.user) ==
                   "aten::list") for u in lst.uses):
            return False   # an unwritten list: peephole reads its elements, its other readers take it as is
    elif base_kind(origin) in _SPLITS and len(origin.outputs) == 1:
        if all(u.user.kind == "prim::ListUnpack" or base_kind(u.user) == "aten::__getitem__" for u in lst.uses):
            return False   # slice_unpacked_splits' job
        pieces = _split_pieces(origin)
        if pieces is None:
            return False
        unpack = graph.create("prim::ListUnpack", (lst,), pieces, {})
        unpack.source = origin.source
        unpack.insert_after(origin)
        elements = list(unpack.outputs)
    else:
        return False
    walk = _Walk(lst, elements, unpack if unpack is not None else origin)
    if not walk.ok:
        if unpack is not None:
            unpack.destroy()
        return False
    made: dict = {}
    for u, seen, last in walk.reads:
        user, kind = u.user, base_kind(u.user)
        if kind == "aten::__getitem__":
            user.output.replace_all_uses_with(seen[const_or(user.inputs[1])])
            user.destroy()
        elif kind == "aten::len":
            user.output.replace_all_uses_with(graph.insert_constant(len(seen), before=user))
            user.destroy()
        elif kind == "prim::ListUnpack" and user is not unpack:
            for o, e in zip(user.outputs, seen):
                o.replace_all_uses_with(e)
            user.destroy()
        elif kind == "aten::list":
            new = graph.create("prim::ListConstruct", seen, (user.output.type,), {})
            new.source = user.source
            new.insert_before(user)
            user.output.replace_all_uses_with(new.outputs[0])
            user.destroy()
        elif user is not unpack:
            user.replace_input(u.offset, _snapshot(graph, lst, seen, last, made))
    for w in reversed(walk.writes):
        for o in w.outputs:
            if o.uses:   # (what += returned: its reads were rewritten above)
                return True
        w.destroy()
    if origin.kind == "prim::ListConstruct" and not lst.uses:
        origin.destroy()
    return True


def rewrite_lists(graph: Graph) -> int:
    """Rewrite every qualifying list (see the module doc), until none is left; how many were."""
    done = 0
    while True:
        changed = 0
        for n in list(graph.all_nodes()):
            if n.owning_block is not None and len(n.outputs) == 1 and isinstance(n.outputs[0].type, ListType) \
                    and n.outputs[0].uses and _rewrite(n.outputs[0]):
                changed += 1
        if not changed:
            return done
        done += changed


def remove_list_mutation(graph: Graph) -> bool:
    """The pass: True if any list was rewritten."""
    return rewrite_lists(graph) > 0


def list_elements(lst: Value, reader: Node) -> list[Value] | None:
    """The elements list ``lst`` holds when ``reader`` reads it, if this pass could tell (else None)."""
    origin = lst.node
    if origin.kind != "prim::ListConstruct":
        return None
    walk = _Walk(lst, list(origin.inputs), origin)
    if not walk.ok:
        return None
    return next((list(seen) for u, seen, _ in walk.reads if u.user is reader), None)

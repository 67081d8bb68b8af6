"""Print a :class:`Graph` as canonical IR text (TorchScript's printed syntax).

Canonical means ``print_graph(parse_graph(print_graph(g))) == print_graph(g)``:
value names are the debug names (unnamed values get the smallest free numbers,
clashing names a ``.N`` suffix), attributes are sorted by name, floats use
``repr`` (which round-trips), tensor types drop strides/requires_grad/device,
tensor constants print their parameter name (``param="fc1.weight"``) and never
their data.
"""
from __future__ import annotations

import math
import re
from typing import Any

from .graph import Block, Graph, Node, Value
from .types import DTYPE_TO_TORCH, BOOL, DictType, ListType, OptionalType, TensorType, TupleType, Type, is_union

__all__ = ["print_graph", "print_node", "value_names", "format_literal", "torch_type_str"]

_INDENT = "  "
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.]")


def value_names(graph: Graph) -> dict[int, str]:
    """Map ``id(value)`` to its printed name for every value of ``graph``."""
    values: list[Value] = []

    def collect(block: Block) -> None:
        values.extend(block.inputs)
        for n in block.nodes:
            for b in n.blocks:
                collect(b)
            values.extend(n.outputs)

    collect(graph.block)
    names: dict[int, str] = {}
    used: set[str] = set()
    for v in values:  # debug names first, so numbers never steal them
        name = _clean(v.name)
        if name is not None and name not in used:
            names[id(v)] = name
            used.add(name)
    counter = 0
    for v in values:
        if id(v) in names:
            continue
        name = _clean(v.name)
        if name is not None:  # a clash: uniquify with a suffix
            base, i = name, 1
            while f"{base}.{i}" in used:
                i += 1
            name = f"{base}.{i}"
        else:
            while str(counter) in used:
                counter += 1
            name = str(counter)
        names[id(v)] = name
        used.add(name)
    return names


def _clean(name: str | None) -> str | None:
    """A debug name as the lexer reads it (``%[A-Za-z0-9_][A-Za-z0-9_.]*``), or None."""
    if not name:
        return None
    name = _BAD_NAME_CHARS.sub("_", str(name))
    return name if name[0] != "." else "_" + name[1:]


def print_graph(graph: Graph, *, dialect: str = "srcore", _nested: bool = False) -> str:
    """The canonical IR text of ``graph`` (ends with a newline).

    ``dialect="torch"`` writes types the way ``torch._C.parse_ir`` reads them: symbolic
    dimensions as ``*``, a tensor of known dtype and unknown rank as ``Float(device=cpu)``
    (torch then forgets the dtype), a shape without a dtype as ``Tensor``.
    """
    if dialect not in ("srcore", "torch"):
        raise ValueError(f"dialect must be 'srcore' or 'torch', not {dialect!r}")
    tstr = torch_type_str if dialect == "torch" else str
    names = value_names(graph)
    lines = []
    decls = [_decl(v, names, tstr) for v in graph.inputs]
    lines.append("graph(" + (",\n      ".join(decls)) + "):")
    _print_block_body(graph.block, names, 1, lines, tstr)
    outs = ", ".join("%" + _name(v, names) for v in graph.outputs)
    lines.append(f"{_INDENT}return ({outs})")
    text = "\n".join(lines) + "\n"
    if _nested:
        return text
    # subgraphs (attrs holding a Graph, e.g. torch's prim::DifferentiableGraph_0) follow as
    # ``with <kind> = graph(...)`` sections, flat, in order of first use
    sections: dict[int, tuple[str, Graph]] = {}
    todo = [graph]
    while todo:
        for n in todo.pop(0).all_nodes():
            for v in n.attrs.values():
                if isinstance(v, Graph) and id(v) not in sections:
                    sections[id(v)] = (n.kind, v)
                    todo.append(v)
    for kind, sub in sections.values():
        text += f"with {kind} = " + print_graph(sub, dialect=dialect, _nested=True)
    return text


def print_node(node: Node, names: dict[int, str] | None = None) -> str:
    """The text of one node (with its blocks), as inside ``print_graph``."""
    if names is None:
        names = value_names(node.graph)
    lines: list[str] = []
    _print_node(node, names, 0, lines)
    return "\n".join(lines) + "\n"


def _name(v: Value, names: dict[int, str]) -> str:
    n = names.get(id(v))
    if n is None:  # a value from outside the graph (a broken graph): still printable
        return f"<dangling {v.name or id(v)}>"
    return n


def _decl(v: Value, names: dict[int, str], tstr=str) -> str:
    return f"%{_name(v, names)} : {tstr(v.type)}"


def torch_type_str(t: Type) -> str:
    """``t`` as torch's IR parser reads it (see ``print_graph(dialect="torch")``)."""
    if isinstance(t, TensorType):
        if t.dtype is None or t.dtype not in DTYPE_TO_TORCH:
            return "Tensor"
        name = DTYPE_TO_TORCH[t.dtype]
        if t.shape is None:
            return f"{name}(device=cpu)"
        return f"{name}(" + ", ".join(str(d) if isinstance(d, int) else "*" for d in t.shape) + ")"
    if isinstance(t, ListType):
        return f"{torch_type_str(t.elem)}[]"
    if isinstance(t, OptionalType):
        return f"{torch_type_str(t.elem)}?"
    if isinstance(t, TupleType):  # torch writes and reads a 1-tuple as (T)
        return "(" + ", ".join(torch_type_str(e) for e in t.elems) + ")"
    if isinstance(t, DictType):
        return f"Dict({torch_type_str(t.key)}, {torch_type_str(t.value)})"
    if is_union(t):
        return "Union(" + ", ".join(torch_type_str(e) for e in t.elems) + ")"
    return str(t)


def _torch_constant_type(t: Type) -> str:
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return torch_type_str(t)  # sizes unknown: torch cannot read this constant back anyway
    dtype = t.dtype if t.dtype in DTYPE_TO_TORCH else "float32"
    strides, step = [], 1
    for d in reversed(t.shape):
        strides.insert(0, step)
        step *= max(d, 1)
    dims = "".join(f"{d}, " for d in t.shape)
    return f"{DTYPE_TO_TORCH[dtype]}({dims}strides=[{', '.join(map(str, strides))}], requires_grad=0, device=cpu)"


def _print_block_body(block: Block, names: dict[int, str], depth: int, lines: list[str], tstr=str) -> None:
    for n in block.nodes:
        _print_node(n, names, depth, lines, tstr)


def _print_node(n: Node, names: dict[int, str], depth: int, lines: list[str], tstr=str) -> None:
    ind = _INDENT * depth
    torch_dialect = tstr is not str
    if tstr is torch_type_str and n.kind == "prim::Constant" and "tensor" in n.attrs:
        # torch reads a tensor constant ({0.5}, <Tensor>) only with dtype, sizes, strides and device
        tstr = _torch_constant_type
    outs = ", ".join(_decl(o, names, tstr) for o in n.outputs)
    lhs = f"{outs} = " if outs else ""  # torch reads ``prim::RaiseException(%m)``, not ``= prim::...``
    args = ", ".join("%" + _name(v, names) for v in n.inputs)
    line = f"{ind}{lhs}{n.kind}{_attrs(n)}({args})"
    if n.meta.get("scope") and not torch_dialect:   # the module hierarchy (srcore.ir.scope); torch cannot read it
        line += f", scope: {n.meta['scope']}"
    if n.source is not None and not n.source.in_text:   # a text position is the text's own
        line += f" # {n.source}"
    lines.append(line)
    for i, b in enumerate(n.blocks):
        params = ", ".join(_decl(v, names, tstr) for v in b.inputs)
        lines.append(f"{ind}{_INDENT}block{i}({params}):")
        _print_block_body(b, names, depth + 2, lines, tstr)
        rets = ", ".join("%" + _name(v, names) for v in b.outputs)
        lines.append(f"{ind}{_INDENT}{_INDENT}-> ({rets})")


def _attrs(n: Node) -> str:
    if not n.attrs:
        return ""
    if n.kind == "prim::Constant" and set(n.attrs) <= {"value", "param", "tensor"}:
        a = n.attrs
        if "param" in a:
            return f"[param={format_literal(a['param'])}]"
        if "tensor" in a:
            return f"[value={a['tensor']}]"
        if "value" not in a or a["value"] is None:
            return ""
        t = n.outputs[0].type if len(n.outputs) == 1 else None
        return f"[value={format_literal(a['value'], t)}]"
    items = [f"{k}={format_literal(n.attrs[k])}" for k in sorted(n.attrs)
             if not isinstance(n.attrs[k], Graph)]  # subgraphs print as ``with`` sections
    return "[" + ", ".join(items) + "]" if items else ""


def format_literal(value: Any, t: Type | None = None) -> str:
    """A constant as IR text; bools print as 0/1 where the type ``t`` says bool."""
    if isinstance(t, OptionalType):
        t = t.elem
    if value is None:
        return "None"
    if isinstance(value, Type):
        return str(value)
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        if t == BOOL:
            return "1" if value else "0"
        return "True" if value else "False"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, int) or hasattr(value, "__index__") and not hasattr(value, "shape"):
        return str(int(value))
    if isinstance(value, float) or type(value).__name__.startswith("float"):
        return _float(float(value))
    if isinstance(value, list):
        et = t.elem if isinstance(t, ListType) else None
        return "[" + ", ".join(format_literal(v, et) for v in value) + "]"
    if isinstance(value, tuple):
        ets = t.elems if isinstance(t, TupleType) and len(t.elems) == len(value) else [None] * len(value)
        inner = ", ".join(format_literal(v, e) for v, e in zip(value, ets))
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return "<Tensor>"  # tensor data never goes into text: see param=
    return _quote(str(value))


def _float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def _quote(s: str) -> str:
    out = ['"']
    for c in s:
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)

"""``NodeContext``: what a converter sees of the ONNX node it converts, and how it emits srcore nodes.

A converter is ``fn(cx) -> outputs``: it reads attributes (``cx.attr``) and inputs
(``cx.x(i)`` a tensor Value, ``cx.const(i)`` a constant array, ``cx.int_items(i)``
a shape as int items), appends srcore nodes (``cx.op("aten::relu", x)``) and returns
one result per ONNX output (a Value, a :class:`Val`, or ``None`` for an output it
does not produce). It raises :class:`Unsupported` for what it cannot map; the
converter driver collects those for one ``ConversionError``. Every attribute the
node carries must be read by its converter, or the node is reported as unsupported:
an attribute a converter does not know is never silently ignored.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from ...ir.graph import SourceLocation, Value
from ...ir.types import BOOL, INT, ListType, TensorType, Type
from .values import Val

_REQUIRED = object()


@functools.lru_cache(maxsize=1)
def declared_ops() -> frozenset[str]:
    """Op names (``aten::relu``) the installed op libraries declare; a converter emits no other."""
    from ...plugin.manager import get_plugin_manager

    return frozenset(key.split(".", 1)[0] if key.count("::") == 1 else key
                     for key in get_plugin_manager().registry.declared)


class Unsupported(Exception):
    """Raised by a converter: this node (an attribute, a dtype, a non-constant input) cannot be mapped."""


class NodeContext:
    """The converter's view of one ONNX node (see the module docstring)."""

    def __init__(self, conv, node, version: int, vals: Sequence[Val | None], out_types: Sequence[Type],
                 source: SourceLocation | None):
        self.conv = conv                   # the GraphConverter (builder, params, subgraph conversion)
        self.node = node                   # the onnx NodeProto
        self.op_type = node.op_type
        self.version = version             # since_version of the op's schema at the model's opset
        self.vals = list(vals)             # one Val per input (None: an absent optional input)
        self.out_types = list(out_types)   # ONNX's inferred output types (TensorType() when unknown)
        self.source = source
        self._attrs = {a.name: a for a in node.attribute}
        self.read_attrs: set[str] = set()
        self.unknown_inputs: list[str] = []  # graph inputs whose values this node asked for (see const)

    # -- attributes --------------------------------------------------------------------------
    def attr(self, name: str, default: Any = _REQUIRED) -> Any:
        """The attribute's value (ints, floats, str, lists, numpy arrays for tensors, a GraphProto)."""
        self.read_attrs.add(name)
        a = self._attrs.get(name)
        if a is None:
            if default is _REQUIRED:
                raise Unsupported(f"required attribute {name!r} is missing")
            return default
        from onnx import helper, numpy_helper

        if a.ref_attr_name:
            raise Unsupported(f"attribute {name!r} refers to a function attribute")
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            return v.decode("utf-8")
        if a.type == a.TENSOR:
            return self.conv.tensor_array(v, f"attribute {name!r}")
        if a.type == a.STRINGS:
            return [s.decode("utf-8") for s in v]
        if a.type in (a.INTS, a.FLOATS):
            return list(v)
        if a.type == a.SPARSE_TENSOR:
            raise Unsupported(f"attribute {name!r} is a sparse tensor")
        if a.type == a.TENSORS:
            return [numpy_helper.to_array(t) for t in v]
        return v

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def unread_attrs(self) -> list[str]:
        return sorted(set(self._attrs) - self.read_attrs)

    # -- inputs ------------------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        """The number of inputs, trailing absent optional ones not counted."""
        n = len(self.vals)
        while n and self.vals[n - 1] is None:
            n -= 1
        return n

    def has(self, i: int) -> bool:
        return i < len(self.vals) and self.vals[i] is not None

    def val(self, i: int) -> Val:
        if not self.has(i):
            raise Unsupported(f"input {i} is missing")
        return self.vals[i]

    def x(self, i: int) -> Value:
        """Input ``i`` as an srcore tensor Value."""
        v = self.val(i)
        if v.seq:
            raise Unsupported(f"input {i} ({v.name!r}) is a sequence where a tensor is expected")
        return self.conv.tensor_of(v)

    def seq(self, i: int) -> Value:
        """Input ``i`` as an srcore ``Tensor[]`` value (an ONNX sequence)."""
        v = self.val(i)
        if not v.seq:
            raise Unsupported(f"input {i} ({v.name!r}) is not a sequence")
        return v.tensor

    def const(self, i: int) -> np.ndarray | None:
        """Input ``i``'s array when it is known at conversion (initializer, Constant, folded shape)."""
        if not self.has(i):
            return None
        v = self.vals[i]
        if v.const is not None:
            return v.const
        known = v.known_ints()
        if known is not None and v.ints is not None:
            arr = np.array(known, dtype=v.type.dtype or "int64" if isinstance(v.type, TensorType) else "int64")
            return arr.reshape(()) if v.scalar else arr
        self.note_unknown(v)
        return None

    def not_constant(self, inputs: Sequence[int], msg: str) -> Unsupported:
        """The :class:`Unsupported` to raise when the values of ``inputs`` (indices) are needed at
        conversion and are not known (their graph inputs are noted, see :meth:`note_unknown`)."""
        for i in inputs:
            if self.has(i):
                self.note_unknown(self.vals[i])
        return Unsupported(msg)

    def note_unknown(self, v: Val) -> None:
        """Record that this node wanted ``v``'s values at conversion: when ``v`` is a graph input and
        the node cannot be converted, ``from_onnx`` names it (:class:`~.errors.NeedsConstantInputs`)."""
        if self.conv.input_vals.get(v.name) is v and v.name not in self.unknown_inputs:
            self.unknown_inputs.append(v.name)

    def ints(self, i: int, what: str) -> list[int]:
        """Input ``i`` as a list of Python ints; :class:`Unsupported` unless known at conversion."""
        c = self.const(i)
        if c is None:
            raise Unsupported(f"input {i} ({what}) must be a constant (an initializer or a Constant node)")
        return [int(v) for v in np.asarray(c).reshape(-1)]

    def scalar(self, i: int, what: str) -> Any:
        """Input ``i`` as one Python number; :class:`Unsupported` unless known at conversion."""
        c = self.const(i)
        if c is None:
            raise Unsupported(f"input {i} ({what}) must be a constant")
        if c.size != 1:
            raise Unsupported(f"input {i} ({what}) must hold one value, it has shape {list(c.shape)}")
        return c.reshape(-1)[0].item()

    def int_items(self, i: int, what: str) -> list:
        """Input ``i`` (a 1-D int tensor) as int items: Python ints or srcore ``int`` Values."""
        return self.conv.int_items(self.val(i), what, self)

    def int_list(self, i: int, what: str) -> Value:
        """Input ``i`` as one srcore ``int[]`` Value (a constant list when known)."""
        return self.list_value(self.int_items(i, what))

    def list_value(self, items: list) -> Value:
        return self.conv.builder.value(items if any(isinstance(x, Value) for x in items) else list(items)) \
            if items else self.conv.builder.constant([], ListType(INT))

    def type(self, i: int) -> TensorType:
        v = self.val(i)
        if v.const is not None or v.ints is not None:
            return TensorType(v.dtype, v.shape)
        return v.type if isinstance(v.type, TensorType) else TensorType()

    def dtype(self, i: int) -> str | None:
        return self.type(i).dtype

    def rank(self, i: int) -> int:
        """Input ``i``'s rank; :class:`Unsupported` when ONNX shape inference does not know it."""
        r = self.type(i).rank
        if r is None:
            raise Unsupported(f"the rank of input {i} ({self.val(i).name!r}) is unknown")
        return r

    def shape(self, i: int):
        return self.type(i).shape

    def out_dtype(self, j: int = 0) -> str | None:
        t = self.out_types[j] if j < len(self.out_types) else None
        return t.dtype if isinstance(t, TensorType) else None

    def require_dtype(self, i: int, allowed, what: str = "") -> str:
        dt = self.dtype(i)
        if dt is None:
            raise Unsupported(f"the dtype of input {i} is unknown")
        if dt not in allowed:
            raise Unsupported(f"input {i}{' (' + what + ')' if what else ''} of dtype {dt} is not supported")
        return dt

    # -- emitting ----------------------------------------------------------------------------
    def op(self, kind: str, *args: Any, n_out: int = 1, types: Sequence[Type] | None = None) -> Any:
        """Append ``kind(*args)`` (Python values become constants, lists with Values ``ListConstruct``);
        returns its output, or a tuple of ``n_out`` outputs."""
        if kind not in declared_ops():
            raise Unsupported(f"srcore declares no op {kind} (needed for {self.op_type})")
        b = self.conv.builder
        if types is None:
            types = [TensorType()] * n_out
        node = b.node(kind, *args, output_types=types, source=self.source)
        return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)

    def int_op(self, kind: str, *args: Any) -> Value:
        """A scalar int op (``aten::mul.int``, ``aten::size.int``, ...)."""
        return self.op(kind, *args, types=[INT])

    def bool_op(self, kind: str, *args: Any) -> Value:
        return self.op(kind, *args, types=[BOOL])

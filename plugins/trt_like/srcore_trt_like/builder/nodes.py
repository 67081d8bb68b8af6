"""What a converter works with: a segment node seen through its schema (:class:`NodeView`), and
the state of one conversion (:class:`Converter`: segment values -> network tensor ids)."""
from __future__ import annotations

from typing import Any

import numpy as np

from srcore.plugin import EngineBuildError
from srcore.plugin import TensorType

from .network import Network


class Converter:
    """State of one segment's conversion: segment values -> tensor ids, and the network."""

    def __init__(self, net: Network):
        self.net = net
        self.ids: dict[int, int] = {}

    def tensor(self, value) -> int:
        """The id of a tensor value already made (an input or an earlier node's output), or of a
        constant tensor (a parameter a layout op or a reduction reads directly: a network constant)."""
        tid = self.ids.get(id(value))
        if tid is not None:
            return tid
        if value.node.kind == "prim::Constant" and isinstance(value.node.attrs.get("value"), np.ndarray):
            array = value.node.attrs["value"]   # an integer or bool constant keeps its dtype (a data layer's index)
            tid = self.ids[id(value)] = self.net.constant(array, str(array.dtype))
            return tid
        raise EngineBuildError(f"internal: value %{value.name} has no engine tensor")

    def bind(self, value, tid: int) -> None:
        self.ids[id(value)] = tid


class NodeView:
    """A segment node as a converter sees it: arguments by schema name, constants, shapes."""

    def __init__(self, node):
        self.node = node
        self.names = [a.name for a in node.schema.arguments] if node.schema is not None else []
        self.op = node.schema.qualified_name if node.schema is not None else node.kind
        if self.op.endswith("."):
            self.op = self.op[:-1]
        self.source = str(node.source) if node.source is not None else ""

    def value(self, name: str):
        i = self.names.index(name)
        return self.node.inputs[i] if i < len(self.node.inputs) else None

    def const(self, name: str, default: Any = None) -> Any:
        """The constant value of argument ``name`` (its schema default when the node omits it)."""
        i = self.names.index(name)
        if i >= len(self.node.inputs):
            d = self.node.schema.arguments[i].default
            return default if d is None else d.value
        v = self.node.inputs[i]
        if v.node.kind != "prim::Constant":
            raise EngineBuildError(f"{self.op}: argument {name!r} is not a constant ({self.where()})")
        return v.node.attrs.get("value")

    def is_tensor(self, name: str) -> bool:
        v = self.value(name)
        return v is not None and isinstance(v.type, TensorType)

    def is_const(self, name: str) -> bool:
        v = self.value(name)
        return v is None or v.node.kind == "prim::Constant"

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        t = self.node.outputs[i].type
        return tuple(t.shape)

    def in_shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.value(name).type.shape)

    def where(self) -> str:
        return f"{self.op} at {self.source}" if self.source else self.op

"""The engine's network: a segment graph with concrete shapes, as a list of layers.

Every tensor of the segment becomes a :class:`Tensor` (id, shape); every node one
or more :class:`Layer` s (``aten::_transformer_encoder_layer_fwd`` becomes a
dozen). Constant arguments (weights, strides, dims) are baked into the layers'
``attrs``; only tensors flow between layers. The converters (``converters.py``)
are a table keyed by op, one small function each.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs
import numpy as np

from srcore.errors import EngineBuildError
from srcore.ir.types import TensorType


@attrs.define(eq=False)
class Tensor:
    """One value inside the engine: float32, C-contiguous, of a concrete shape."""

    id: int
    shape: tuple[int, ...]
    name: str = ""

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@attrs.define(eq=False)
class Layer:
    """One step of the network: ``kind`` (pointwise, conv, gemm, ...), tensor inputs/outputs by id,
    constant attributes, and where it came from (for errors and ``describe``)."""

    kind: str
    inputs: list[int]
    outputs: list[int]
    attrs: dict[str, Any] = attrs.field(factory=dict)
    source: str = ""


@attrs.define(eq=False)
class Network:
    """Tensors, layers in execution order, and which tensors are the engine's inputs and outputs."""

    tensors: dict[int, Tensor] = attrs.field(factory=dict)
    layers: list[Layer] = attrs.field(factory=list)
    inputs: list[int] = attrs.field(factory=list)
    outputs: list[int] = attrs.field(factory=list)
    constants: dict[int, np.ndarray] = attrs.field(factory=dict)

    def constant(self, array: np.ndarray) -> int:
        """A tensor holding a constant array (a non-scalar constant operand); always an own,
        writeable float32 copy (parameters may be read-only memory maps of the model file,
        which kernels compiled for writeable arrays reject)."""
        tid = self.new_tensor(array.shape, "const")
        self.constants[tid] = np.array(array, dtype=np.float32, order="C", copy=True)
        return tid

    def new_tensor(self, shape, name: str = "") -> int:
        tid = len(self.tensors)
        self.tensors[tid] = Tensor(tid, tuple(int(d) for d in shape), name)
        return tid

    def add(self, kind: str, inputs, out_shape, source: str = "", n_out: int = 1, **layer_attrs) -> int:
        """Append a layer making ``n_out`` new tensors of ``out_shape``; returns the (first) output id."""
        outs = [self.new_tensor(out_shape) for _ in range(n_out)]
        self.layers.append(Layer(kind, list(inputs), outs, dict(layer_attrs), source))
        return outs[0]

    def shape(self, tid: int) -> tuple[int, ...]:
        return self.tensors[tid].shape

    def users(self) -> dict[int, list[Layer]]:
        """tensor id -> the layers that read it."""
        out: dict[int, list[Layer]] = {t: [] for t in self.tensors}
        for layer in self.layers:
            for t in layer.inputs:
                out[t].append(layer)
        return out


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
            tid = self.ids[id(value)] = self.net.constant(value.node.attrs["value"])
            return tid
        raise EngineBuildError(f"internal: value %{value.name} has no engine tensor")

    def bind(self, value, tid: int) -> None:
        self.ids[id(value)] = tid


ConverterFn = Callable[["NodeView", Converter], None]
CONVERTERS: dict[str, ConverterFn] = {}


def converter(*ops: str):
    """Register the decorated function as the converter of every op in ``ops``."""
    def deco(fn: ConverterFn) -> ConverterFn:
        for op in ops:
            CONVERTERS[op] = fn
        return fn
    return deco


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


def build_network(graph) -> Network:
    """Convert a segment graph whose shapes are all concrete into a :class:`Network`."""
    from . import converters  # noqa: F401  (fills CONVERTERS)

    net = Network()
    conv = Converter(net)
    for v in graph.inputs:
        t = v.type
        if not isinstance(t, TensorType) or t.dtype != "float32":
            raise EngineBuildError(f"engine input %{v.name} is {t}, not a float32 tensor")
        tid = net.new_tensor(_concrete(t, v), v.name or "")
        conv.bind(v, tid)
        net.inputs.append(tid)
    for n in graph.nodes:
        if n.kind == "prim::Constant":
            continue
        view = NodeView(n)
        fn = CONVERTERS.get(view.op) or CONVERTERS.get(view.op.split(".", 1)[0])
        if fn is None:
            raise EngineBuildError(f"no trt_like converter for {view.where()}")
        for o in n.outputs:
            _concrete(o.type, o)
        fn(view, conv)
    for v in graph.outputs:
        net.outputs.append(conv.tensor(v))
    return net


def _concrete(t, v) -> tuple[int, ...]:
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        raise EngineBuildError(f"value %{v.name} has no concrete shape ({t}): the engine needs static shapes")
    return tuple(t.shape)

"""Segment graph -> :class:`~.network.Network`: every node through the converter the op-support
table (:mod:`.support`) names for it."""
from __future__ import annotations

from srcore.plugin import EngineBuildError
from srcore.plugin import TensorType

from . import converters
from .network import DATA_DTYPES, Network
from .nodes import Converter, NodeView
from .support import HALF, converter_name


def build_network(graph) -> Network:
    """Convert a segment graph whose shapes are all concrete into a :class:`Network`."""
    net = Network()
    conv = Converter(net)
    for v in graph.inputs:
        t = v.type
        data = isinstance(t, TensorType) and (t.dtype in DATA_DTYPES or t.dtype in HALF and _cast_in(v))
        if not isinstance(t, TensorType) or t.dtype != "float32" and not _per_tensor(t) and not data and v.uses:
            # (an unread input gave a shape)
            raise EngineBuildError(f"engine input %{v.name} is {t}, not a float32 tensor, an index or mask "
                                   "or one quantized per tensor")
        extra = (t.dtype, t.qparams) if _per_tensor(t) else (t.dtype,) if data else ()
        tid = net.new_tensor(_concrete(t, v), v.name or "", *extra)
        conv.bind(v, tid)
        net.inputs.append(tid)
    for n in graph.nodes:
        if n.kind == "prim::Constant" or n.kind == "prim::ListConstruct":
            continue   # (a list of tensors: the op reading it takes its elements, ``cat``)
        view = NodeView(n)
        name = converter_name(view.op)
        if name is None:
            raise EngineBuildError(f"no trt_like converter for {view.where()}")
        fn = getattr(converters, name)
        for o in n.outputs:
            _concrete(o.type, o)
        fn(view, conv)
        for o in n.outputs:   # a quantized result: its integers, with the parameters of its type
            if _per_tensor(o.type) and id(o) in conv.ids:
                tensor = net.tensors[conv.ids[id(o)]]
                tensor.dtype, tensor.qparams = o.type.dtype, o.type.qparams
            elif isinstance(o.type, TensorType) and o.type.dtype in (*DATA_DTYPES, *HALF) and id(o) in conv.ids:
                net.tensors[conv.ids[id(o)]].dtype = o.type.dtype   # an index or mask (sort, lt, slice)
    for v in graph.outputs:
        net.outputs.append(conv.tensor(v))
    return net


def _concrete(t, v) -> tuple[int, ...]:
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        raise EngineBuildError(f"value %{v.name} has no concrete shape ({t}): the engine needs static shapes")
    return tuple(t.shape)


def _per_tensor(t) -> bool:
    """Whether ``t`` is an 8-bit quantized tensor type with known per-tensor parameters."""
    return (isinstance(t, TensorType) and t.dtype in ("quint8", "qint8") and t.qparams is not None
            and t.qparams.axis is None)


def _cast_in(v) -> bool:
    """A half input read only by casts (``srcore.passes.widen_half``): the engine computes in float32."""
    return bool(v.uses) and all(u.user.kind == "aten::to" for u in v.uses)

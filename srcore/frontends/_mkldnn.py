"""The MKLDNN nodes of ``torch.jit.optimize_for_inference``, lowered back to plain ATen.

On CPUs where oneDNN is available, ``optimize_for_inference`` moves runs of convolutions into
the MKLDNN layout: ``aten::to_mkldnn`` / ``aten::to_dense`` at the edges, weights as
``prim::ConstantMKLDNNTensor`` and ops as ``prim::mkldnn_convolution``, ``prim::MKLDNNHardSwish_``,
... srcore has one layout, so each becomes the ATen op it stands for. Layout changes become
nothing, or a clone where the value they copy is used elsewhere (torch's copy may then be
written in place by the next op, which must not reach the other readers).
"""
from __future__ import annotations

from typing import Any, Callable

from ..ir.graph import Block, Graph, Value
from ..ir.types import FLOAT, NONE, TensorType

#: layout changes and broadcasts: the value itself (each output takes the input at its position)
_LAYOUT = {"aten::to_mkldnn", "aten::to_dense", "prim::BroadcastMKLDNNTensors"}

#: one-to-one: the ATen op that takes the same leading inputs
_SAME_INPUTS = {
    "prim::MKLDNNHardSwish_": "aten::hardswish_", "prim::MKLDNNHardSwish": "aten::hardswish",
    "prim::MKLDNNHardSigmoid_": "aten::hardsigmoid_", "prim::MKLDNNHardSigmoid": "aten::hardsigmoid",
    "prim::MKLDNNScalarMul_": "aten::mul_", "prim::MKLDNNScalarMul": "aten::mul",
    "prim::MKLDNNLayerNorm": "aten::layer_norm",
}

#: the min_val / max_val node attributes become the op's two float arguments
_BOUNDED = {"prim::MKLDNNHardTanh_": "aten::hardtanh_", "prim::MKLDNNHardTanh": "aten::hardtanh",
            "prim::MKLDNNClamp_": "aten::clamp_", "prim::MKLDNNClamp": "aten::clamp"}

KINDS = _LAYOUT | set(_SAME_INPUTS) | set(_BOUNDED) | {"prim::mkldnn_convolution", "prim::MKLDNNLayerNorm_",
                                                       "prim::ConstantMKLDNNTensor"}


def is_mkldnn_kind(kind: str) -> bool:
    return kind in KINDS


class Lowering:
    """Lowers one MKLDNN node of a ``torch._C`` graph into ``dst``; ``env`` maps torch values to
    srcore values, as the converter's does."""

    def __init__(self, env: dict, make_node: Callable[..., Any]):
        self.env = env
        self.make_node = make_node  # (kind, inputs, torch_node, dst, g) -> srcore Node, appended
        #: outputs of prim::BroadcastMKLDNNTensors, which stand for their (unbroadcast) input
        self.broadcast: set = set()

    def out_of_place(self, n) -> str | None:
        """The out-of-place kind to run instead of the in-place ``n`` when ``n`` writes into a
        broadcast copy that nothing else reads (``s * x`` became ``mul_(broadcast(s), x)``): the
        unbroadcast value cannot hold the result, and the copy is the result."""
        kind = n.kind()
        if not (kind.startswith("aten::") and kind.endswith("_") and not kind.endswith("__")):
            return None
        self_ = n.inputsAt(0) if n.inputsSize() else None
        if self_ in self.broadcast and len(self_.uses()) == 1:
            return kind[:-1]
        return None

    def lower(self, n, dst: Block, g: Graph) -> None:
        kind = n.kind()
        ins = [self.env[v] for v in n.inputs()]
        if kind in _LAYOUT:
            for i, o in enumerate(n.outputs()):
                self.env[o] = self._fresh_if_shared(n.inputsAt(i), ins[i], n, dst, g)
                if kind == "prim::BroadcastMKLDNNTensors":
                    self.broadcast.add(o)
        elif kind == "prim::mkldnn_convolution":
            # (input, weight, bias, stride, padding, dilation, groups): conv{1,2,3}d's order
            rank = n.inputsAt(1).type().dim()
            if rank is None:
                rank = ins[1].type.rank if isinstance(ins[1].type, TensorType) else None
            op = f"aten::conv{(rank or 4) - 2}d"
            self._emit(op, ins, n, dst, g)
        elif kind in _SAME_INPUTS:
            self._emit(_SAME_INPUTS[kind], ins, n, dst, g)
        elif kind in _BOUNDED:
            lo = self._const(g, dst, n.f("min_val"), FLOAT)
            hi = self._const(g, dst, n.f("max_val"), FLOAT)
            self._emit(_BOUNDED[kind], ins + [lo, hi], n, dst, g)
        elif kind == "prim::MKLDNNLayerNorm_":
            # no in-place layer_norm in ATen: compute it, then write it back where others read the input
            node = self._emit("aten::layer_norm", ins, n, dst, g)
            if len(n.inputsAt(0).uses()) > 1:
                back = self.make_node("aten::copy_", [ins[0], node.output], n, dst, g)
                self.env[n.output()] = back.output
        else:  # pragma: no cover - KINDS and the branches above list the same kinds
            raise AssertionError(kind)

    def _emit(self, op: str, ins: list[Value], n, dst: Block, g: Graph):
        node = self.make_node(op, ins, n, dst, g)
        self.env[n.output()] = node.output
        return node

    def _fresh_if_shared(self, ts_value, value: Value, n, dst: Block, g: Graph) -> Value:
        if len(ts_value.uses()) <= 1:
            return value
        return self.make_node("aten::clone", [value, self._const(g, dst, None, None)], n, dst, g).output

    @staticmethod
    def _const(g: Graph, dst: Block, value, t) -> Value:
        c = g.create("prim::Constant", (), (t if value is not None else NONE,),
                     {"value": value} if value is not None else {})
        dst.append(c)
        return c.output


"""The ``fused_pointwise`` tactic: a fused group of pointwise layers as one compiled kernel
(:mod:`..pointwise`); a group the compiler cannot take is left to the numpy tactic."""
from __future__ import annotations

from ..builder.network import Layer, Network
from ..pointwise import Const, Input, PointwiseError, Program, compile_program, op


def fused_pointwise(layer: Layer, net: Network):
    inputs = [Input(f"in{k}", net.shape(t)) for k, t in enumerate(layer.inputs)]
    nodes = []
    try:
        for f in layer.attrs["ops"]:
            args = [inputs[x] if kind == "ext" else nodes[x] if kind == "tmp" else Const(x) for kind, x in f.args]
            nodes.append(op(f.op, *args, **dict(f.params)))
        program = Program(inputs, [nodes[r] for r in layer.attrs["results"]], shape=net.shape(layer.outputs[0]))
        return compile_program(program).fn
    except PointwiseError:
        return None

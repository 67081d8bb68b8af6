"""The ``fused_pointwise`` tactic: a fused group of pointwise layers as one compiled kernel
(:mod:`.pointwise`); a group the compiler cannot take is left to the numpy tactic."""
from __future__ import annotations

from .network import Layer, Network
from .pointwise import Const, Input, PointwiseError, Program, compile_program, op


class _Untranslatable(Exception):
    pass


def _node(f, args):
    """One fused op as a pointwise-program node."""
    params = dict(f.params)
    if f.op == "clamp":
        return op("clamp", *args, **{k: v for k, v in params.items() if v is not None})
    if f.op == "elu":
        if params.get("input_scale", 1.0) != 1.0:
            raise _Untranslatable("elu with input_scale")
        y = op("elu", *args, alpha=params.get("alpha", 1.0))
        scale = params.get("scale", 1.0)
        return y if scale == 1.0 else op("mul", y, scale)
    return op(f.op, *args, **params)


def fused_pointwise(layer: Layer, net: Network):
    inputs = [Input(f"in{k}", net.shape(t)) for k, t in enumerate(layer.inputs)]
    nodes = []
    try:
        for f in layer.attrs["ops"]:
            args = [inputs[x] if kind == "ext" else nodes[x] if kind == "tmp" else Const(x) for kind, x in f.args]
            nodes.append(_node(f, args))
        program = Program(inputs, [nodes[r] for r in layer.attrs["results"]], shape=net.shape(layer.outputs[0]))
        return compile_program(program).fn
    except (_Untranslatable, PointwiseError):
        return None

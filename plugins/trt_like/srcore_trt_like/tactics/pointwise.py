"""The ``fused_pointwise`` tactics: a fused group of pointwise layers as one compiled kernel
(:mod:`..pointwise`), at LLVM's default vector width (``numba``) and, on a CPU with AVX-512 and a
layer big enough for the width to matter, with 512-bit vectors too (``numba_512``: the same bits,
the builder keeps the faster); a group the compiler cannot take is left to the numpy tactic."""
from __future__ import annotations

import math

from srcore.plugin import cpu_features

from ..builder.network import Layer, Network
from ..pointwise import Const, Input, PointwiseError, Program, compile_program, op
from .records import Candidate, Kernel

#: the 512-bit twin is offered from this many output elements on: it costs a second compile, and
#: on shorter loops the width hardly shows (Sapphire Rapids, thread CPU time: an exact GELU on
#: 4,096 elements 2.6 -> 2.0 us, on 32,768 19.0 -> 13.5, on 409,600 255 -> 182)
WIDE_MIN_ELEMENTS = 1 << 14


def _program(layer: Layer, net: Network) -> Program:
    inputs = [Input(f"in{k}", net.shape(t)) for k, t in enumerate(layer.inputs)]
    nodes = []
    for f in layer.attrs["ops"]:
        args = [inputs[x] if kind == "ext" else nodes[x] if kind == "tmp" else Const(x) for kind, x in f.args]
        nodes.append(op(f.op, *args, **dict(f.params)))
    return Program(inputs, [nodes[r] for r in layer.attrs["results"]], shape=net.shape(layer.outputs[0]))


def candidates(layer: Layer, net: Network) -> list[Candidate]:
    """``numba`` (compiled now: a program the compiler refuses leaves no candidate) and, where it
    applies, ``numba_512`` (compiled when the builder builds it)."""
    try:
        program = _program(layer, net)
        fn = compile_program(program).fn
    except PointwiseError:
        return []
    out = [Candidate("numba", lambda: Kernel(fn))]
    if "AVX512F" in cpu_features() and math.prod(program.shape) >= WIDE_MIN_ELEMENTS:
        out.append(Candidate("numba_512", lambda: Kernel(compile_program(program, wide=True).fn)))
    return out

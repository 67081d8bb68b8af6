"""``nn.GRUCell`` / ``nn.LSTMCell`` steps (``aten::gru_cell``, ``aten::lstm_cell``: a Python loop over
time, unrolled by the frontend) from existing layers: the two projections (``gemm`` layers of the
constant weights, biases added), the gates as ``strided`` slices of the last dim and pointwise
layers in ATen's order (``RNN.cpp``'s ``GRUCell`` / ``LSTMCell``):

* GRU: ``r = sigmoid(h_r + i_r)``, ``z = sigmoid(h_z + i_z)``, ``n = tanh(i_n + h_n * r)``,
  ``h' = (h - n) * z + n``;
* LSTM: gates ``hh + ih``; ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h' = sigmoid(o) * tanh(c')``.
"""
from __future__ import annotations

from srcore.plugin import EngineBuildError

from .nodes import Converter, NodeView


def _project(v: NodeView, c: Converter, x: int, w: str, b: str) -> int:
    from .converters import linear_layer

    weight = v.const(w)
    shape = c.net.shape(x)
    return linear_layer(c, x, weight, v.const(b, None), shape[:-1] + (weight.shape[0],), v.source)


def _chunks(v: NodeView, c: Converter, t: int, n: int) -> list[int]:
    shape = c.net.shape(t)
    h = shape[-1] // n
    lead = (slice(None),) * (len(shape) - 1)
    return [c.net.add("strided", [t], shape[:-1] + (h,), v.source, key=lead + (slice(k * h, (k + 1) * h, 1),))
            for k in range(n)]


def _pw(v: NodeView, c: Converter, op: str, *ins: int) -> int:
    return c.net.add("pointwise", list(ins), c.net.shape(ins[0]), v.source, op=op,
                     args=tuple(("in", k) for k in range(len(ins))), params={})


def gru_cell(v: NodeView, c: Converter) -> None:
    x, h = c.tensor(v.value("input")), c.tensor(v.value("hx"))
    ir, iz, i_n = _chunks(v, c, _project(v, c, x, "w_ih", "b_ih"), 3)
    hr, hz, hn = _chunks(v, c, _project(v, c, h, "w_hh", "b_hh"), 3)
    r = _pw(v, c, "sigmoid", _pw(v, c, "add", hr, ir))
    z = _pw(v, c, "sigmoid", _pw(v, c, "add", hz, iz))
    n = _pw(v, c, "tanh", _pw(v, c, "add", i_n, _pw(v, c, "mul", hn, r)))
    c.bind(v.node.outputs[0], _pw(v, c, "add", _pw(v, c, "mul", _pw(v, c, "sub", h, n), z), n))


def lstm_cell(v: NodeView, c: Converter) -> None:
    lst = v.value("hx")
    if lst.node.kind != "prim::ListConstruct" or len(lst.node.inputs) != 2:
        raise EngineBuildError(f"{v.where()}: argument 'hx' is not a list of (h, c) built in the segment")
    h, cx = (c.tensor(t) for t in lst.node.inputs)
    x = c.tensor(v.value("input"))
    gates = _pw(v, c, "add", _project(v, c, h, "w_hh", "b_hh"), _project(v, c, x, "w_ih", "b_ih"))
    i, f, g, o = _chunks(v, c, gates, 4)
    cy = _pw(v, c, "add", _pw(v, c, "mul", _pw(v, c, "sigmoid", f), cx),
             _pw(v, c, "mul", _pw(v, c, "sigmoid", i), _pw(v, c, "tanh", g)))
    c.bind(v.node.outputs[0], _pw(v, c, "mul", _pw(v, c, "sigmoid", o), _pw(v, c, "tanh", cy)))
    c.bind(v.node.outputs[1], cy)

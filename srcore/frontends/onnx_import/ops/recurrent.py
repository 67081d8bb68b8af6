"""LSTM, GRU, RNN onto torch's ``aten::lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` (``.input``).

ONNX and torch hold the same weights in different gate orders (LSTM: ONNX i, o, f, c; torch
i, f, g, o. GRU: ONNX z, r, h; torch r, z, n): each weight and bias is reordered, with numpy at
conversion when it is an initializer (what exported models have), else with one
``aten::index_select`` per tensor. ``direction="reverse"`` runs forward on the time-flipped
sequence; ``layout=1`` is torch's ``batch_first``. What torch's cells cannot compute is refused:
activations other than the defaults (RNN: Tanh or Relu), ``clip``, ``input_forget``,
and ``sequence_lens`` that are not all the full length. GRU's ``linear_before_reset=0`` (torch
applies the reset gate after the recurrent product, as ONNX's ``linear_before_reset=1``) is a
``prim::Loop`` over time of srcore ops instead, and so are LSTM's peepholes (:func:`_time_loop`).
"""
from __future__ import annotations

import numpy as np

from ....ir.types import TensorType
from ..context import NodeContext, Unsupported
from ._util import dim_item, table

#: ONNX gate blocks in torch's order, and the default activations per direction
_GATES = {"LSTM": ([0, 2, 3, 1], ["sigmoid", "tanh", "tanh"]), "GRU": ([1, 0, 2], ["sigmoid", "tanh"]),
          "RNN": ([0], None)}


def _activations(cx: NodeContext, n_dir: int) -> str:
    """The aten op for the node's activations (RNN: tanh or relu), refusing any other choice."""
    acts = [a.lower() for a in cx.attr("activations", [])]
    if cx.attr("activation_alpha", None) is not None or cx.attr("activation_beta", None) is not None:
        raise Unsupported("activation_alpha/activation_beta")
    op = cx.op_type
    if op == "RNN":
        acts = acts or ["tanh"] * n_dir
        if len(set(acts)) != 1 or acts[0] not in ("tanh", "relu"):
            raise Unsupported(f"activations {acts} (srcore has Tanh or Relu for every direction)")
        return f"aten::rnn_{acts[0]}"
    default = _GATES[op][1]
    if acts and acts != default * n_dir:
        raise Unsupported(f"activations {acts} (srcore has the defaults {default})")
    return f"aten::{op.lower()}"


def _weights(cx: NodeContext, i: int, d: int, n_gates: int, hidden: int, order, bias_half: int | None = None):
    """Input ``i``'s direction ``d`` (for a bias: half ``bias_half``) in torch's gate order."""
    rows = np.concatenate([np.arange(g * hidden, (g + 1) * hidden) for g in order])
    c = cx.const(i)
    if c is not None:
        a = c[d]
        if bias_half is not None:
            a = a[bias_half * n_gates * hidden:(bias_half + 1) * n_gates * hidden]
        a = np.ascontiguousarray(a[rows])
        name = f"{cx.val(i).param_name or cx.val(i).name}.{d}" + (f".{bias_half}" if bias_half is not None else "")
        return cx.conv.param(name, a, TensorType(str(a.dtype), a.shape))
    w = cx.op("aten::select", cx.x(i), 0, d)
    if bias_half is not None:
        w = cx.op("aten::narrow", w, 0, bias_half * n_gates * hidden, n_gates * hidden)
    idx = cx.conv.param(f"{cx.op_type.lower()}_gate_order", rows.astype(np.int64),
                        TensorType("int64", rows.shape))
    return cx.op("aten::index_select", w, 0, idx)


def recurrent(cx: NodeContext):
    op = cx.op_type
    order = _GATES[op][0]
    n_gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    direction = cx.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise Unsupported(f"direction={direction!r}")
    n_dir = 2 if direction == "bidirectional" else 1
    aten = _activations(cx, n_dir)
    if cx.attr("clip", None) is not None:
        raise Unsupported("clip")
    if op == "LSTM" and cx.attr("input_forget", 0):
        raise Unsupported("input_forget=1")
    reset_first = op == "GRU" and not cx.attr("linear_before_reset", 0)   # torch's GRU: the other way
    batch_first = bool(cx.attr("layout", 0))
    cx.require_dtype(0, {"float32", "float64"})
    wshape = cx.shape(1)
    hidden = cx.attr("hidden_size", None)
    if hidden is None:
        if wshape is None or not isinstance(wshape[1], int):
            raise Unsupported("hidden_size is not given and W's shape is unknown")
        hidden = wshape[1] // n_gates
    x = cx.x(0)
    seq_axis, batch_axis = (1, 0) if batch_first else (0, 1)
    if cx.has(4):
        lens = cx.const(4)
        seq = cx.shape(0)[seq_axis] if cx.shape(0) is not None else None
        if lens is None or not isinstance(seq, int) or not (np.asarray(lens) == seq).all():
            raise Unsupported("sequence_lens other than the full length of every sequence")
    has_b = cx.has(3)
    peepholes = op == "LSTM" and cx.has(7)
    if reset_first or peepholes:
        states = []
        for i in ((5, 6) if peepholes else (5,)):
            st = cx.x(i) if cx.has(i) else None
            states.append(cx.op("aten::permute", st, [1, 0, 2]) if st is not None and batch_first else st)
        return _time_loop(cx, hidden, direction, batch_first, states)
    params = []
    for d in range(n_dir):
        params += [_weights(cx, 1, d, n_gates, hidden, order), _weights(cx, 2, d, n_gates, hidden, order)]
        if has_b:
            params += [_weights(cx, 3, d, n_gates, hidden, order, 0), _weights(cx, 3, d, n_gates, hidden, order, 1)]
    states = []
    for i in ((5, 6) if op == "LSTM" else (5,)):
        if cx.has(i):
            s = cx.x(i)
            states.append(cx.op("aten::permute", s, [1, 0, 2]) if batch_first else s)   # (dirs, batch, hidden)
        else:
            shape = [n_dir, dim_item(cx, 0, x, batch_axis), hidden]
            states.append(cx.op("aten::zeros", cx.list_value(shape), None, None, None, None)
                          if any(not isinstance(s, int) for s in shape) else
                          cx.conv.param(f"{op.lower()}_zero_state", np.zeros(shape, cx.dtype(0)),
                                        TensorType(cx.dtype(0), tuple(shape))))
    reverse = direction == "reverse"
    if reverse:
        x = cx.op("aten::flip", x, [seq_axis])
    hx = states if op == "LSTM" else states[0]
    outs = cx.op(aten, x, hx, params, has_b, 1, 0.0, False, n_dir == 2, batch_first,
                 n_out=3 if op == "LSTM" else 2)
    y, finals = outs[0], list(outs[1:])
    if reverse:
        y = cx.op("aten::flip", y, [seq_axis])
    # torch: (seq, batch, dirs * hidden); ONNX: (seq, dirs, batch, hidden), or (batch, seq, dirs, hidden)
    lead = [dim_item(cx, 0, cx.x(0), 0), dim_item(cx, 0, cx.x(0), 1)]
    y = cx.op("aten::reshape", y, cx.list_value([*lead, n_dir, hidden]))
    if not batch_first:
        y = cx.op("aten::permute", y, [0, 2, 1, 3])
    if batch_first:
        finals = [cx.op("aten::permute", f, [1, 0, 2]) for f in finals]
    return (y, *finals)


def _gru_step(cx: NodeContext, xt, h, r, rb, hidden: int):
    """One GRU step with ``linear_before_reset=0``: ``h_t = ht + z * (h - ht)``,
    ``ht = tanh(x W_h + (r * h) R_h + b)`` (ONNX's gate order z, r, h)."""
    h2 = 2 * hidden
    r_zr = cx.op("aten::t", cx.op("aten::narrow", r, 0, 0, h2))
    r_h = cx.op("aten::t", cx.op("aten::narrow", r, 0, h2, hidden))
    hr = cx.op("aten::matmul", h, r_zr)
    if rb is not None:
        hr = cx.op("aten::add", hr, cx.op("aten::narrow", rb, 0, 0, h2), 1)
    zr = cx.op("aten::sigmoid", cx.op("aten::add", cx.op("aten::narrow", xt, 1, 0, h2), hr, 1))
    z = cx.op("aten::narrow", zr, 1, 0, hidden)
    rg = cx.op("aten::narrow", zr, 1, hidden, hidden)
    hh = cx.op("aten::matmul", cx.op("aten::mul", rg, h), r_h)
    if rb is not None:
        hh = cx.op("aten::add", hh, cx.op("aten::narrow", rb, 0, h2, hidden), 1)
    hh = cx.op("aten::tanh", cx.op("aten::add", cx.op("aten::narrow", xt, 1, h2, hidden), hh, 1))
    return [cx.op("aten::add", hh, cx.op("aten::mul", z, cx.op("aten::sub", h, hh, 1)), 1)]


def _lstm_step(cx: NodeContext, xt, h, c, r, rb, p, hidden: int):
    """One LSTM step with peepholes ``p`` (ONNX's gate order i, o, f, c; peepholes i, o, f)."""
    g = cx.op("aten::add", xt, cx.op("aten::matmul", h, cx.op("aten::t", r)), 1)
    if rb is not None:
        g = cx.op("aten::add", g, rb, 1)

    def gate(k):
        return cx.op("aten::narrow", g, 1, k * hidden, hidden)

    def peep(k):
        return cx.op("aten::narrow", p, 0, k * hidden, hidden)

    i = cx.op("aten::sigmoid", cx.op("aten::add", gate(0), cx.op("aten::mul", peep(0), c), 1))
    f = cx.op("aten::sigmoid", cx.op("aten::add", gate(2), cx.op("aten::mul", peep(2), c), 1))
    c_new = cx.op("aten::add", cx.op("aten::mul", f, c), cx.op("aten::mul", i, cx.op("aten::tanh", gate(3))), 1)
    o = cx.op("aten::sigmoid", cx.op("aten::add", gate(1), cx.op("aten::mul", peep(1), c_new), 1))
    return [cx.op("aten::mul", o, cx.op("aten::tanh", c_new)), c_new]


def _time_loop(cx: NodeContext, hidden: int, direction: str, batch_first: bool, init_states):
    """What torch's cells do not compute (GRU with ``linear_before_reset=0``, ONNX's default; LSTM
    with peepholes) as a ``prim::Loop`` over time per direction of srcore ops, the input products
    of every step computed before it. ``init_states``: (dirs, batch, hidden) tensors or None."""
    from ....ir.builder import BlockScope
    from ....ir.types import INT, ListType

    conv = cx.conv
    lstm = cx.op_type == "LSTM"
    n_gates = 4 if lstm else 3
    dt = cx.dtype(0)
    x = cx.x(0)
    xs = cx.op("aten::permute", x, [1, 0, 2]) if batch_first else x    # (seq, batch, input)
    seq_axis, batch_axis = (1, 0) if batch_first else (0, 1)
    steps = dim_item(cx, 0, x, seq_axis)
    n_dir = 2 if direction == "bidirectional" else 1
    ys, finals = [], [[] for _ in init_states]
    h_type = TensorType(dt, (None, hidden))
    seq_t = ListType(TensorType())
    for d in range(n_dir):
        w = cx.op("aten::select", cx.x(1), 0, d)                        # (gates * H, input)
        r = cx.op("aten::select", cx.x(2), 0, d)                        # (gates * H, H)
        xw = cx.op("aten::matmul", xs, cx.op("aten::t", w))              # (seq, batch, gates * H)
        rb = None
        if cx.has(3):
            b = cx.op("aten::select", cx.x(3), 0, d)                    # W's biases, then R's
            xw = cx.op("aten::add", xw, cx.op("aten::narrow", b, 0, 0, n_gates * hidden), 1)
            rb = cx.op("aten::narrow", b, 0, n_gates * hidden, n_gates * hidden)
        p = cx.op("aten::select", cx.x(7), 0, d) if lstm else None
        backward = direction == "reverse" or d == 1
        if backward:
            xw = cx.op("aten::flip", xw, [0])
        inits = []
        for st in init_states:
            inits.append(cx.op("aten::select", st, 0, d) if st is not None else
                         cx.op("aten::zeros", cx.list_value([dim_item(cx, 0, x, batch_axis), hidden]), None, None,
                               None, None))
        lst = cx.op("prim::ListConstruct", types=[seq_t])
        node = conv.graph.create("prim::Loop", [conv.builder.value(steps), conv.builder.value(True), *inits, lst],
                                 [h_type] * len(inits) + [seq_t], source=cx.source)
        conv.builder.block.append(node)
        blk = node.add_block()
        t = blk.add_input(INT)
        carried = [blk.add_input(h_type) for _ in inits]
        acc = blk.add_input(seq_t)
        with BlockScope(conv.builder, blk):
            xt = cx.op("aten::select", xw, 0, t)                         # (batch, gates * H)
            new = _lstm_step(cx, xt, *carried, r, rb, p, hidden) if lstm else \
                _gru_step(cx, xt, carried[0], r, rb, hidden)
            acc2 = cx.op("aten::append", acc, new[0], types=[seq_t])
            for v in (conv.builder.value(True), *new, acc2):
                blk.register_output(v)
        y = cx.op("aten::stack", node.outputs[-1], 0)                    # (seq, batch, H)
        if backward:
            y = cx.op("aten::flip", y, [0])
        ys.append(y)
        for k in range(len(inits)):
            finals[k].append(node.outputs[k])
    y = cx.op("aten::stack", cx.op("prim::ListConstruct", *ys, types=[seq_t]), 1)
    lasts = [cx.op("aten::stack", cx.op("prim::ListConstruct", *f, types=[seq_t]), 0) for f in finals]
    if batch_first:   # ONNX layout=1: Y (batch, seq, dirs, hidden), Y_h/Y_c (batch, dirs, hidden)
        y = cx.op("aten::permute", y, [2, 0, 1, 3])
        lasts = [cx.op("aten::permute", v, [1, 0, 2]) for v in lasts]
    return (y, *lasts)


# version 7 (opsets 7-13) is version 14 without the layout attribute (14 added it, default 0, and bfloat16)
CONVERTERS = table(LSTM=(recurrent, 7, 14, 22), GRU=(recurrent, 7, 14, 22), RNN=(recurrent, 7, 14, 22))

"""Recurrent layers: ``aten::lstm`` and ``aten::gru`` (padded input, any number of layers, one or
two directions, batch-first or not, initial states of any origin) as OpenVINO's LSTMSequence and
GRUSequence, one per layer.

torch orders the LSTM gates (input, forget, cell, output) and the GRU gates (reset, update, new);
OpenVINO wants (forget, input, cell, output) and (update, reset, hidden): the weight rows are
reordered at build time. torch's GRU applies the reset gate to ``W_hn h + b_hn``, which is
OpenVINO's ``linear_before_reset``. Projections (``proj_size``) and packed sequences run elsewhere.
"""
from __future__ import annotations

import numpy as np

from .table import i64, out, rank, register

_CONSTS = ("params", "has_biases", "num_layers", "dropout", "train", "bidirectional", "batch_first")
#: torch's gate blocks -> OpenVINO's order
_LSTM_ORDER = (1, 0, 2, 3)   # i f g o -> f i g o
_GRU_ORDER = (1, 0, 2)       # r z n -> z r n


def _layout(n, gates: int):
    """(hidden, layers, dirs) if the weights are torch's plain layout for this op, else None."""
    params = n.const("params")
    layers, bidir, biased = n.const("num_layers"), n.const("bidirectional"), n.const("has_biases")
    if not (isinstance(layers, int) and layers >= 1 and isinstance(bidir, bool) and isinstance(biased, bool)):
        return None
    dirs = 2 if bidir else 1
    per = 4 if biased else 2
    if not isinstance(params, (list, tuple)) or len(params) != layers * dirs * per:
        return None   # projections (proj_size) add a weight per direction
    w_hh = np.asarray(params[1])
    if w_hh.ndim != 2 or w_hh.shape[0] % gates:
        return None
    hidden = w_hh.shape[0] // gates
    return (hidden, layers, dirs) if w_hh.shape[1] == hidden else None


def _ok(gates: int):
    def check(n) -> bool:
        # in training torch applies dropout between layers; eval ignores it
        return n.const("train") is False and _layout(n, gates) is not None
    return check


def _reorder(w: np.ndarray, order, hidden: int) -> np.ndarray:
    blocks = [w[k * hidden:(k + 1) * hidden] for k in range(len(order))]
    return np.concatenate([blocks[k] for k in order], axis=0)


def _weights(c, gates: int, order, layer: int, dirs: int, hidden: int):
    """W, R, B of one layer, stacked over directions, in OpenVINO's gate order."""
    params = [np.asarray(p, dtype=np.float32) for p in c.const("params")]
    biased = c.const("has_biases")
    per = 4 if biased else 2
    ws, rs, bs = [], [], []
    for d in range(dirs):
        group = params[(layer * dirs + d) * per:(layer * dirs + d + 1) * per]
        w_ih, w_hh = group[0], group[1]
        b_ih = group[2] if biased else np.zeros(gates * hidden, np.float32)
        b_hh = group[3] if biased else np.zeros(gates * hidden, np.float32)
        ws.append(_reorder(w_ih, order, hidden))
        rs.append(_reorder(w_hh, order, hidden))
        if gates == 4:
            bs.append(_reorder(b_ih + b_hh, order, hidden))
        else:   # linear_before_reset: [b_z, b_r, b_in, b_hn] with the input and hidden biases of z, r summed
            both = _reorder(b_ih + b_hh, order, hidden)
            bs.append(np.concatenate([both[:2 * hidden], b_ih[2 * hidden:], b_hh[2 * hidden:]]))
    o = c.o
    return (o.constant(np.stack(ws)).output(0), o.constant(np.stack(rs)).output(0),
            o.constant(np.stack(bs)).output(0))


def _recurrent(c, gates: int, order, states):
    """The converter body; ``states`` are the initial (h, c) or (h,) values, each (L*D, B, H)."""
    o = c.o
    x = c.x("input")
    if rank(x) != 3:
        c.fail("an unbatched (2-D) input runs outside the engine")
    hidden, layers, dirs = _layout(c, gates)
    batch_first = c.const("batch_first")
    y = x if batch_first else out(o.transpose(x, i64(o, [1, 0, 2])))           # (B, T, F)
    shape = out(o.shape_of(y, "i64"))
    batch = out(o.gather(shape, i64(o, [0]), i64(o, 0)))
    seq_lens = out(o.broadcast(out(o.gather(shape, i64(o, 1), i64(o, 0))), batch))
    finals = [[] for _ in states]
    for layer in range(layers):
        # torch's states are (L*D, B, H); OpenVINO's (B, D, H)
        init = [out(o.transpose(out(o.slice(s, i64(o, [layer * dirs]), i64(o, [(layer + 1) * dirs]), i64(o, [1]),
                                            i64(o, [0]))), i64(o, [1, 0, 2]))) for s in states]
        w, r, b = _weights(c, gates, order, layer, dirs, hidden)
        direction = "bidirectional" if dirs == 2 else "forward"
        if gates == 4:
            node = o.lstm_sequence(y, init[0], init[1], seq_lens, w, r, b, hidden, direction)
        else:
            node = o.gru_sequence(y, init[0], seq_lens, w, r, b, hidden, direction, linear_before_reset=True)
        # Y (B, D, T, H) -> (B, T, D*H)
        y = out(o.reshape(out(o.transpose(node.output(0), i64(o, [0, 2, 1, 3]))), i64(o, [0, 0, -1]),
                          special_zero=True))
        for k in range(len(states)):
            finals[k].append(out(o.transpose(node.output(1 + k), i64(o, [1, 0, 2]))))   # (D, B, H)
    result = y if batch_first else out(o.transpose(y, i64(o, [1, 0, 2])))
    return (result, *(f[0] if len(f) == 1 else out(o.concat(f, 0)) for f in finals))


@register("aten::lstm.input", consts=_CONSTS, check=_ok(4))
def _lstm(c):
    hx = c.tensors("hx")
    if len(hx) != 2:
        c.fail("hx must be (h_0, c_0)")
    return _recurrent(c, 4, _LSTM_ORDER, hx)


@register("aten::gru.input", consts=_CONSTS, check=_ok(3))
def _gru(c):
    return _recurrent(c, 3, _GRU_ORDER, [c.x("hx")])

"""Recurrent cells: ``aten::lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell`` (one step).

The same gate arithmetic as the layers in :mod:`.recurrent` (weights transposed, LSTM gates
reordered so the three sigmoids are one call, biases folded); the matcher lays out constant
weights once at load. A float32 LSTM or GRU cell on constant weights runs its step as one call of
the layers' compiled loop (``jit_recurrent``, one step: ``T = 1``) after one GEMM of the input
projection: ~2 us a step at batch 2 and hidden 12-16, where the ~12 numpy calls of
:func:`_cell_step` took ~24 us (cells stepped in a loop: GRUCell/LSTMCell decoders, masked updates).
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo, Specialized

from .recurrent import GATES, _dtype_of, _expit, _fail, _gru_candidate, _lstm_order, _mode_of, _states, _write



class CellWeights:
    """``wihT (I, G*H)``, ``whhT (H, G*H)``, the folded bias (GRU: b_ih + [b_hr, b_hz, 0]) and GRU's b_hn."""

    __slots__ = ("wihT", "whhT", "bias", "bhn", "hidden")

    def __init__(self, wihT, whhT, bias, bhn, hidden):
        self.wihT, self.whhT, self.bias, self.bhn, self.hidden = wihT, whhT, bias, bhn, hidden


def prepare_cell(mode, w_ih, w_hh, b_ih, b_hh, dtype, op) -> CellWeights:
    """Check and lay out one cell's weights (LSTM gates reordered to ``i, f, o, g``)."""
    g = GATES[mode]
    dt = np.dtype(dtype)
    if w_hh.ndim != 2 or w_hh.shape[0] % g or w_hh.shape[1] != w_hh.shape[0] // g:
        raise _fail(op, f"w_hh must be ({g}*hidden_size, hidden_size), got shape {tuple(w_hh.shape)}")
    hidden = w_hh.shape[1]
    if w_ih.ndim != 2 or w_ih.shape[0] != g * hidden:
        raise _fail(op, f"w_ih must be ({g * hidden}, input_size), got shape {tuple(w_ih.shape)}")
    if (b_ih is None) != (b_hh is None):
        raise _fail(op, "give both b_ih and b_hh, or neither")
    for name, b in (("b_ih", b_ih), ("b_hh", b_hh)):
        if b is not None and b.shape != (g * hidden,):
            raise _fail(op, f"{name} must have shape {(g * hidden,)}, got {tuple(b.shape)}")
    bias = bhn = None
    if mode == "lstm":
        w_ih, w_hh = _lstm_order(w_ih, hidden), _lstm_order(w_hh, hidden)
    if b_ih is not None:
        if mode == "gru":
            bias = b_ih.astype(dt, copy=True)
            bias[:2 * hidden] += b_hh[:2 * hidden]
            bhn = np.ascontiguousarray(b_hh[2 * hidden:], dtype=dt)
        else:
            bias = b_ih.astype(dt) + b_hh.astype(dt)
            if mode == "lstm":
                bias = _lstm_order(bias, hidden)
        bias = np.ascontiguousarray(bias, dtype=dt)
    return CellWeights(np.ascontiguousarray(w_ih.T, dtype=dt), np.ascontiguousarray(w_hh.T, dtype=dt),
                       bias, bhn, hidden)


def _cell_step(mode, cw: CellWeights, x, h, c, op):
    """One step for 2-D ``x (B, I)``, ``h (B, H)`` (and ``c``); returns fresh ``h'`` (and ``c'``)."""
    hidden = cw.hidden
    if x.shape[-1] != cw.wihT.shape[0]:
        raise _fail(op, f"input has {x.shape[-1]} features, w_ih expects {cw.wihT.shape[0]}")
    if h.shape != (x.shape[0], hidden):
        raise _fail(op, f"hx must have shape {(x.shape[0], hidden)}, got {tuple(h.shape)}")
    if c is not None and c.shape != (x.shape[0], hidden):
        raise _fail(op, f"hx[1] must have shape {(x.shape[0], hidden)}, got {tuple(c.shape)}")
    xg = np.dot(x, cw.wihT)
    if cw.bias is not None:
        np.add(xg, cw.bias, out=xg)
    hp = np.dot(h, cw.whhT)
    if mode == "lstm":
        np.add(xg, hp, out=xg)
        sig = xg[:, :3 * hidden]
        _expit()(sig, out=sig)
        gg = xg[:, 3 * hidden:]
        np.tanh(gg, out=gg)
        c2 = np.multiply(c, xg[:, hidden:2 * hidden])
        c2 += xg[:, :hidden] * gg
        h2 = np.tanh(c2)
        np.multiply(h2, xg[:, 2 * hidden:3 * hidden], out=h2)
        return h2, c2
    if mode == "gru":
        n = _gru_candidate(xg, hp, cw.bhn, hidden, _expit())
        h2 = np.subtract(h, n)
        np.multiply(h2, xg[:, hidden:2 * hidden], out=h2)
        np.add(h2, n, out=h2)
        return h2, None
    np.add(xg, hp, out=xg)
    return (np.tanh(xg, out=xg) if mode == "rnn_tanh" else np.maximum(xg, 0, out=xg)), None


def _cell_call(mode, cw, input, hx, out, op):
    dt = _dtype_of(op, input)
    h, c = _states(op, mode, hx)
    batched = input.ndim == 2
    if input.ndim not in (1, 2):
        raise _fail(op, f"input must be 1-D or 2-D, got shape {tuple(input.shape)}")
    if h.ndim != input.ndim or (c is not None and c.ndim != input.ndim):
        raise _fail(op, f"hx must be {input.ndim}-D like the input, got shape {tuple(h.shape)}")
    x2, h2, c2 = (input, h, c) if batched else (input[None], h[None], None if c is None else c[None])
    h_new, c_new = _cell_step(mode, cw, x2.astype(dt, copy=False), h2.astype(dt, copy=False),
                              None if c2 is None else c2.astype(dt, copy=False), op)
    if not batched:
        h_new = h_new[0]
        c_new = None if c_new is None else c_new[0]
    if mode == "lstm":
        return _write(out, (h_new, c_new))
    if out is None:
        return h_new
    np.copyto(out, h_new)
    return out


def _make_cell(mode, prepared=None):
    op = f"aten::{mode}_cell"

    def cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None, out=None):
        cw = prepared if prepared is not None else prepare_cell(mode, w_ih, w_hh, b_ih, b_hh, input.dtype, op)
        return _cell_call(mode, cw, input, hx, out, op)
    cell.__name__ = f"{mode}_cell"
    cell.__doc__ = f"``{op}``: one step; " + ("(h', c')." if mode == "lstm" else "h'.")
    return cell


def _make_const_cell(mode, w_ih, w_hh, b_ih, b_hh):
    """A cell kernel on constant weights, laid out once per input dtype (the weights' own at load)."""
    op = f"aten::{mode}_cell"
    by_dtype = {w_ih.dtype: prepare_cell(mode, w_ih, w_hh, b_ih, b_hh, w_ih.dtype, op)}
    step = _compiled_step(mode, by_dtype[w_ih.dtype], (w_ih, w_hh, b_ih, b_hh)) if w_ih.dtype == np.float32 else None

    def cell_const(input, hx, out=None):
        if step is not None and input.dtype == np.float32:
            got = step(input, hx, out)
            if got is not None:
                return got
        cw = by_dtype.get(input.dtype)
        if cw is None:
            cw = by_dtype[input.dtype] = prepare_cell(mode, w_ih, w_hh, b_ih, b_hh, _dtype_of(op, input), op)
        return _cell_call(mode, cw, input, hx, out, op)
    cell_const.__name__ = f"{mode}_cell_const"
    return cell_const


def _compiled_step(mode, cw: CellWeights, weights):
    """``step(input, hx, out)`` for float32 LSTM / GRU weights (``cw``; a small tanh RNN's
    ``weights`` as a pinned GRU's, :func:`.recurrent.pinned_gru_weights`; a relu one's too, on the
    loop's relu candidate): the input projection as one GEMM, then the layers' compiled loop for one
    step, the states updated in the output rows (the loop updates its states in place); None for
    larger RNNs. ``step`` returns None (the numpy step
    takes it, and reports what is wrong) unless the input is 2-D (B, I) and the states float32 (B, H)."""
    from .recurrent import PINNED_GRU_MAX_HIDDEN, aligned, pinned_gru_weights

    loop = mode
    if mode in ("rnn_tanh", "rnn_relu") and cw.hidden <= PINNED_GRU_MAX_HIDDEN:
        loop = "gru" if mode == "rnn_tanh" else "gru_relu"
        mode, cw = "gru", prepare_cell("gru", *pinned_gru_weights(*weights, np.float32), np.float32, f"aten::{mode}_cell")
    if mode not in ("lstm", "gru"):
        return None
    from .jit_recurrent import kernel   # imports numba: only models with float32 LSTM / GRU cells

    hidden, g = cw.hidden, cw.whhT.shape[1]
    run = kernel(loop, hidden)
    wihT, whhT = cw.wihT, aligned(cw.whhT, np.float32)
    bias = np.zeros(g, np.float32) if cw.bias is None else np.ascontiguousarray(cw.bias, np.float32)
    bhn = np.zeros(hidden, np.float32) if cw.bhn is None else np.ascontiguousarray(cw.bhn, np.float32)
    width = wihT.shape[0]
    lstm = mode == "lstm"

    f32 = np.dtype(np.float32)

    def state(s, shape):
        return type(s) is np.ndarray and s.dtype is f32 and s.shape == shape

    def row(o, shape):
        """``o`` if the loop can update it in place, else a fresh (B, H)."""
        return o if state(o, shape) and o.flags.c_contiguous else np.empty(shape, f32)

    def step(input, hx, out):
        # (per-call checks kept lean: a decoder's step is ~3 us, checks included)
        if input.ndim != 2 or input.shape[1] != width:
            return None
        shape = (input.shape[0], hidden)
        if lstm:
            if type(hx) not in (list, tuple) or len(hx) != 2 or not (state(hx[0], shape) and state(hx[1], shape)):
                return None
            if out is None:
                h, c = np.empty(shape, f32), np.empty(shape, f32)
            else:
                h, c = row(out[0], shape), row(out[1], shape)
        elif not state(hx, shape):
            return None
        else:
            h = np.empty(shape, f32) if out is None else row(out, shape)
        xp = np.dot(input, wihT)   # before the states: an output buffer may share the input's memory
        if lstm:
            np.copyto(h, hx[0])
            np.copyto(c, hx[1])
            run(xp, 0, 1, 0, bias, whhT, h, c, h, 0, False)
            if out is None:
                return h, c
            if out[0] is not h:
                np.copyto(out[0], h)
            if out[1] is not c:
                np.copyto(out[1], c)
            return out
        np.copyto(h, hx)
        run(xp, 0, 1, 0, bias, whhT, bhn, h, h, 0, False)
        if out is not None and out is not h:
            np.copyto(out, h)
        return h if out is None else out
    return step


lstm_cell = _make_cell("lstm")
gru_cell = _make_cell("gru")
rnn_tanh_cell = _make_cell("rnn_tanh")
rnn_relu_cell = _make_cell("rnn_relu")
_CELLS = {"lstm": lstm_cell, "gru": gru_cell, "rnn_tanh": rnn_tanh_cell, "rnn_relu": rnn_relu_cell}


def cell_matcher(node: NodeInfo):
    """Constant weights and biases: transpose, reorder and fold them once at load; else the generic cell."""
    mode = _mode_of(node.op)[:-len("_cell")]
    generic = _CELLS[mode]
    names = ("w_ih", "w_hh", "b_ih", "b_hh")
    try:
        if not all(node.is_const(n) for n in names):
            return generic
        w_ih, w_hh, b_ih, b_hh = (node.const(n) for n in names)
    except KeyError:  # b_ih/b_hh left to their defaults are not arguments of the node
        return generic
    if not isinstance(w_ih, np.ndarray) or not isinstance(w_hh, np.ndarray) or w_ih.dtype.kind != "f":
        return generic
    try:
        fn = _make_const_cell(mode, w_ih, w_hh, b_ih, b_hh)
    except KernelError:
        return generic  # let the generic kernel report it when the node runs
    return Specialized(fn, args=(0, 1))

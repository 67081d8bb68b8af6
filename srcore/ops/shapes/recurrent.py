"""Recurrent ops: lstm/gru/rnn_tanh/rnn_relu (``.input``, packed ``.data``) and their cells.

Output sizes come from the initial states (``hx``: ``(layers*dirs, batch, H_out)``, LSTM's
``c``: ``(layers*dirs, batch, H)``); when a state's shape is unknown, from the weights
(``w_hh`` of layer 0 is ``(G*H, H_out)``, ``w_hr`` makes ``H_out`` the projection size).
"""
from __future__ import annotations

from . import symbolic as sym
from .base import Ctx, UNKNOWN, rule, tt

_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _mode(ctx: Ctx) -> str:
    return ctx.op.split("::", 1)[-1].split(".", 1)[0].removesuffix("_cell").removesuffix("_dynamic")


def _elem_shapes(ctx: Ctx, pos: int, name: str) -> list | None:
    """Shapes of the elements of a ``Tensor[]`` argument of known length, else None."""
    a = ctx.arg(pos, name)
    if a is None or a.elems is None:
        return None
    return [getattr(e.type, "shape", None) for e in a.elems]


def _states(ctx: Ctx, mode: str, pos: int):
    """(h shape, c shape or None) of ``hx`` (a tensor, or LSTM's list [h, c]); unknown -> None."""
    if mode != "lstm":
        return ctx.tensor(pos, "hx").shape, None
    shapes = _elem_shapes(ctx, pos, "hx")
    if shapes is None:
        return None, None
    if len(shapes) != 2:
        raise ctx.fail(f"hx must be a list of two tensors (h_0, c_0), got {len(shapes)}")
    return shapes[0], shapes[1]


def _sizes_from_weights(ctx: Ctx, mode: str, pos: int, layers, dirs, has_biases):
    """(hidden, H_out) from ``params`` (w_hh of layer 0; LSTM's w_hr), or (None, None)."""
    shapes = _elem_shapes(ctx, pos, "params")
    if not shapes or len(shapes) < 2 or shapes[1] is None or len(shapes[1]) != 2:
        return None, None
    gh, hout = shapes[1]
    hidden = gh // _GATES[mode] if isinstance(gh, int) else None
    if isinstance(layers, int) and isinstance(dirs, int) and isinstance(has_biases, bool) and mode == "lstm":
        per = 2 + 2 * has_biases
        if len(shapes) == layers * dirs * (per + 1):  # projections: w_hr is (H_out, H)
            w_hr = shapes[per]
            hout = w_hr[0] if w_hr is not None and len(w_hr) == 2 else None
    return hidden, hout


def _check_rank(ctx: Ctx, shape, n: int, what: str):
    if shape is not None and len(shape) != n:
        raise ctx.fail(f"{what} must be {n}-D, got shape {shape}")


def _same(ctx: Ctx, a, b, what: str):
    if a is not None and b is not None and sym.equal(a, b) is False:
        raise ctx.fail(f"{what}: {a} vs {b}")


@rule("aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "quantized::lstm_dynamic", "quantized::gru_dynamic")
def recurrent(ctx: Ctx):
    """``(output, h_n[, c_n])``: output ``(T, B, D*H_out)`` (``(B, T, ...)`` batch-first; packed:
    ``(N, D*H_out)``), the final states shaped as the initial ones."""
    mode = _mode(ctx)
    packed = ctx.op.endswith(".data")
    off = 1 if packed else 0  # .data has batch_sizes after data
    x = ctx.tensor(0)
    h, c = _states(ctx, mode, 1 + off)
    has_biases, layers = ctx.known(3 + off, "has_biases"), ctx.known(4 + off, "num_layers")
    bidir = ctx.known(7 + off, "bidirectional")
    batch_first = False if packed else ctx.known(8, "batch_first")
    dirs = (2 if bidir else 1) if isinstance(bidir, bool) else None
    _check_rank(ctx, x.shape, 2 if packed else 3, "packed data" if packed else "input")
    _check_rank(ctx, h, 3, "hx[0]" if mode == "lstm" else "hx")
    _check_rank(ctx, c, 3, "hx[1]")
    hidden, hout = _sizes_from_weights(ctx, mode, 2 + off, layers, dirs, has_biases)
    if h is not None:
        _same(ctx, h[2], hout, "the hidden state size does not match w_hh")
        hout = h[2] if h[2] is not None else hout
        if isinstance(layers, int) and dirs is not None:
            _same(ctx, h[0], layers * dirs, "hx must have num_layers * num_directions states")
    if c is not None:
        _same(ctx, c[2], hidden, "the cell state size does not match w_hh")
        hidden = c[2] if c[2] is not None else hidden
    feat = sym.mul(dirs, hout) if dirs is not None and isinstance(hout, (int, str)) else None
    if x.shape is None:
        out_shape = None
    elif packed:
        out_shape = (x.shape[0], feat)
    else:
        if batch_first is UNKNOWN:
            out_shape = (None, None, feat)
        else:
            b = x.shape[0] if batch_first else x.shape[1]
            if h is not None:
                _same(ctx, h[1], b, "the batch size of hx does not match the input")
            out_shape = (x.shape[0], x.shape[1], feat)
    if h is None:
        lead = layers * dirs if isinstance(layers, int) and dirs is not None else None
        b = None
        if x.shape is not None and not packed and isinstance(batch_first, bool):
            b = x.shape[0] if batch_first else x.shape[1]
        h = (lead, b, hout)
        if mode == "lstm" and c is None:
            c = (lead, b, hidden)
    if ctx.op.startswith("quantized::") and x.dtype not in (None, "float32"):
        raise ctx.fail(f"a dynamic-quantized LSTM takes a float32 input, got {x.dtype}")
    outs = [tt(x.dtype, out_shape), tt(x.dtype, h)]
    if mode == "lstm":
        outs.append(tt(x.dtype, c))
    return outs


@rule("aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell")
def cell(ctx: Ctx):
    """The next state(s), shaped as the given ones: ``h'`` (LSTM: ``h', c'``)."""
    mode = _mode(ctx)
    x = ctx.tensor(0)
    h, c = _states(ctx, mode, 1)
    w_hh = ctx.tensor(3, "w_hh").shape
    hidden = w_hh[1] if w_hh is not None and len(w_hh) == 2 else None
    if x.shape is not None and len(x.shape) not in (1, 2):
        raise ctx.fail(f"input must be 1-D or 2-D, got shape {x.shape}")
    for s, what in ((h, "hx[0]" if mode == "lstm" else "hx"), (c, "hx[1]")):
        if s is not None and x.shape is not None:
            _check_rank(ctx, s, len(x.shape), what)
            if len(s) == 2:
                _same(ctx, s[0], x.shape[0], f"the batch size of {what} does not match the input")
        if s is not None and s:
            _same(ctx, s[-1], hidden, f"the size of {what} does not match w_hh")
    if h is None and x.shape is not None:
        h = tuple(x.shape[:-1]) + (hidden,)
    if mode == "lstm":
        if c is None:
            c = h
        return [tt(x.dtype, h), tt(x.dtype, c)]
    return [tt(x.dtype, h)]

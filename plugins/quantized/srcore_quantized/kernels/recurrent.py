"""quantized::lstm_dynamic and quantized::gru_dynamic: quantize_dynamic's LSTM and GRU (torch's
``aten::quantized_lstm`` / ``aten::quantized_gru`` with ``QuantizedCellParamsDynamic`` cells), with
each projection as ``quantized::linear_dynamic``."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from .linear import qlinear_dynamic_out

OP = "quantized::lstm_dynamic"


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _direction(xs: np.ndarray, h: np.ndarray, c: np.ndarray, w_ih, w_hh, b_ih, b_hh, reduce_range: bool,
               reverse: bool):
    """One layer in one direction over ``xs`` (T, B, I): torch (RNN.cpp, ``FullLayer`` on cpu) projects
    the whole sequence at once (one dynamic quantization of all of it), then each step's hidden state."""
    t = xs.shape[0]
    xw = qlinear_dynamic_out(xs, w_ih, b_ih, reduce_range)
    ys = np.empty((t,) + h.shape, np.float32)
    for s in (range(t - 1, -1, -1) if reverse else range(t)):
        gates = qlinear_dynamic_out(h, w_hh, b_hh, reduce_range) + xw[s]
        i, f, g, o = np.split(gates, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = (_sigmoid(o) * np.tanh(c)).astype(np.float32)
        c = c.astype(np.float32)
        ys[s] = h
    return ys, h, c


def _gru_direction(xs: np.ndarray, h: np.ndarray, c, w_ih, w_hh, b_ih, b_hh, reduce_range: bool, reverse: bool):
    """One GRU layer in one direction, as :func:`_direction` (torch's ``GRUCell``: reset, update and new
    gates, ``(h - n) * z + n``); ``c`` is unused (None)."""
    t = xs.shape[0]
    xw = qlinear_dynamic_out(xs, w_ih, b_ih, reduce_range)
    ys = np.empty((t,) + h.shape, np.float32)
    for s in (range(t - 1, -1, -1) if reverse else range(t)):
        hw = qlinear_dynamic_out(h, w_hh, b_hh, reduce_range)
        xr, xz, xn = np.split(xw[s], 3, axis=1)
        hr, hz, hn = np.split(hw, 3, axis=1)
        r, z = _sigmoid(hr + xr), _sigmoid(hz + xz)
        n = np.tanh(xn + hn * r)
        h = ((h - n) * z + n).astype(np.float32)
        ys[s] = h
    return ys, h, None


def _run(op: str, step, input, h0, c0, params, has_biases, num_layers, train, bidirectional, batch_first,
         reduce_range):
    """(output, [h_n per layer and direction], [c_n ...]) of ``step`` (one layer, one direction) stacked
    over the layers and directions."""
    if train:
        raise KernelError(f"{op}: train=True is not supported (srcore runs models for inference)")
    x = np.asarray(input, np.float32)
    if x.ndim != 3:
        raise KernelError(f"{op}: the input must be 3-D, got shape {list(x.shape)}")
    dirs = 2 if bidirectional else 1
    if not has_biases or len(params) != 4 * num_layers * dirs:
        raise KernelError(f"{op}: expected {4 * num_layers * dirs} parameters (w_ih, w_hh, b_ih, b_hh per layer "
                          f"and direction), got {len(params)}")
    xs = x.transpose(1, 0, 2) if batch_first else x
    hs, cs = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w_ih, w_hh, b_ih, b_hh = params[4 * k: 4 * k + 4]
            ys, h, c = step(np.ascontiguousarray(xs), h0[k], None if c0 is None else c0[k], w_ih, w_hh, b_ih,
                            b_hh, bool(reduce_range), d == 1)
            outs.append(ys)
            hs.append(h)
            cs.append(c)
        xs = outs[0] if dirs == 1 else np.concatenate(outs, axis=-1)
    return (xs.transpose(1, 0, 2) if batch_first else xs), hs, cs


def gru_dynamic_out(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                    reduce_range=False, *, out=None):
    """(output, h_n) of a dynamic-quantized GRU; ``params`` as :func:`lstm_dynamic_out`'s, ``hx``: h_0."""
    y, hs, _ = _run("quantized::gru_dynamic", _gru_direction, input, np.asarray(hx, np.float32), None, params,
                    has_biases, num_layers, train, bidirectional, batch_first, reduce_range)
    results = (y, np.stack(hs))
    if out is None:
        return tuple(np.ascontiguousarray(r) for r in results)
    for o, r in zip(out, results):
        np.copyto(o, r)
    return out


def lstm_dynamic_out(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                     reduce_range=False, *, out=None):
    """(output, h_n, c_n) of a dynamic-quantized LSTM; ``params``: ``[w_ih, w_hh, b_ih, b_hh]`` per layer
    and direction (qint8 weights, float biases), ``hx``: ``[h_0, c_0]``."""
    h0, c0 = (np.asarray(v, np.float32) for v in hx)
    y, hs, cs = _run(OP, _direction, input, h0, c0, params, has_biases, num_layers, train, bidirectional,
                     batch_first, reduce_range)
    results = (y, np.stack(hs), np.stack(cs))
    if out is None:
        return tuple(np.ascontiguousarray(r) for r in results)
    for o, r in zip(out, results):
        np.copyto(o, r)
    return out

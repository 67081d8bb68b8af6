"""quantized::lstm_dynamic: quantize_dynamic's LSTM (torch's ``aten::quantized_lstm`` with
``QuantizedCellParamsDynamic`` cells), with each projection as ``quantized::linear_dynamic``."""
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


def lstm_dynamic_out(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                     reduce_range=False, *, out=None):
    """(output, h_n, c_n) of a dynamic-quantized LSTM; ``params``: ``[w_ih, w_hh, b_ih, b_hh]`` per layer
    and direction (qint8 weights, float biases), ``hx``: ``[h_0, c_0]``."""
    if train:
        raise KernelError(f"{OP}: train=True is not supported (srcore runs models for inference)")
    x = np.asarray(input, np.float32)
    if x.ndim != 3:
        raise KernelError(f"{OP}: the input must be 3-D, got shape {list(x.shape)}")
    dirs = 2 if bidirectional else 1
    if not has_biases or len(params) != 4 * num_layers * dirs:
        raise KernelError(f"{OP}: expected {4 * num_layers * dirs} parameters (w_ih, w_hh, b_ih, b_hh per layer "
                          f"and direction), got {len(params)}")
    h0, c0 = (np.asarray(v, np.float32) for v in hx)
    xs = x.transpose(1, 0, 2) if batch_first else x
    hs, cs = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w_ih, w_hh, b_ih, b_hh = params[4 * k: 4 * k + 4]
            ys, h, c = _direction(np.ascontiguousarray(xs), h0[k], c0[k], w_ih, w_hh, b_ih, b_hh,
                                  bool(reduce_range), d == 1)
            outs.append(ys)
            hs.append(h)
            cs.append(c)
        xs = outs[0] if dirs == 1 else np.concatenate(outs, axis=-1)
    y = xs.transpose(1, 0, 2) if batch_first else xs
    results = (y, np.stack(hs), np.stack(cs))
    if out is None:
        return tuple(np.ascontiguousarray(r) for r in results)
    for o, r in zip(out, results):
        np.copyto(o, r)
    return out

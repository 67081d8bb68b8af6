"""Recurrent kernels: ``aten::lstm``/``gru``/``rnn_tanh``/``rnn_relu`` (``.input`` and packed
``.data``) and the single-step cells ``lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell``.

How a layer runs: the input projection of **every** timestep and both directions is one GEMM,
``x (N, I) @ W_ih_cat (I, D*G*H)`` plus the folded biases; each step then adds one small GEMM,
``h (B, H_out) @ W_hh^T``, into its slice of that projection and applies the gate activations in
place (``scipy.special.expit``, as ``aten::sigmoid``, imported lazily); float32 LSTM / GRU
layers without a projection run those steps as one compiled loop per direction instead
(``jit_recurrent.py``, compiled at load when the matcher knows the input's dtype). A padded ``(T, B, I)``
input runs both directions in lockstep (:func:`run_lockstep`: step ``i`` is forward time ``i``
and reverse time ``T-1-i``, one numpy call per gate operation for both; 1.15-1.45x faster than a
loop per direction). A packed sequence (:func:`run`) loops per direction over row ranges
``(start, batch)`` of the packed ``(N, ...)`` arrays, ``batch_sizes`` decreasing: rows past a
step's batch keep their last state, which is what torch returns as ``h_n`` for shorter sequences.

Weights are prepared once per weight list (:class:`Prepared`): transposed to C-contiguous
``(in, out)`` matrices for ``np.dot``, the directions' ``W_ih`` concatenated, ``b_ih + b_hh``
folded into the input projection (GRU keeps ``b_hn`` apart, since ``r`` multiplies it) and
LSTM's gates reordered from torch's ``i, f, g, o`` to ``i, f, o, g`` so the three sigmoids are one
call. A frozen weight list (a ``prim::ListConstruct`` of constants nothing writes to) reaches the
matcher as a constant list, so the weights are prepared at load; each node gets its own kernel
whose cache holds them, reused while the same array objects come back (a list computed at run
time is prepared again on every call).
"""
from __future__ import annotations

import math
import operator
import threading

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo

#: mode -> gates per hidden unit
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _expit():
    # scipy.special costs ~100 ms to import: only when a model has a recurrent node (the matcher
    # imports it at load)
    from scipy.special import expit

    return expit


# ---------------------------------------------------------------------------------------------
# weight preparation


class DirWeights:
    """One direction of one layer: ``whhT (H_out, G*H)``, GRU's ``b_hn (H,)``, LSTM's ``whrT (H, P)``;
    ``loop``: what the compiled loop takes for it, ``(its first column in the layer's projection,
    its part of the folded bias, b_hn)``, zeros for a missing bias (set by :class:`LayerWeights`)."""

    __slots__ = ("whhT", "bhn", "whrT", "loop")

    def __init__(self, whhT, bhn, whrT):
        self.whhT, self.bhn, self.whrT = whhT, bhn, whrT


class LayerWeights:
    """One layer: ``wihT (I, D*G*H)`` of all directions, the folded bias ``(D*G*H,)`` or None, the
    directions, and their ``W_hh^T`` / ``W_hr^T`` / ``b_hn`` stacked over directions for the
    lockstep loop (``(D, H_out, G*H)``, ``(D, H, P)``, ``(D, 1, H)``)."""

    __slots__ = ("wihT", "bias", "dirs", "whhT_stack", "whrT_stack", "bhn_stack")

    def __init__(self, wihT, bias, dirs):
        self.wihT, self.bias, self.dirs = wihT, bias, dirs
        gh = dirs[0].whhT.shape[1]
        for k, dw in enumerate(dirs):
            dw.loop = (k * gh, np.zeros(gh, wihT.dtype) if bias is None else bias[k * gh:(k + 1) * gh],
                       np.zeros(dw.whhT.shape[0], wihT.dtype) if dw.bhn is None else dw.bhn)
        self.whhT_stack = np.stack([dw.whhT for dw in dirs])
        self.whrT_stack = None if dirs[0].whrT is None else np.stack([dw.whrT for dw in dirs])
        self.bhn_stack = None if dirs[0].bhn is None else np.stack([dw.bhn[None] for dw in dirs])


class Prepared:
    """The weights of a whole recurrent op, laid out for the kernels (see the module docstring)."""

    __slots__ = ("mode", "hidden", "out_size", "input_size", "layers", "num_dirs")

    def __init__(self, mode, hidden, out_size, input_size, layers, num_dirs):
        self.mode, self.hidden, self.out_size, self.input_size = mode, hidden, out_size, input_size
        self.layers, self.num_dirs = layers, num_dirs


def _lstm_order(a, h):
    """torch's LSTM gate blocks ``i, f, g, o`` (rows of a weight, or a bias) -> ``i, f, o, g``."""
    return np.concatenate([a[:2 * h], a[3 * h:4 * h], a[2 * h:3 * h]], axis=0)


def _fail(op, msg):
    return KernelError(f"{op}: {msg}")


def prepare(mode: str, params, has_biases: bool, num_layers: int, bidirectional: bool, dtype,
            op: str = "", proj: bool | None = None) -> Prepared:
    """Check and lay out a flat ``params`` list as torch orders it: per layer, per direction,
    ``w_ih, w_hh[, b_ih, b_hh][, w_hr]`` (``w_hr`` only for an LSTM with ``proj_size``)."""
    op = op or f"aten::{mode}"
    g = GATES[mode]
    d = 2 if bidirectional else 1
    if not isinstance(num_layers, int) or num_layers < 1:
        raise _fail(op, f"num_layers must be a positive int, got {num_layers!r}")
    per = 2 + 2 * bool(has_biases)
    n = len(params)
    if proj is None:
        proj = mode == "lstm" and n == num_layers * d * (per + 1)
    if proj and mode != "lstm":
        raise _fail(op, "only an LSTM has projection weights")
    per += bool(proj)
    if n != num_layers * d * per:
        raise _fail(op, f"expected {num_layers * d * per} weights ({num_layers} layer(s) x {d} direction(s) x "
                        f"{per}: w_ih, w_hh{', b_ih, b_hh' if has_biases else ''}{', w_hr' if proj else ''}), "
                        f"got {n}")
    dt = np.dtype(dtype)
    arrs = [np.asarray(p) for p in params]
    w_hh0 = arrs[1]
    if w_hh0.ndim != 2 or w_hh0.shape[0] % g:
        raise _fail(op, f"w_hh of layer 0 must be ({g}*hidden_size, hidden), got shape {w_hh0.shape}")
    hidden = w_hh0.shape[0] // g
    out_size = arrs[per - 1].shape[0] if proj else hidden
    input_size = arrs[0].shape[1] if arrs[0].ndim == 2 else None
    layers = []
    for layer in range(num_layers):
        in_size = input_size if layer == 0 else d * out_size
        wihs, biases, dirs = [], [], []
        for k in range(d):
            base = (layer * d + k) * per
            w_ih, w_hh = arrs[base], arrs[base + 1]
            where = f"layer {layer}{' reverse' if k else ''}"
            if w_ih.shape != (g * hidden, in_size):
                raise _fail(op, f"w_ih of {where} must have shape {(g * hidden, in_size)}, got {w_ih.shape}")
            if w_hh.shape != (g * hidden, out_size):
                raise _fail(op, f"w_hh of {where} must have shape {(g * hidden, out_size)}, got {w_hh.shape}")
            b_ih = b_hh = whrT = bhn = None
            if has_biases:
                b_ih, b_hh = arrs[base + 2], arrs[base + 3]
                for name, b in (("b_ih", b_ih), ("b_hh", b_hh)):
                    if b.shape != (g * hidden,):
                        raise _fail(op, f"{name} of {where} must have shape {(g * hidden,)}, got {b.shape}")
            if proj:
                w_hr = arrs[base + per - 1]
                if w_hr.shape != (out_size, hidden):
                    raise _fail(op, f"w_hr of {where} must have shape {(out_size, hidden)}, got {w_hr.shape}")
                whrT = np.ascontiguousarray(w_hr.T, dtype=dt)
            if mode == "lstm":
                w_ih, w_hh = _lstm_order(w_ih, hidden), _lstm_order(w_hh, hidden)
            bias = None
            if has_biases:
                if mode == "gru":  # b_hr, b_hz fold into the projection; b_hn stays inside r * (...)
                    bias = b_ih.astype(dt, copy=True)
                    bias[:2 * hidden] += b_hh[:2 * hidden]
                    bhn = np.ascontiguousarray(b_hh[2 * hidden:], dtype=dt)
                else:
                    bias = (b_ih.astype(dt) + b_hh.astype(dt))
                    if mode == "lstm":
                        bias = _lstm_order(bias, hidden)
            wihs.append(w_ih.T)
            biases.append(bias)
            dirs.append(DirWeights(aligned(w_hh.T, dt), bhn, whrT))
        wihT = np.ascontiguousarray(np.concatenate(wihs, axis=1), dtype=dt)
        bias = None if not has_biases else np.ascontiguousarray(np.concatenate(biases), dtype=dt)
        layers.append(LayerWeights(wihT, bias, dirs))
    return Prepared(mode, hidden, out_size, input_size, layers, d)


#: a pre-activation that pins a GRU gate: float32 ``sigmoid(+_PIN)`` is 1, ``sigmoid(-_PIN)`` 0
_PIN = 1.0e4
#: the largest hidden size whose tanh / relu RNN runs as a pinned GRU (:func:`rnn_as_gru`): its GEMMs do
#: three times the multiply-adds (the pinned gates' zero rows), a loss once steps are arithmetic,
#: not the per-step numpy calls of :func:`run_lockstep`
PINNED_GRU_MAX_HIDDEN = 128


def pinned_gru_weights(w_ih, w_hh, b_ih, b_hh, dtype):
    """One ``rnn_tanh`` / ``rnn_relu`` direction's weights (biases None: zeros) as a GRU's ``(w_ih, w_hh, b_ih,
    b_hh)`` whose reset gate is pinned open (r = 1) and update gate shut (z = 0): the GRU step
    ``h' = n + z (h - n)`` is then ``n = tanh(W_ih x + b_ih + W_hh h + b_hh)``, the RNN's, exactly
    (a relu RNN: the GRU loop's relu candidate, ``jit_recurrent``'s ``"gru_relu"``).
    The pinned gates' weight rows are zeros, their input biases ``+-_PIN``. (An infinite input makes
    a pinned gate NaN through its zero row, where torch's tanh would give +-1.)"""
    h = w_hh.shape[0]
    dt = np.dtype(dtype)
    b_ih = np.zeros(h, dt) if b_ih is None else np.asarray(b_ih, dt)
    b_hh = np.zeros(h, dt) if b_hh is None else np.asarray(b_hh, dt)
    pins = np.concatenate([np.full(h, _PIN, dt), np.full(h, -_PIN, dt), b_ih])
    return (np.concatenate([np.zeros((2 * h, w_ih.shape[1]), dt), np.asarray(w_ih, dt)]),
            np.concatenate([np.zeros((2 * h, w_hh.shape[1]), dt), np.asarray(w_hh, dt)]),
            pins, np.concatenate([np.zeros(2 * h, dt), b_hh]))


def rnn_as_gru(params, has_biases: bool, num_layers: int, bidirectional: bool, dtype, op: str) -> Prepared:
    """A (checked) ``rnn_tanh`` / ``rnn_relu`` op's flat ``params`` prepared as a GRU's (:func:`pinned_gru_weights`
    per direction), for the compiled GRU loop: no loop of its own to compile."""
    per = 4 if has_biases else 2
    flat = []
    for base in range(0, len(params), per):
        w = params[base:base + per]
        flat += pinned_gru_weights(w[0], w[1], w[2] if has_biases else None, w[3] if has_biases else None, dtype)
    return prepare("gru", flat, True, num_layers, bidirectional, dtype, op)


def _aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array starting on a 64-byte boundary."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize   # (not np.prod: ~2 us of a small layer's call)
    raw = np.empty(nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes].view(dt).reshape(shape)


_SCRATCH = threading.local()


def _projection_buffer(shape, dtype) -> np.ndarray:
    """A 64-byte aligned ``shape`` array of the calling thread's, reused by every layer and call (a
    layer's input projection is dead once its steps ran): an aligned allocation per layer cost
    ~3 us of a small LSTM's call (reading an array's address through ``ctypes``)."""
    views = getattr(_SCRATCH, "views", None)
    if views is None:
        views = _SCRATCH.views = {}
    view = views.get((shape, dtype))   # (making the view: ~1 us of a small layer's call)
    if view is not None:
        return view
    if len(views) > 64:   # shapes that vary from call to call
        views.clear()
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.size < nbytes:
        buf = _SCRATCH.buf = _aligned_empty((max(nbytes, 64),), np.uint8)
        views.clear()
    view = views[shape, dtype] = buf[:nbytes].view(dt).reshape(shape)
    return view


def aligned(a, dtype) -> np.ndarray:
    """A C-contiguous copy of ``a`` in ``dtype`` starting on a 64-byte boundary: the compiled loops'
    512-bit loads of ``W_hh^T`` then never straddle two cache lines (measured 1.3x faster on an
    Intel Sapphire Rapids than numpy's 16-byte aligned copy)."""
    out = _aligned_empty(a.shape, dtype)
    out[...] = a
    return out


class WeightCache:
    """The prepared weights of the last weight list a node saw, keyed by array identity and dtype.

    Only arrays that cannot change behind the cache's back are keyed: read-only ones (parameters
    mapped from a ``.srm``) and arrays owning their memory (parameters); views (arena buffers
    reused from run to run) are prepared again on every call.
    """

    __slots__ = ("key", "prepared")

    def __init__(self):
        self.key = None
        self.prepared = None

    def get(self, mode, params, has_biases, num_layers, bidirectional, dtype, op, proj=None):
        key = self.key
        if (key is not None and key[0] == dtype and key[1] == (has_biases, num_layers, bidirectional, proj)
                and len(key[2]) == len(params) and all(map(operator.is_, key[2], params))):
            return self.prepared
        prepared = prepare(mode, params, has_biases, num_layers, bidirectional, dtype, op, proj)
        if all(isinstance(p, np.ndarray) and (p.base is None or not p.flags.writeable) for p in params):
            self.key = (dtype, (has_biases, num_layers, bidirectional, proj), tuple(params))
            self.prepared = prepared
        return prepared


# ---------------------------------------------------------------------------------------------
# the recurrence


def _steps_packed(batch_sizes, op):
    bs = np.asarray(batch_sizes)
    if bs.ndim != 1 or bs.dtype.kind not in "iu":
        raise _fail(op, f"batch_sizes must be a 1-D integer tensor, got {bs.dtype} of shape {bs.shape}")
    sizes = [int(x) for x in bs]
    if any(s < 1 for s in sizes) or any(a < b for a, b in zip(sizes, sizes[1:])):
        raise _fail(op, f"batch_sizes must be positive and non-increasing, got {sizes}")
    steps, start = [], 0
    for s in sizes:
        steps.append((start, s))
        start += s
    return steps


def _check_state(op, name, h, shape):
    if h.shape != shape:
        raise _fail(op, f"{name} must have shape {shape}, got {tuple(h.shape)}")


def _gru_candidate(xg, hp, bhn, hidden, expit):
    """GRU gates of one step, in place in ``xg`` (input projection, ``r|z|n``) and ``hp`` (hidden
    projection): ``r, z = sigmoid(..)``, returns ``n = tanh(x_n + r * (h_n + b_hn))`` (a view of ``xg``;
    ``z`` stays in ``xg[:, H:2H]``)."""
    rz = xg[:, :2 * hidden]
    np.add(rz, hp[:, :2 * hidden], out=rz)
    expit(rz, out=rz)
    hn = hp[:, 2 * hidden:]
    if bhn is not None:
        np.add(hn, bhn, out=hn)
    np.multiply(hn, xg[:, :hidden], out=hn)
    n = xg[:, 2 * hidden:]
    np.add(n, hn, out=n)
    np.tanh(n, out=n)
    return n


def _rnn_step(mode, xg, hp, h):
    """Plain RNN step into ``h``: ``tanh`` or ``relu`` of input plus hidden projection."""
    np.add(xg, hp, out=h)
    if mode == "rnn_tanh":
        np.tanh(h, out=h)
    else:
        np.maximum(h, 0, out=h)


def _start(prep: Prepared, x2d, batch, h0, c0, op, out=None):
    """Check the input and the initial states against the weights; ``(x2d, h_n, c_n)`` in the
    weights' dtype, the states copied (the kernel updates them in place), into ``out``'s
    ``(h_n[, c_n])`` buffers where they fit."""
    mode, hidden, hout, d = prep.mode, prep.hidden, prep.out_size, prep.num_dirs
    nl = len(prep.layers)
    dt = prep.layers[0].wihT.dtype
    if x2d.dtype != dt:
        x2d = x2d.astype(dt)
    if prep.input_size is not None and x2d.shape[1] != prep.input_size:
        raise _fail(op, f"input size must be {prep.input_size} (w_ih of layer 0), got {x2d.shape[1]}")
    _check_state(op, "hx[0]" if mode == "lstm" else "hx", h0, (nl * d, batch, hout))
    if c0 is not None:
        _check_state(op, "hx[1]", c0, (nl * d, batch, hidden))
    h_n = _copy_into(h0, dt, None if out is None else out[0])
    c_n = None if c0 is None else _copy_into(c0, dt, None if out is None or len(out) < 2 else out[1])
    return x2d, h_n, c_n


def _copy_into(a, dt, buf):
    if (isinstance(buf, np.ndarray) and buf.dtype == dt and buf.shape == a.shape and buf.flags.c_contiguous
            and not np.may_share_memory(a, buf)):
        np.copyto(buf, a)
        return buf
    return np.array(a, dtype=dt, copy=True, order="C")


def run(prep: Prepared, x2d, steps, batch, h0, c0=None, op=""):
    """Run every layer over ``x2d (N, I)`` (rows in step order); returns ``(out (N, D*H_out), h_n, c_n)``."""
    mode, hidden, hout, d = prep.mode, prep.hidden, prep.out_size, prep.num_dirs
    x2d, h_n, c_n = _start(prep, x2d, batch, h0, c0, op)
    dt = x2d.dtype
    gh = GATES[mode] * hidden
    expit = _expit() if mode in ("lstm", "gru") else None
    hp = np.empty((batch, gh), dt)                      # h @ W_hh^T of one step
    tmp = np.empty((batch, hidden), dt) if mode == "lstm" else None
    n = x2d.shape[0]
    for li, layer in enumerate(prep.layers):
        xp = np.dot(x2d, layer.wihT)                     # every step, every direction: one GEMM
        if layer.bias is not None:
            np.add(xp, layer.bias, out=xp)
        y = np.empty((n, d * hout), dt)
        for k, dw in enumerate(layer.dirs):
            xpd = xp[:, k * gh:(k + 1) * gh]
            h = h_n[li * d + k]
            c = None if c_n is None else c_n[li * d + k]
            order = reversed(steps) if k else steps
            ycols = slice(k * hout, (k + 1) * hout)
            for start, b in order:
                xg = xpd[start:start + b]
                hb = h[:b]
                hpb = hp[:b]
                np.dot(hb, dw.whhT, out=hpb)
                if mode == "lstm":
                    np.add(xg, hpb, out=xg)
                    sig = xg[:, :3 * hidden]
                    expit(sig, out=sig)
                    gg = xg[:, 3 * hidden:]
                    np.tanh(gg, out=gg)
                    cb = c[:b]
                    ig = xg[:, :hidden]
                    np.multiply(cb, xg[:, hidden:2 * hidden], out=cb)
                    np.multiply(ig, gg, out=ig)
                    np.add(cb, ig, out=cb)
                    tb = tmp[:b]
                    np.tanh(cb, out=tb)
                    if dw.whrT is None:
                        np.multiply(tb, xg[:, 2 * hidden:3 * hidden], out=hb)
                    else:
                        np.multiply(tb, xg[:, 2 * hidden:3 * hidden], out=tb)
                        np.dot(tb, dw.whrT, out=hb)
                elif mode == "gru":
                    nn_ = _gru_candidate(xg, hpb, dw.bhn, hidden, expit)
                    # h' = (1 - z) * n + z * h = n + z * (h - n)
                    np.subtract(hb, nn_, out=hb)
                    np.multiply(hb, xg[:, hidden:2 * hidden], out=hb)
                    np.add(hb, nn_, out=hb)
                else:
                    _rnn_step(mode, xg, hpb, hb)
                y[start:start + b, ycols] = hb
        x2d = y
    return x2d, h_n, c_n


def _bmm(a, b, out):
    """``a @ b`` into ``out`` for stacks of D matrices (``np.dot`` on the 2-D ones when D == 1)."""
    if a.shape[0] == 1:
        np.dot(a[0], b[0], out=out[0])
    else:
        np.matmul(a, b, out=out)


def compiled_applies(prep: Prepared, jit, x) -> bool:
    """Whether :func:`run_compiled` takes this call: float32 input and weights, a compiled loop for
    the mode, no LSTM projection."""
    return (jit is not None and prep.mode in jit and x.dtype == np.float32
            and prep.layers[0].wihT.dtype == np.float32 and prep.layers[0].whrT_stack is None)   # (a projection: every layer's)


def run_compiled(prep: Prepared, x, batch_first: bool, h0, c0=None, op="", jit=None, out=None):
    """:func:`run_lockstep` for a float32 ``x`` (T, B, I) (``batch_first``: (B, T, I)) where
    :func:`compiled_applies`: per layer one GEMM of every step's input projection (``jit["dots"]``'s
    where given) on the rows in the input's own order, then each direction's compiled loop. Writes
    into ``out`` (output, h_n[, c_n]) where given. Returns ``(output, h_n, c_n)``.

    What depends only on the weights and the input's layout (checks, shapes, each direction's loop
    and constant arguments) is made once per layout (:class:`_Bound`, the last one kept in
    ``jit["bound"]`` where the matcher made that slot): a call then runs the GEMMs and the loops and
    little Python."""
    key = (x.shape, x.strides, batch_first, h0.shape, None if c0 is None else c0.shape)
    slot = jit.get("bound")
    plan = None if slot is None else slot[0]
    if plan is None or plan.prep is not prep or plan.key != key:
        plan = _Bound(prep, x, batch_first, h0, c0, op, jit, key)
        if slot is not None:
            slot[0] = plan   # (a plan is immutable: a thread still running the one replaced is not disturbed)
    rows = (x if plan.contig else np.ascontiguousarray(x)).reshape(plan.rows_shape)
    if out is None:
        h_n = np.array(h0, np.float32, order="C")
        c_n = None if c0 is None else np.array(c0, np.float32, order="C")
    else:
        h_n = _copy_into(h0, np.float32, out[1])
        c_n = None if c0 is None else _copy_into(c0, np.float32, out[2] if len(out) > 2 else None)
    ts, bs = plan.steps
    shape, n = plan.shape, plan.rows_shape[0]
    lstm = c_n is not None
    i = 0
    for dot, wihT, g, dirs, last in plan.layers:
        # every step, every direction: one GEMM (numpy's, or MKL's where it timed faster at load)
        xp = dot(rows, wihT, out=_projection_buffer((n, g), np.float32))
        y = out[0] if last and out is not None and _fits(out[0], shape, rows) else np.empty(shape, np.float32)
        y2 = y.reshape(n, shape[2])
        for fn, goff, bias, whhT, bhn, yoff, rev, tail in dirs:
            if lstm:
                fn(xp, ts, bs, goff, bias, whhT, h_n[i], c_n[i], y2, yoff, rev, *tail)
            else:
                fn(xp, ts, bs, goff, bias, whhT, bhn, h_n[i], y2, yoff, rev, *tail)
            i += 1
        rows = y2
    return y, h_n, c_n


class _Bound:
    """:func:`run_compiled`'s fixed parts for one weight layout (``prep``) and input layout (``key``: the
    input's shape and strides, ``batch_first``, the states' shapes), checked once (:func:`_start`'s
    checks): the rows' shape, the time / batch row strides of the projections, the output's shape,
    and per layer ``(GEMM, W_ih^T, gates, directions, is last)``, a direction
    ``(compiled loop, its columns' offset, bias, W_hh^T, b_hn, output column, reverse, trailing
    arguments)`` (``jit_recurrent``'s entry, called straight)."""

    __slots__ = ("prep", "key", "contig", "rows_shape", "steps", "shape", "layers")

    def __init__(self, prep: Prepared, x, batch_first, h0, c0, op, jit, key):
        mode, hout, d = prep.mode, prep.out_size, prep.num_dirs
        if batch_first:
            batch, t = x.shape[0], x.shape[1]
            self.steps = (1, t)
        else:
            t, batch = x.shape[0], x.shape[1]
            self.steps = (batch, 1)
        self.prep, self.key, self.contig = prep, key, x.flags.c_contiguous
        self.rows_shape = (t * batch, x.shape[2])
        # the checks of _start, once for this layout (a zero-row input: its arrays are all it needs)
        _start(prep, np.empty((0, x.shape[2]), x.dtype), batch, h0, c0, op)
        self.shape = (batch, t, d * hout) if batch_first else (t, batch, d * hout)
        kernel, dots = jit[mode], jit.get("dots")
        entry, tail = kernel.entry, kernel.tail
        last = len(prep.layers) - 1
        layers = []
        for li, layer in enumerate(prep.layers):
            dirs = tuple((entry, goff, bias, dw.whhT, bhn, k * prep.hidden, k == 1, tail)
                         for k, (dw, (goff, bias, bhn)) in enumerate((dw, dw.loop) for dw in layer.dirs))
            layers.append((np.dot if dots is None else dots[li], layer.wihT, layer.wihT.shape[1], dirs, li == last))
        self.layers = tuple(layers)


def _fits(a, shape, src) -> bool:
    """Whether ``a`` can take a layer's output of ``shape`` straight (not overlapping ``src``)."""
    return (isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == shape and a.flags.c_contiguous
            and not np.may_share_memory(a, src))


def run_lockstep(prep: Prepared, x2d, t, batch, h0, c0=None, op="", jit=None):
    """:func:`run` for a padded ``(T, B)`` input, both directions in lockstep: step ``i`` runs the
    forward direction at time ``i`` and the reverse one at ``T-1-i`` with one numpy call per gate
    operation for both (the reverse projection is stored time-reversed, so step ``i`` is one
    ``(D, B, G*H)`` view). Returns ``(out (T, B, D*H_out), h_n, c_n)``. ``jit``: its ``"dots"``
    (optional) are the layers' input-projection GEMMs (``mkl_gemm.gemm_for``); float32 LSTM / GRU
    layers without a projection take :func:`run_compiled` instead."""
    mode, hidden, hout, d = prep.mode, prep.hidden, prep.out_size, prep.num_dirs
    x2d, h_n, c_n = _start(prep, x2d, batch, h0, c0, op)
    dt = x2d.dtype
    gh = GATES[mode] * hidden
    h1, h2, h3 = hidden, 2 * hidden, 3 * hidden
    expit = _expit() if mode in ("lstm", "gru") else None
    hp = np.empty((d, batch, gh), dt)                   # h @ W_hh^T of one step, both directions
    tmp = np.empty((d, batch, hidden), dt) if mode in ("lstm", "gru") else None
    dots = None if jit is None else jit.get("dots")
    for li, layer in enumerate(prep.layers):
        # every step, every direction: one GEMM (numpy's, or MKL's where it timed faster at load)
        xp = (np.dot if dots is None else dots[li])(x2d, layer.wihT, out=_projection_buffer(
            (x2d.shape[0], layer.wihT.shape[1]), dt))
        if layer.bias is not None:
            np.add(xp, layer.bias, out=xp)
        if d == 1:
            gates = xp.reshape(t, 1, batch, gh)
        else:  # (T, D, B, G*H); the reverse direction time-reversed
            gates = np.empty((t, d, batch, gh), dt)
            xp3 = xp.reshape(t, batch, d * gh)
            gates[:, 0] = xp3[:, :, :gh]
            gates[:, 1] = xp3[::-1, :, gh:]
        hs = h_n[li * d:(li + 1) * d]
        cs = None if c_n is None else c_n[li * d:(li + 1) * d]
        ys = np.empty((t, d, batch, hout), dt)
        whh, whr, bhn = layer.whhT_stack, layer.whrT_stack, layer.bhn_stack
        for i in range(t):
            g = gates[i]
            _bmm(hs, whh, hp)
            if mode == "lstm":
                np.add(g, hp, out=g)
                sig = g[..., :h3]
                expit(sig, out=sig)
                gg = g[..., h3:]
                np.tanh(gg, out=gg)
                ig = g[..., :h1]
                np.multiply(cs, g[..., h1:h2], out=cs)
                np.multiply(ig, gg, out=ig)
                np.add(cs, ig, out=cs)
                np.tanh(cs, out=tmp)
                if whr is None:
                    np.multiply(tmp, g[..., h2:h3], out=hs)
                else:
                    np.multiply(tmp, g[..., h2:h3], out=tmp)
                    _bmm(tmp, whr, hs)
            elif mode == "gru":
                rz = g[..., :h2]
                np.add(rz, hp[..., :h2], out=rz)
                expit(rz, out=rz)
                hn = hp[..., h2:]
                if bhn is not None:
                    np.add(hn, bhn, out=hn)
                np.multiply(hn, g[..., :h1], out=hn)
                n = g[..., h2:]
                np.add(n, hn, out=n)
                np.tanh(n, out=n)
                # h' = (1 - z) * n + z * h = n + z * (h - n)
                np.subtract(hs, n, out=tmp)
                np.multiply(tmp, g[..., h1:h2], out=tmp)
                np.add(tmp, n, out=hs)
            else:
                _rnn_step(mode, g, hp, hs)
            ys[i] = hs
        y = np.empty((t, batch, d * hout), dt)
        y[:, :, :hout] = ys[:, 0]
        if d == 2:
            y[:, :, hout:] = ys[::-1, 1]
        x2d = y.reshape(t * batch, d * hout)
    return x2d.reshape(t, batch, d * hout), h_n, c_n


# ---------------------------------------------------------------------------------------------
# the ops


def _check_eval(op, train, dropout):
    if train:
        raise _fail(op, f"train=True (dropout={dropout}) is not supported: srcore runs models for inference "
                        "(put the module in eval mode)")


def _write(out, results):
    if out is None:
        return results
    for o, r in zip(out, results):
        np.copyto(o, r)
    return out


def _states(op, mode, hx):
    if mode == "lstm":
        if not isinstance(hx, (list, tuple)) or len(hx) != 2:
            raise _fail(op, "hx must be a list of two tensors (h_0, c_0)")
        return hx[0], hx[1]
    return hx, None


def _dtype_of(op, x):
    if x.dtype.kind != "f":
        raise _fail(op, f"expected a floating-point input, got {x.dtype}")
    return x.dtype


def _run_input(mode, cache, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
               batch_first, out, jit=None):
    op = f"aten::{mode}.input"
    _check_eval(op, train, dropout)
    if input.ndim != 3:
        raise _fail(op, f"input must be 3-D ({'batch, seq' if batch_first else 'seq, batch'}, features), "
                        f"got shape {tuple(input.shape)}")
    dt = _dtype_of(op, input)
    prep = cache.get(mode, params, has_biases, num_layers, bidirectional, dt, op)
    h0, c0 = _states(op, mode, hx)
    if mode in ("rnn_tanh", "rnn_relu") and jit is not None and "pinned" in jit and dt == np.float32:
        prep = _pinned(jit["pinned"], prep, params, has_biases, num_layers, bidirectional, op)
    if compiled_applies(prep, jit, input):
        results = run_compiled(prep, input, batch_first, h0, c0, op, jit, out)
        if out is not None and all(r is o for r, o in zip(results, out)):
            return out
        return _write(out, results if c0 is not None else results[:2])
    xt = input.transpose(1, 0, 2) if batch_first else input
    t, b, i = xt.shape
    x2d = np.ascontiguousarray(xt).reshape(t * b, i)
    y, h_n, c_n = run_lockstep(prep, x2d, t, b, h0, c0, op, jit)
    if batch_first:
        y = np.ascontiguousarray(y.transpose(1, 0, 2))
    return _write(out, (y, h_n) if c_n is None else (y, h_n, c_n))


def _pinned(holder: list, prep: Prepared, params, has_biases, num_layers, bidirectional, op) -> Prepared:
    """The GRU form of a tanh / relu RNN's ``prep`` (:func:`rnn_as_gru`), kept beside the ``prep`` it
    was made from in ``holder`` (the node's: ``[prep, gru]``) while the weight cache returns that one."""
    if holder[0] is not prep:
        holder[:] = [prep, rnn_as_gru(params, has_biases, num_layers, bidirectional, np.float32, op)]
    return holder[1]


def _run_data(mode, cache, data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
              bidirectional, out):
    op = f"aten::{mode}.data"
    _check_eval(op, train, dropout)
    if data.ndim != 2:
        raise _fail(op, f"packed data must be 2-D (sum(batch_sizes), features), got shape {tuple(data.shape)}")
    dt = _dtype_of(op, data)
    steps = _steps_packed(batch_sizes, op)
    total = steps[-1][0] + steps[-1][1] if steps else 0
    if total != data.shape[0]:
        raise _fail(op, f"batch_sizes sum to {total} but the packed data has {data.shape[0]} rows")
    prep = cache.get(mode, params, has_biases, num_layers, bidirectional, dt, op)
    h0, c0 = _states(op, mode, hx)
    y, h_n, c_n = run(prep, np.ascontiguousarray(data), steps, steps[0][1] if steps else 0, h0, c0, op)
    return _write(out, (y, h_n) if c_n is None else (y, h_n, c_n))


def _make_input(mode, cache, jit=None):
    def rnn_input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                  out=None):
        return _run_input(mode, cache, input, hx, params, has_biases, num_layers, dropout, train,
                          bidirectional, batch_first, out, jit)
    rnn_input.__name__ = f"{mode}_input"
    rnn_input.__doc__ = f"``aten::{mode}.input``: (output, h_n{', c_n' if mode == 'lstm' else ''})."
    return rnn_input


def _make_data(mode, cache):
    def rnn_data(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                 out=None):
        return _run_data(mode, cache, data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
                         bidirectional, out)
    rnn_data.__name__ = f"{mode}_data"
    rnn_data.__doc__ = f"``aten::{mode}.data`` (a packed sequence): (packed output, h_n" \
                       f"{', c_n' if mode == 'lstm' else ''})."
    return rnn_data


# generic kernels (each with a cache of its own; the matchers give every node a fresh one)
lstm_input = _make_input("lstm", WeightCache())
gru_input = _make_input("gru", WeightCache())
rnn_tanh_input = _make_input("rnn_tanh", WeightCache())
rnn_relu_input = _make_input("rnn_relu", WeightCache())
lstm_data = _make_data("lstm", WeightCache())
gru_data = _make_data("gru", WeightCache())
rnn_tanh_data = _make_data("rnn_tanh", WeightCache())
rnn_relu_data = _make_data("rnn_relu", WeightCache())


def _mode_of(op: str) -> str:
    return op.split("::", 1)[-1].split(".", 1)[0]


def recurrent_matcher(node: NodeInfo):
    """A kernel of its own for this node: its weight cache then holds this node's prepared weights
    (several recurrent nodes never evict each other's). With a constant ``params`` (a frontend that
    folds the list) the weights are prepared right here, at load."""
    mode = _mode_of(node.op)
    if mode in ("lstm", "gru"):
        _expit()   # scipy.special (~0.1-2 s to import) now, at load, not in the first call
    cache = WeightCache()
    try:
        params = node.const("params", None)
    except KeyError:
        params = None
    if isinstance(params, (list, tuple)) and params and all(isinstance(p, np.ndarray) for p in params):
        try:
            dtype = np.dtype(params[0].dtype)
            cache.get(mode, list(params), node.const("has_biases"), node.const("num_layers"),
                      node.const("bidirectional"), dtype, node.op)
        except (KeyError, KernelError, TypeError):
            pass  # not all flags constant, or bad weights: the kernel reports it at run time
    if node.op.endswith(".data"):
        return _make_data(mode, cache)
    jit = None
    src = node.args[0].type if node.args else None
    prep = cache.prepared
    # a tanh / relu RNN of known, small weights runs as a pinned GRU (rnn_as_gru)
    pinned = mode in ("rnn_tanh", "rnn_relu") and prep is not None and prep.hidden <= PINNED_GRU_MAX_HIDDEN
    if (mode in ("lstm", "gru") or pinned) and getattr(src, "dtype", None) == "float32":
        from .jit_recurrent import kernels   # imports numba: only models with float32 LSTM / GRU

        if pinned:
            holder = [None, None]
            prep = _pinned(holder, prep, list(params), node.const("has_biases"), node.const("num_layers"),
                           node.const("bidirectional"), node.op)
        loop = ("gru_relu" if mode == "rnn_relu" else "gru") if pinned else mode
        jit = {"gru" if pinned else mode: kernels(loop, None if prep is None else prep.hidden)[loop]}
        jit["dots"] = _projection_gemms(prep, getattr(src, "shape", None))
        jit["bound"] = [None]   # run_compiled's last bound call (_Bound: immutable, any thread may use it)
        if pinned:
            jit["pinned"] = holder
    return _make_input(mode, cache, jit)


def _projection_gemms(prep, shape):
    """Per layer, the GEMM of its input projection for an input of ``shape`` (``(T, B, I)`` or
    ``(B, T, I)``, known at load): MKL's where it timed faster (:mod:`.mkl_gemm`), else ``np.dot``;
    None when the weights or the shape are unknown."""
    if prep is None or shape is None or len(shape) != 3 or not all(isinstance(d, int) for d in shape[:2]):
        return None
    from .mkl_gemm import gemm_for

    rows = shape[0] * shape[1]
    return tuple(gemm_for(rows, layer.wihT) or np.dot for layer in prep.layers)


# ---------------------------------------------------------------------------------------------
# the gate splits of traced cells


def unsafe_chunk(self, chunks, dim=0):
    """``aten::unsafe_chunk`` (what a traced ``nn.LSTMCell``/``GRUCell`` splits its gates with): as
    ``chunk``, but copies. srcore's alias analysis (``srcore.ir.alias``) does not list the
    ``unsafe_*`` splits, so constant folding may fold their input while a later in-place gate
    activation writes through a view of it; fresh arrays keep the folded constant intact."""
    from .shape import chunk

    return [np.array(p) for p in chunk(self, chunks, dim)]


def unsafe_split(self, split_size, dim=0):
    """``aten::unsafe_split.Tensor`` / ``unsafe_split_with_sizes``: ``split``, copied (see :func:`unsafe_chunk`)."""
    from .shape import split

    return [np.array(p) for p in split(self, split_size, dim)]

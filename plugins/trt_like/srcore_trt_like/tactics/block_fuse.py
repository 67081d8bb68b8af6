"""A mobile net's inverted-residual blocks as one step each at more than one intra-op thread: ``block_omp``.

After the layers' tactics are chosen, each run of NCHW16c steps ``[1x1 expand] -> depthwise ->
[squeeze_excite] -> 1x1 project [+ residual]`` (at least three of them, every tensor between them read
only by the next, at least as many expanded channel blocks as threads) may become one ``inverted_residual`` layer run by :func:`..kernels.block_split.block`:
per image two OpenMP regions, the first by expanded channel blocks (expand, depthwise, the pool), the
second by ranges of output pixels (scale, project), with the gate computed between them on the caller.
The expanded tensor never leaves the core that made it; the layer-by-layer splits each moved their
input between cores (docs/performance-log.md, "mobilenet_v3's blocks as one split region").

Each sub-layer runs the one-thread kernel its step chose (the 16-lane kernel or its 8-lane halves,
``..._h8``), on ranges: the block's bits are its layers'. Whether the blocks are kept is timed: the
plan with them against the plan without, on the same inputs (:func:`fuse_blocks`); never by rule.
Engine option ``exclude_tactics=["block_omp"]`` leaves them out (runner ``trt_like_no_block_fuse``)."""
from __future__ import annotations

import logging
import threading

import numpy as np

from ..builder.network import Layer, Network
from ..builder.plan import Plan, Step
from ..kernels import threads as _threads
from ..kernels.activation import CODES
from .records import Candidate, Kernel
from .timing import best_times, random_input

log = logging.getLogger("srcore.trt_like")

NAME = "block_omp"
KIND = "inverted_residual"
LANES = 16

_PW = ("pointwise_nchw16c",)
_DW = ("depthwise_nchw16c",)


def _blocked_conv(layer: Layer) -> bool:
    a = layer.attrs
    return layer.kind == "conv" and tuple(a.get("nchwc", ())) == (True, True) and a["dilation"] == (1, 1) \
        and len(a["weight"].shape) == 4


def _pointwise(layer: Layer) -> bool:
    a = layer.attrs
    return (_blocked_conv(layer) and a["groups"] == 1 and tuple(a["weight"].shape[2:]) == (1, 1)
            and tuple(a["stride"]) == (1, 1) and tuple(a["padding"]) == (0, 0))


def _depthwise(layer: Layer) -> bool:
    if not _blocked_conv(layer):
        return False
    a = layer.attrs
    w = a["weight"]
    return a["groups"] == w.shape[0] and w.shape[1] == 1 and not a["residual"]


def _family(tactic: str, names) -> bool:
    return any(tactic.startswith(n) for n in names)


def find_blocks(net: Network, steps: list[Step]) -> list[tuple[int, int]]:
    """``(first, last + 1)`` step ranges that make one block each (see the module doc)."""
    readers: dict[int, int] = {}
    for s in steps:
        for t in s.layer.inputs:
            readers[t] = readers.get(t, 0) + 1
    outs = set(net.outputs)

    def only_next(step: Step, nxt: Step) -> bool:
        t = step.layer.outputs[0]
        return (len(step.layer.outputs) == 1 and t not in outs and readers.get(t, 0) == 1
                and nxt.layer.inputs[0] == t)

    found, i = [], 0
    while i < len(steps):
        j, s = i, steps[i]
        if _pointwise(s.layer) and _family(s.tactic, _PW) and not s.layer.attrs["residual"] \
                and j + 1 < len(steps) and only_next(s, steps[j + 1]):
            j += 1
        d = steps[j]
        if not (_depthwise(d.layer) and _family(d.tactic, _DW)) or j + 1 >= len(steps) or not only_next(d, steps[j + 1]):
            i += 1
            continue
        k = j + 1
        if steps[k].layer.kind == "squeeze_excite" and "nchwc" in steps[k].layer.attrs:
            if k + 1 >= len(steps) or not only_next(steps[k], steps[k + 1]):
                i += 1
                continue
            k += 1
        p = steps[k]
        # (region 1 splits the expanded channel blocks: fewer than the team's threads leave a part idle)
        wide = net.shape(d.layer.outputs[0])[1] >= _threads.count()
        if _pointwise(p.layer) and _family(p.tactic, _PW) and k + 1 - i >= 3 and wide:
            found.append((i, k + 1))
            i = k + 1
        else:
            i += 1
    return found


def block_layer(steps: list[Step]) -> Layer:
    """The ``inverted_residual`` layer of ``steps``: it reads the first's input (and the project's
    residual), writes the project's output; ``attrs["layers"]`` the sub-layers as the segment layer
    holds them, ``attrs["h8"]`` which convs run the 8-lane kernels (as their chosen tactics did)."""
    layers = [s.layer for s in steps]
    subs = tuple((x.kind, tuple(x.inputs), tuple(x.outputs), dict(x.attrs), x.source) for x in layers)
    h8 = tuple("_h8" in s.tactic for s in steps)
    last = layers[-1]
    inputs = [layers[0].inputs[0]] + ([last.inputs[1]] if last.attrs["residual"] else [])
    src = next((x.source for x in layers if x.source), "")
    return Layer(KIND, inputs, list(last.outputs), {"layers": subs, "h8": h8}, src)


def _sub(entry) -> Layer:
    kind, inputs, outputs, attrs, source = entry
    return Layer(kind, list(inputs), list(outputs), dict(attrs), source)


class _Block:
    """The callable of one ``inverted_residual`` layer (``fn(x[, res], y)``)."""

    def __init__(self, layer: Layer, net: Network, threads: int):
        from srcore.plugin import simd_depthwise_blocked as dwb
        from srcore.plugin import simd_halves as dwh
        from srcore.plugin import simd_pointwise_blocked as pwb
        from srcore.plugin import simd_pointwise_halves as pwh

        from ..conv.nchwc import (DepthwiseNchwcHalvesTactic, DepthwiseNchwcTactic, PointwiseNchwcHalvesTactic,
                                  PointwiseNchwcTactic)
        from .conv import conv_spec

        subs = [_sub(e) for e in layer.attrs["layers"]]
        h8 = layer.attrs["h8"]
        self.nt = threads
        self.governor = _threads.Governor(threads)
        self.expand = _pointwise(subs[0])
        i = 1 if self.expand else 0
        self.se = subs[i + 1].kind == "squeeze_excite"

        def pw(x: Layer, half: bool):
            cls = PointwiseNchwcHalvesTactic if half else PointwiseNchwcTactic
            return cls(conv_spec(x, net), x.attrs["weight"], x.attrs["bias"], (True, True), None, 1)

        def dw(x: Layer, half: bool):
            cls = DepthwiseNchwcHalvesTactic if half else DepthwiseNchwcTactic
            return cls(conv_spec(x, net), x.attrs["weight"], x.attrs["bias"], (True, True), None, 1)

        self.pe = pw(subs[0], h8[0]) if self.expand else None
        self.fe_kernel = (pwh.pwh_tasks if h8[0] else pwb.pwb_tasks) if self.expand else None
        self.dw = dw(subs[i], h8[i])
        self.fd_kernel = dwh.dwh_tasks if h8[i] else dwb.dwb_tasks
        self.pp = pw(subs[-1], h8[-1])
        self.fp_kernel = pwh.pwh_range if h8[-1] else pwb.pwb_range
        self.residual = bool(subs[-1].attrs["residual"])
        e_shape = net.shape(subs[i].inputs[0])     # (N, EB, H, W, 16)
        d_shape = net.shape(subs[i].outputs[0])    # (N, EB, Ho, Wo, 16)
        self.e_shape, self.d_shape = e_shape, d_shape
        self.N, self.EB, self.Ho, self.Wo = d_shape[0], d_shape[1], d_shape[2], d_shape[3]
        P = self.Ho * self.Wo
        if self.se:
            a = subs[i + 1].attrs
            self.w1t = np.ascontiguousarray(a["w1"].T, np.float32)
            self.b1 = np.ascontiguousarray(a["b1"], np.float32)
            self.w2t = np.ascontiguousarray(a["w2"].T, np.float32)
            self.b2 = np.ascontiguousarray(a["b2"], np.float32)
            self.act, self.gate = CODES[a["act"]], CODES[a["gate"]]
        else:   # (never read: arrays of the same types, one compiled signature)
            self.w1t = self.w2t = np.zeros((1, 1), np.float32)
            self.b1 = self.b2 = np.zeros(1, np.float32)
            self.act = self.gate = CODES["none"] if "none" in CODES else 0
        self.inv = np.full(LANES, np.float32(1.0) / np.float32(P), np.float32)
        self._local = threading.local()
        self.solo = None

    def _state(self, x, res, y):
        """This thread's bound calls for these arrays (bound again when they change: an engine's input or
        result); its buffers and the kernels' addresses (which depend on the argument types only) once."""
        st = getattr(self._local, "st", None)
        if st is not None and st[0] is x and st[1] is y and st[2] is res:
            return st[3]
        from srcore.plugin import packed_call as pc

        from ..kernels.block_split import block   # noqa: F401 (compiled before the addresses are taken)

        nt = self.nt
        bufs = getattr(self._local, "bufs", None)
        if bufs is None:
            e = np.zeros(self.e_shape, np.float32) if self.expand else None
            d = np.zeros(self.d_shape, np.float32)
            scr = np.zeros((nt, 2 * LANES * LANES), np.float32)
            sizes = self.dw.conv.bind(e if self.expand else x, d, None).buffer_sizes
            xb1, tb1 = self.dw.conv.buffers(*sizes)
            xb, tb = np.zeros((nt, xb1.size), np.float32), np.zeros((nt, tb1.size), np.float32)
            pooled, s = np.zeros(self.EB * LANES, np.float32), np.ones(self.EB * LANES, np.float32)
            h = np.zeros(max(1, self.w1t.shape[1]), np.float32)
            bufs = self._local.bufs = [e, d, scr, xb, tb, pooled, s, h, None]
        e, d, scr, xb, tb, pooled, s, h, fns = bufs
        rd = self.dw.conv.bind(e if self.expand else x, d, None)
        pargs, dargs = self.pp.conv.bind(d, y, res).args, rd.args
        eargs = self.pe.conv.bind(x, e, None).args if self.expand else pargs
        if fns is None:
            fp = pc.address(self.fp_kernel, (*pargs, scr[0], 0, 0, 0, 0, 0))
            fd = pc.address(self.fd_kernel, (*dargs, xb[0], tb[0], 0, 0, 0))
            fe = pc.address(self.fe_kernel, (*eargs, scr[0], 0, 0, 0)) if self.expand else fp
            fns = bufs[8] = (fe, fd, fp)
        fe, fd, fp = fns
        call = (fe, eargs, fd, dargs, fp, pargs, scr, xb, tb)
        tail = (nt, self.EB, self.Ho, self.Wo, self.expand, self.se, d.reshape(-1), pooled, self.inv, self.w1t,
                self.b1, self.w2t, self.b2, self.act, self.gate, h, s)
        self._local.st = (x, y, res, (call, tail))
        return call, tail

    def __call__(self, x, res, y):
        from ..kernels.block_split import block

        g = self.governor
        team = g.team()
        if team == 1 and self.solo is not None:
            # held on the caller (a busy core): the layers' own steps, each its bound fast call, on this
            # thread's buffers; a block's one dispatch of ~50 arrays cost 5-30 us more (the same bits)
            t0 = g.clock()
            self._layers(x, res, y)
            g.record(1, g.clock() - t0)
            return
        call, tail = self._state(x, res, y)
        _threads.use(team)
        t0 = g.clock()
        for n in range(self.N):
            block(*call, n, *tail)
        g.record(team, g.clock() - t0)

    def _layers(self, x, res, y):
        self._state(x, res, y)   # (this thread's buffers, made once)
        e, d = self._local.bufs[0], self._local.bufs[1]
        fns = self.solo
        i = 0
        if self.expand:
            fns[0](x, e)
            i = 1
        fns[i](e if self.expand else x, d)
        if self.se:
            fns[i + 1](d, d)    # (in place: the pool reads every pixel before the scale writes)
        if self.residual:
            fns[-1](d, res, y)
        else:
            fns[-1](d, y)


def kernel(layer: Layer, net: Network, threads: int | None = None, solo=None) -> Kernel:
    """The ``block_omp`` kernel of an ``inverted_residual`` layer, on ``threads`` (default: the intra-op count);
    ``solo``: its layers' step functions, run in its place while its governor holds it on the caller."""
    b = _Block(layer, net, _threads.count() if threads is None else threads)
    b.solo = solo
    if b.residual:
        def fn(x, res, y):
            b(x, res, y)
    else:
        def fn(x, y):
            b(x, None, y)
    # (it binds its arrays, as the conv kernels do: the plan stages a small engine input or result for it)
    fn.same_arrays = True
    return Kernel(fn, keep=b)


def candidates(layer: Layer, net: Network) -> list[Candidate]:
    """The table's row: ``block_omp`` (a restored plan's block; the builder makes them in :func:`fuse_blocks`)."""
    return [Candidate(NAME, lambda: kernel(layer, net), blas="omp")]


def fuse_blocks(net: Network, steps: list[Step], options: dict, name: str = "engine", contexts=None) -> list[Step]:
    """``steps`` with every block (:func:`find_blocks`) as one ``block_omp`` step, at more than one
    intra-op thread, when that plan timed faster than ``steps``' (``timing=False``: whenever there are
    blocks); else ``steps``. The network's layers become the steps' layers when the blocks are kept."""
    if _threads.count() <= 1 or not options.get("fusion", True) or NAME in options.get("exclude_tactics", ()):
        return steps
    if any(s.tactic.endswith("_team") for s in steps):   # (an engine on the OpenBLAS team: not a third pool)
        return steps
    found = find_blocks(net, steps)
    if not found:
        return steps
    new, at = [], 0
    for a, b in found:
        layer = block_layer(steps[a:b])
        new += steps[at:a]
        new.append(Step(layer, NAME, kernel(layer, net, solo=[s.fn for s in steps[a:b]]).fn))
        at = b
    new += steps[at:]
    if options.get("timing", True) and not _faster(net, steps, new, contexts, name, len(found)):
        return steps
    net.layers = [s.layer for s in new]
    return new


def _faster(net: Network, steps: list[Step], new: list[Step], contexts, name: str, blocks: int) -> bool:
    """Whether the plan of ``new`` timed faster than that of ``steps`` on random inputs (each plan's
    whole call: the blocks in the engine's sequence)."""
    rng = np.random.default_rng(0)
    xs = [random_input(net.tensors[t], rng) for t in net.inputs]
    plans = [Plan(net, steps, contexts), Plan(net, new, contexts)]
    with np.errstate(all="ignore"):
        times = best_times([lambda p=p: p.run(*xs) for p in plans], rounds=5)
    log.info("%s: layer by layer %.1f us, %d blocks as one step each %.1f us", name, times[0] * 1e6, blocks,
             times[1] * 1e6)
    return times[1] < times[0]

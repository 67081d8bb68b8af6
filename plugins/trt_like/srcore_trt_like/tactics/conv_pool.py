"""``conv_max_pool`` layers (a conv whose output only a max pool reads, fused by
``builder/fusion.py``): the fused ``packed_gemm_max_pool`` (:mod:`..conv.conv_pool`) and, as timed
alternatives, every conv tactic followed by the pool through a per-thread buffer
(``<conv tactic>+max_pool``). A layer with an NCHW16c side (``builder/layout.py``: a stem whose
pooled output feeds a blocked run) runs its NCHW16c conv tactics into a blocked buffer and pools
16 channels a vector op (``<conv tactic>+max_pool``)."""
from __future__ import annotations

import threading

import numpy as np

from ..builder.layout import blocked_shape
from ..builder.network import Layer, Network
from ..conv.conv_pool import PackedConvMaxPool
from ..conv.nchwc import nchwc_tactic_builders
from ..conv.nchwc_split import nchwc_omp_builders
from ..conv.tile_split import tile_omp_builders
from ..conv.pool import MaxPool2d
from ..kernels import pool_vec as _pv
from ..kernels import threads as _threads
from ..kernels.scratch import SCRATCH
from .conv import _kernel, conv_candidates, conv_pool_of, conv_spec, max_pool_fn
from .records import Candidate, Kernel


def candidates(layer: Layer, net: Network) -> list[Candidate]:
    """The fused tactic and every conv tactic followed by the pool."""
    a = layer.attrs
    spec = conv_spec(layer, net, residual=False)
    p = a["pool"]
    pool = MaxPool2d(spec.out_shape, p["kernel"], p["stride"], p["padding"], 1, p["ceil_mode"])
    if "nchwc" in a:
        return _blocked_candidates(a, spec, pool)

    def build_fused(layout=None) -> Kernel:
        fused = PackedConvMaxPool(spec, a["weight"], a["bias"], pool, threads=_threads.for_work(spec.macs),
                                  layout=layout)

        def run_fused(x, y):
            fused(x, y)
        return Kernel(run_fused, fused.weight_bytes, keep=fused, layout=fused.layout())
    out = [Candidate(PackedConvMaxPool.name, build_fused, blas="omp", restore=build_fused)]
    conv_attrs = {k: v for k, v in a.items() if k not in ("pool", "conv_shape")}
    conv_layer = Layer("conv", list(layer.inputs), [-1], conv_attrs)
    tmp_net = _OneShape(net, a["conv_shape"])
    pool_layer = Layer("max_pool2d", [-1], list(layer.outputs), dict(p, dilation=(1, 1)))

    def build_split(conv: Candidate, layout=None) -> Kernel:
        conv_kernel = conv.build() if layout is None else conv.restore(layout)
        run_conv = conv_kernel.fn
        # after a conv split on the OpenMP team, the pool split there too (resnet_small's stem pool, 64 x
        # 112x112 3x3/2: 543 -> 279 us on 2 threads, AMD EPYC, loaded; under the work threshold by its count)
        omp = _threads.count() if conv.blas == "omp" else None
        run_pool, _ = max_pool_fn(pool_layer, tmp_net, threads=omp)

        def run(x, y):
            mid = SCRATCH.get("convpool_mid", a["conv_shape"])
            run_conv(x, mid)
            run_pool(mid, y)
        return Kernel(run, conv_kernel.weight_bytes, keep=conv_kernel, layout=conv_kernel.layout)
    for conv in conv_candidates(conv_layer, tmp_net):
        out.append(Candidate(f"{conv.name}+max_pool", lambda conv=conv: build_split(conv), blas=conv.blas,
                             restore=lambda layout, conv=conv: build_split(conv, layout)))
    return out


def _blocked_candidates(a: dict, spec, pool: MaxPool2d) -> list[Candidate]:
    """Each NCHW16c conv tactic (input in the layer's layout, output blocked) then the blocked pool."""
    blocked_out = bool(a["nchwc"][1])
    mid_shape = blocked_shape(a["conv_shape"])
    # (plain ints: numba types a numpy scalar argument in microseconds)
    kh, kw, sh, sw, ph, pw, C, Ho, Wo = map(int, (*pool.kernel, *pool.stride, *pool.padding, spec.out_channels,
                                                 *pool.out_shape[2:]))

    def build(conv, layout=None) -> Kernel:
        tactic = conv(layout)
        run_conv = _kernel(tactic, False).fn
        tls = threading.local()

        def run(x, y):
            # the same buffer objects every call: the conv kernels reuse their bound call for the
            # same arrays (a new view each call cost ~6 µs of binding on shufflenet's stem); kept
            # per thread and scratch set (an engine call's execution context's, kernels/contexts.py)
            got = getattr(tls, "bufs", None)
            if got is None or got[0] is not SCRATCH.bufs:
                got = tls.bufs = (SCRATCH.bufs, SCRATCH.get("convpool_mid16c", mid_shape), np.empty(16, np.float32))
            _, mid, lanes = got
            run_conv(x, mid)
            _pv.max_pool_blocked(mid, kh, kw, sh, sw, ph, pw, y.reshape(-1), blocked_out, C, Ho, Wo, lanes)
        return Kernel(run, tactic.weight_bytes, keep=tactic, layout=tactic.layout())
    blocked = (a["nchwc"][0], True)
    # (and at more than one intra-op thread their splits over numba's OpenMP team, timed beside them)
    return [Candidate(f"{name}+max_pool", lambda conv=conv: build(conv), blas=conv_pool_of(name),
                      restore=lambda layout, conv=conv: build(conv, layout))
            for name, conv in nchwc_tactic_builders(spec, a["weight"], a["bias"], blocked, _threads.for_work(spec.macs))
            + [(n, b) for n, b in nchwc_omp_builders(spec, a["weight"], a["bias"], blocked)
               if n.startswith(("conv_", "dense_"))]   # (the 1x1 / depthwise twins stay behind their options)
            + tile_omp_builders(spec, a["weight"], a["bias"], blocked)]   # (a stem's: dense_tile_nchw16c_omp)


class _OneShape:
    """The network seen by the unfused parts: tensor -1 is the conv's output."""

    def __init__(self, net: Network, shape):
        self._net, self._shape = net, tuple(shape)

    def shape(self, t):
        return self._shape if t == -1 else self._net.shape(t)

    def __getattr__(self, name):
        return getattr(self._net, name)


def threaded(layer: Layer, net: Network) -> bool:
    return True

"""Convolution and pooling layers on the compiled tactics of the conv wing (:mod:`..conv`).

Every conv tactic that applies to a layer becomes a candidate of its own (the builder times
them all on the layer's shapes). The plan guarantees shapes, dtypes and contiguity, so the
engine calls the tactics' unchecked ``_run`` (the checked ``__call__`` costs microseconds).
"""
from __future__ import annotations

import threading

from ..builder.network import Layer, Network
from ..conv.nchwc import nchwc_tactic_builders
from ..conv.nchwc_split import nchwc_omp_builders
from ..conv.tile_split import tile_omp_builders
from ..conv.pool import AdaptiveAvgPool2d, AvgPool2d, AvgPool2dGather, MaxPool2d, MaxPool2dGather
from ..conv.spec import ConvSpec
from ..conv.tactics import conv_tactic_builders
from ..kernels import parallel as _par
from ..kernels import pool as _pool_kernels
from ..kernels import threads as _threads
from .blas_team import BLAS_TEAM
from .records import Candidate, Kernel


def conv_spec(layer: Layer, net: Network, *, residual: bool | None = None) -> ConvSpec:
    """The :class:`ConvSpec` of a ``conv`` (or ``conv_max_pool``) layer."""
    a = layer.attrs
    w = a["weight"]
    # (a layer with an NCHW16c input, builder/layout.py, keeps its logical input shape in its attrs)
    return ConvSpec(a.get("x_shape") or net.shape(layer.inputs[0]), w.shape[0], w.shape[2:], a["stride"],
                    a["padding"], a["dilation"], a["groups"], relu=a["relu"],
                    residual=a["residual"] if residual is None else residual,
                    activation=a.get("activation", "none"), negative_slope=a.get("negative_slope", 0.01))


def conv_candidates(layer: Layer, net: Network) -> list[Candidate]:
    """Every conv algorithm that applies, each labelled with its thread pool (:func:`conv_pool_of`)."""
    a = layer.attrs
    spec = conv_spec(layer, net)
    if "nchwc" in a:
        builders = (nchwc_tactic_builders(spec, a["weight"], a["bias"], a["nchwc"], _threads.for_work(spec.macs))
                    + nchwc_omp_builders(spec, a["weight"], a["bias"], a["nchwc"])
                    + tile_omp_builders(spec, a["weight"], a["bias"], a["nchwc"]))
    else:
        builders = conv_tactic_builders(spec, a["weight"], a["bias"])
        if spec.groups == 1 and len(spec.x_shape) == 4:
            # a conv outside any blocked run (an engine input or output, a head before a permute):
            # the NCHW16c kernels read and write NCHW too, blocking in their window (timed beside the rest)
            builders += nchwc_tactic_builders(spec, a["weight"], a["bias"], (False, False),
                                              _threads.for_work(spec.macs))
            builders += tile_omp_builders(spec, a["weight"], a["bias"], (False, False))
    return [Candidate(name, lambda build=build: _kernel(build(), a["residual"]), blas=conv_pool_of(name),
                      restore=lambda layout, build=build: _kernel(build(layout), a["residual"]))
            for name, build in builders]


def conv_pool_of(name: str) -> str | None:
    """The thread pool a conv tactic runs on at more than one thread: the OpenBLAS team (``..._team``, the
    SIMD splits), numba's OpenMP pool (the packed tactics, ``..._omp``), or None: the calling thread (the
    OpenBLAS tactics keep OpenBLAS on it, see ``ConvTactic``), which either engine pool may use
    (:func:`.choose._Pools.candidates`)."""
    if name.endswith("_team") or name in ("simd_direct_split", "depthwise_simd_split"):
        # (the SIMD splits' parts run on the same Python team, kernels/blas_team.py: on the OpenMP pool's
        # engine their worker was a third thread beside libgomp's, which spins after its regions; that
        # engine has the direct conv's OpenMP twin, simd_direct_omp, instead)
        return BLAS_TEAM
    if name == "packed_gemm" or name.endswith(("_packed", "_omp")):
        return "omp"
    return None


def _kernel(tactic, residual: bool) -> Kernel:
    run = tactic._run
    calls_for = getattr(tactic, "serial_calls", None)
    if calls_for is None:
        if residual:
            def fn(x, res, y):
                run(x, y, res)
        else:
            def fn(x, y):
                run(x, y, None)
        return Kernel(fn, tactic.weight_bytes, keep=tactic, layout=tactic.layout())
    # Called again on the same arrays (an engine's arena buffers), the layer is the bound call's
    # compiled calls and nothing else: the Python between the engine and the kernel (the tactic, the
    # conv's call, binding, the serial loop) was ~2 us of a 3 us 1x1 layer on 2x16x4x4.
    # Per thread, as the bound calls and their buffers are; asked for at the second call on the
    # same arrays (a fresh output array each call never pays for it). The hot path is one
    # thread-local read, three identity checks and the call: a wrapper calling a wrapper and
    # looping over a tuple of calls cost ~1 us a layer (2x4x12x10 3x3 conv: 6.2 against the packed
    # call's 5.1 us alone, Sapphire Rapids, CPU time), a sixth of res2net's small convs.
    tls = threading.local()

    def bind(x, res, y):
        # (another call in between rebinds the conv: the calls found for the arrays before go)
        last, tls.fast = getattr(tls, "last", None), None
        run(x, y, res)
        if last is not None and last[0] is x and last[1] is y and last[2] is res:
            from srcore.plugin import packed_call
            # each kernel call's 20-40 arguments as one array of their addresses and values
            # (srcore.conv.packed_call: ~0.8 us less a call, a third of a conv on a 2x2 plane)
            calls = packed_call.packed(calls_for(x, y, res))
            if calls:
                # (the PackedCalls tuple holds the arrays whose addresses its calls pack)
                f, a = calls[0] if len(calls) == 1 else (_in_turn, (calls,))
                tls.fast = (x, y, res, f, a, calls)
                return
        tls.last = (x, y, res)

    if residual:
        def fn(x, res, y):
            fast = getattr(tls, "fast", None)
            if fast is not None and fast[0] is x and fast[1] is y and fast[2] is res:
                fast[3](*fast[4])
                return
            bind(x, res, y)
    else:
        def fn(x, y):
            fast = getattr(tls, "fast", None)
            if fast is not None and fast[0] is x and fast[1] is y:
                fast[3](*fast[4])
                return
            bind(x, None, y)
    # (the plan stages a small engine input or result such a kernel reads or writes: builder/plan.py)
    fn.same_arrays = True
    return Kernel(fn, tactic.weight_bytes, keep=tactic, layout=tactic.layout())


def _in_turn(calls) -> None:
    for f, a in calls:
        f(*a)


def conv_threaded(layer: Layer, net: Network) -> bool:
    """Whether the layer has a candidate on numba's OpenMP pool (``packed_gemm``: ungrouped)."""
    return layer.attrs["groups"] == 1


def max_pool_threaded(layer: Layer, net: Network) -> bool:
    """Whether the max pool runs on numba's OpenMP pool at >1 thread (the stride-2 vector kernel)."""
    return layer.attrs["stride"][1] == 2 and layer.attrs["dilation"] == (1, 1)


def max_pool_fn(layer: Layer, net: Network, threads: int | None = None):
    """``(fn(x, out), blas)`` of the compiled max pool, or None when its shapes do not match; on
    ``threads`` (default: by its work, :func:`..kernels.threads.for_work`) when its vector kernel applies."""
    a = layer.attrs
    pool = MaxPool2d(net.shape(layer.inputs[0]), a["kernel"], a["stride"], a["padding"], a["dilation"],
                     a["ceil_mode"])
    if pool.out_shape != net.shape(layer.outputs[0]):
        return None
    N, C, Ho, Wo = pool.out_shape
    nt = _threads.for_work(N * C * Ho * Wo * pool.kernel[0] * pool.kernel[1]) if threads is None else threads
    if nt > 1 and pool.vectorized:
        (kh, kw), (ph, pw), sh = pool.kernel, pool.padding, pool.stride[0]

        governor = _threads.Governor(nt)

        def run(x, out):
            governor.run(_par.max_pool_s2, x, kh, kw, sh, ph, pw, out, nt)
        return run, "omp"

    def run(x, out):
        pool._max(x, out)
    return run, None


def max_pool2d(layer: Layer, net: Network) -> list[Candidate]:
    """The row kernels (``numba``) and, where its offset table is small, the gathered kernel of
    small planes (``gather``, one thread), timed against each other."""
    made = max_pool_fn(layer, net)
    if made is None:
        return []
    fn, blas = made
    out = [Candidate("numba", lambda: Kernel(fn), blas)]
    omp = _threads.count()
    if blas is None and omp > 1:
        # below the work threshold too, split by channels and timed beside it: a pool is memory-bound,
        # a multiply-add count says little about it (unet_small's 16 x 128x128 2x2 pool: 128 -> 71 us
        # on 2 threads, AMD EPYC, loaded)
        split = max_pool_fn(layer, net, threads=omp)
        if split[1] == "omp":
            out.append(Candidate("numba_split", lambda: Kernel(split[0]), "omp"))
    a = layer.attrs
    gathered = MaxPool2dGather.of(MaxPool2d(net.shape(layer.inputs[0]), a["kernel"], a["stride"], a["padding"],
                                            a["dilation"], a["ceil_mode"]))
    if gathered is not None:
        def run(x, y):
            gathered._max(x, y)
        out.append(Candidate("gather", lambda: Kernel(run)))
    return out


def avg_pool2d(layer: Layer, net: Network):
    pool = _avg_pool(layer, net)
    if pool is None:
        return None

    def run(x, out):
        pool._avg(x, out)
    return run


def avg_pool2d_gather(layer: Layer, net: Network):
    """The gathered kernel of small planes (:class:`AvgPool2dGather`), timed against the row kernels."""
    pool = _avg_pool(layer, net)
    gathered = None if pool is None else AvgPool2dGather.of(pool)
    if gathered is None:
        return None

    def run(x, out):
        gathered._avg(x, out)
    return run


def _avg_pool(layer: Layer, net: Network) -> AvgPool2d | None:
    a = layer.attrs
    pool = AvgPool2d(net.shape(layer.inputs[0]), a["kernel"], a["stride"], a["padding"], a["ceil_mode"],
                     a["count_include_pad"], a["divisor_override"])
    return pool if pool.out_shape == net.shape(layer.outputs[0]) else None


def global_mean(layer: Layer, net: Network):
    """``x.mean((2, 3))`` of a 4-D tensor (kept dims or not: EfficientNet's, GhostNet's and ConvNeXt's
    global pool) on the adaptive pool's compiled per-plane sums; None for other means. (numpy's
    reduce and divide: 2.4-2.7 us on 1x32x6x6 and 2x16x6x6 in the engines, mostly its calls.)"""
    xs = net.shape(layer.inputs[0])
    if len(xs) != 4 or sorted(d % 4 for d in layer.attrs["dims"]) != [2, 3]:
        return None
    N, C = xs[:2]

    def run(x, out):
        _pool_kernels.global_avg(x, out.reshape(N, C, 1, 1), 0, C)
    return run


def adaptive_avg_pool2d(layer: Layer, net: Network):
    pool = AdaptiveAvgPool2d(net.shape(layer.inputs[0]), layer.attrs["output_size"])

    def run(x, out):
        pool._run(x, out)
    return run

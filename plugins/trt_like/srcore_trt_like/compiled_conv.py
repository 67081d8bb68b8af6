"""Convolution and pooling layers on the compiled tactics of :mod:`.conv` and :mod:`.pool`.

Every conv tactic that applies to a layer becomes a candidate of its own (the builder times
them all on the layer's shapes). The plan guarantees shapes, dtypes and contiguity, so the
engine calls the tactics' unchecked ``_run`` (the checked ``__call__`` costs microseconds).
"""
from __future__ import annotations

import numpy as np

from . import parallel
from .conv import ConvSpec, conv_tactic_builders
from .network import Layer, Network
from .pool import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d, _scale_planes
from .tactics import Lazy


def conv_candidates(layer: Layer, net: Network) -> list[tuple[str, object]]:
    a = layer.attrs
    w = a["weight"]
    spec = ConvSpec(net.shape(layer.inputs[0]), w.shape[0], w.shape[2:], a["stride"], a["padding"], a["dilation"],
                    a["groups"], relu=a["relu"], residual=a["residual"])
    # threaded on numba's OpenMP pool, or BLAS on the calling thread (see parallel.py)
    return [(name, Lazy(lambda build=build: _kernel(build(), a["residual"]), blas="omp"))
            for name, build in conv_tactic_builders(spec, w, a["bias"])]


def _kernel(tactic, residual: bool):
    run = tactic._run
    if residual:
        def fn(x, res, y):
            run(x, y, res)
    else:
        def fn(x, y):
            run(x, y, None)
    fn.weight_bytes = tactic.weight_bytes   # charged by the timing (weights stream from memory)
    fn.blas = "omp"
    return fn


def conv_threaded(layer: Layer, net: Network) -> bool:
    """Whether the layer has a candidate on numba's OpenMP pool (``packed_gemm``: ungrouped)."""
    return layer.attrs["groups"] == 1


def max_pool_threaded(layer: Layer, net: Network) -> bool:
    """Whether the max pool runs on numba's OpenMP pool at >1 thread (the stride-2 vector kernel)."""
    return layer.attrs["stride"][1] == 2 and layer.attrs["dilation"] == (1, 1)


def max_pool2d(layer: Layer, net: Network):
    a = layer.attrs
    pool = MaxPool2d(net.shape(layer.inputs[0]), a["kernel"], a["stride"], a["padding"], a["dilation"],
                     a["ceil_mode"])
    if pool.out_shape != net.shape(layer.outputs[0]):
        return None
    nt = parallel.threads()
    if nt > 1 and pool.vectorized:
        from . import packed_parallel as _par
        (kh, kw), (ph, pw), sh = pool.kernel, pool.padding, pool.stride[0]

        def run(x, out):
            parallel.use(nt)
            _par.max_pool_s2(x, kh, kw, sh, ph, pw, out, nt)
        run.blas = "omp"
        return run

    def run(x, out):
        pool._max(x, out)
    return run


def avg_pool2d(layer: Layer, net: Network):
    a = layer.attrs
    pool = AvgPool2d(net.shape(layer.inputs[0]), a["kernel"], a["stride"], a["padding"], a["ceil_mode"],
                     a["count_include_pad"], a["divisor_override"])
    if pool.out_shape != net.shape(layer.outputs[0]):
        return None
    C = pool.x_shape[1]

    def run(x, out):
        pool._reduce(x, out, False)
        _scale_planes(out, pool.divisor, 0, C)
    return run


def adaptive_avg_pool2d(layer: Layer, net: Network):
    pool = AdaptiveAvgPool2d(net.shape(layer.inputs[0]), layer.attrs["output_size"])

    def run(x, out):
        pool._run(x, out)
    return run


POOLS = {"max_pool2d": max_pool2d, "avg_pool2d": avg_pool2d, "adaptive_avg_pool2d": adaptive_avg_pool2d}

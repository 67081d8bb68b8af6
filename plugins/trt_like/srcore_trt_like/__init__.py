"""srcore-trt-like: backend ``trt_like``, a TensorRT-like engine backend.

Declares the backend, its engine builder (which nodes it supports; building
and loading engines) and per-node kernels for the ops an engine segment can
also run one at a time. No numpy here: everything is ``"module:attr"``.

The package is laid out in wings, each importing only the ones below it:

* :mod:`.engine`: the ``EngineBuilder`` entry points, engines and their plans per signature;
* :mod:`.builder`: segment graph -> network of layers (the op-support table, converters),
  fusion, the execution plan;
* :mod:`.tactics`: the table of tactic records, their timing and ranking, the timing cache;
* :mod:`.conv`: convolution and pooling tactics (specs, im2col/packed/Winograd algorithms);
* :mod:`.pointwise`: fused pointwise kernels (expression model, code generator, kernel cache);
* int8 layers of quantized segments: converters in :mod:`.builder.qconverters`, tactics in
  :mod:`.tactics.int8`, arithmetic in :mod:`.kernels.int8`;
* :mod:`.kernels`: the numba code (one set of JIT options, shared epilogues), MKL, threads and
  scratch.
"""
from __future__ import annotations

from srcore.plugin import Backend, EngineBuilder, Kernel, hookimpl

BACKEND = "trt_like"
PRECISIONS = ("float32", "float16")

_K = "srcore_trt_like.node_kernels:"
KERNELS = [
    Kernel("aten::relu", BACKEND, "out", PRECISIONS, _K + "relu_out", matcher=_K + "relu_matcher"),
    Kernel("aten::add.Tensor", BACKEND, "out", PRECISIONS, _K + "add_out", matcher=_K + "add_matcher"),
]


@hookimpl
def srcore_backends():
    # what engines compute: float32 layers; int8 layers for quantized (quint8/qint8) segments. The two
    # per-node kernels below (relu, add) also take float16 nodes one at a time (numpy).
    yield Backend(BACKEND, "TensorRT-like engines: fused segments in float32, int8 layers for quantized "
                           "segments (srcore-trt-like)")


@hookimpl
def srcore_kernels():
    yield from KERNELS


@hookimpl
def srcore_engine_builders():
    yield EngineBuilder(BACKEND, supports="srcore_trt_like.builder.support:supports",
                        build="srcore_trt_like.engine:build", load="srcore_trt_like.engine:load",
                        ops="srcore_trt_like.builder.support:engine_ops")

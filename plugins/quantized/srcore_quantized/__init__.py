"""srcore-quantized: backend ``quantized_cpu``, kernels for the quantized dtypes.

The data model (the dtypes ``quint8``, ``qint8``, ``qint32``, per-tensor and per-channel
parameters as part of a value's type, :class:`srcore.QuantizedArray`) and the ops' declarations and
shape rules are srcore's (``srcore/ops/quantized.yaml``, ``aten_quantized.yaml``); this plugin
provides the kernels, with torch's x86 (fbgemm) semantics bit for bit. The kernel records are in
:mod:`srcore_quantized.decl`; no numpy is imported here. See docs/quantization.md.
"""
from __future__ import annotations

from srcore.plugin import Backend, DType, hookimpl

BACKEND = "quantized_cpu"

#: name -> (numpy storage dtype, qmin, qmax), as torch defines them (and srcore.ir.quant.QDTYPES)
QDTYPES = {
    "quint8": ("uint8", 0, 255),
    "qint8": ("int8", -128, 127),
    "qint32": ("int32", -(2 ** 31), 2 ** 31 - 1),
}


@hookimpl
def srcore_dtypes():
    for name, (storage, qmin, qmax) in QDTYPES.items():
        yield DType(name, kind="quantized", storage=storage, params={"qmin": qmin, "qmax": qmax})


@hookimpl
def srcore_backends():
    yield Backend(BACKEND, "numpy kernels on quantized tensors, torch x86 (fbgemm) semantics (srcore-quantized)")


@hookimpl
def srcore_kernels():
    from .decl import KERNELS

    yield from KERNELS

"""srcore-quantized: backend ``quantized_cpu`` and the quantized dtypes.

Declares the dtypes ``quint8``, ``qint8`` and ``qint32`` (affine per-tensor
quantization: ``real = (q - zero_point) * scale``), the backend, the two
conversion ops (in ``aten::``, with torch's schemas) and their kernels. No
numpy here: kernels are ``"module:attr"`` strings.
"""
from __future__ import annotations

from srcore.plugin import Backend, DType, Kernel, OpLibrary, hookimpl

BACKEND = "quantized_cpu"

#: name -> (numpy storage dtype, qmin, qmax), as torch defines them
QDTYPES = {
    "quint8": ("uint8", 0, 255),
    "qint8": ("int8", -128, 127),
    "qint32": ("int32", -(2 ** 31), 2 ** 31 - 1),
}
QUANTIZED = tuple(QDTYPES)
FLOATS = ("float32", "float64")

#: the ops this plugin implements, exactly as torch declares them
SCHEMAS = (
    "aten::quantize_per_tensor(Tensor self, float scale, int zero_point, ScalarType dtype) -> Tensor",
    "aten::dequantize.self(Tensor self) -> Tensor",
)

_K = "srcore_quantized.kernels.convert:"
KERNELS = [
    Kernel("aten::quantize_per_tensor", BACKEND, "native", FLOATS + QUANTIZED, _K + "quantize_per_tensor"),
    Kernel("aten::dequantize.self", BACKEND, "out", ("float32",) + QUANTIZED, _K + "dequantize_out"),
]


@hookimpl
def srcore_dtypes():
    for name, (storage, qmin, qmax) in QDTYPES.items():
        yield DType(name, kind="quantized", storage=storage, params={"qmin": qmin, "qmax": qmax})


@hookimpl
def srcore_backends():
    yield Backend(BACKEND, "numpy kernels on quantized tensors (srcore-quantized)")


@hookimpl
def srcore_op_libraries():
    yield OpLibrary("aten", schemas=SCHEMAS)


@hookimpl
def srcore_kernels():
    yield from KERNELS

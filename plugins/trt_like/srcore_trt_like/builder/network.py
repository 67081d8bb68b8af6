"""The engine's network: a segment graph with concrete shapes, as a list of layers.

Every tensor of the segment becomes a :class:`Tensor` (id, shape); every node one
or more :class:`Layer` s (``aten::_transformer_encoder_layer_fwd`` becomes a
dozen). Constant arguments (weights, strides, dims) are baked into the layers'
``attrs``; only tensors flow between layers. :mod:`.convert` makes a network from a
segment graph with the converters of :mod:`.converters`.
"""
from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from srcore.plugin import QDTYPES


#: the dtypes of index and mask tensors (the indices of a gather or an embedding, the condition of a
#: where): engine inputs, or made by the data layers (a sort's indices, a comparison's mask, a slice
#: of an index), read by the layers that take them
from .support import DATA_DTYPES, HALF, PLAIN_DTYPES  # noqa: E402,F401


@attrs.define(eq=False)
class Tensor:
    """One value inside the engine: C-contiguous, of a concrete shape; float32, an index or mask
    (:data:`DATA_DTYPES`), or a quantized dtype (``quint8``, ``qint8``: its stored integers, with per-tensor ``qparams``) in the int8
    layers of a quantized segment."""

    id: int
    shape: tuple[int, ...]
    name: str = ""
    dtype: str = "float32"
    qparams: Any = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def storage(self) -> np.dtype:
        """The numpy dtype of the tensor's memory (a quantized tensor's: its integers')."""
        if self.dtype == "float32":
            return np.dtype(np.float32)
        if self.dtype in PLAIN_DTYPES:   # (a half one only at a cast: the engine computes in float32)
            return np.dtype(self.dtype)
        return np.dtype(QDTYPES[self.dtype].storage)

    @property
    def nbytes(self) -> int:
        return self.size * self.storage.itemsize


@attrs.define(eq=False)
class Layer:
    """One step of the network: ``kind`` (pointwise, conv, gemm, ...), tensor inputs/outputs by id,
    constant attributes, and where it came from (for errors and ``describe``)."""

    kind: str
    inputs: list[int]
    outputs: list[int]
    attrs: dict[str, Any] = attrs.field(factory=dict)
    source: str = ""


@attrs.define(eq=False)
class Network:
    """Tensors, layers in execution order, and which tensors are the engine's inputs and outputs."""

    tensors: dict[int, Tensor] = attrs.field(factory=dict)
    layers: list[Layer] = attrs.field(factory=list)
    inputs: list[int] = attrs.field(factory=list)
    outputs: list[int] = attrs.field(factory=list)
    constants: dict[int, np.ndarray] = attrs.field(factory=dict)

    def constant(self, array: np.ndarray, dtype: str = "float32") -> int:
        """A tensor holding a constant array (a non-scalar constant operand); always an own,
        writeable copy (parameters may be read-only memory maps of the model file, which kernels
        compiled for writeable arrays reject), float32 unless ``dtype`` is one of the data dtypes
        (an int64 index or a bool mask that a data layer reads)."""
        tid = self.new_tensor(array.shape, "const", dtype if dtype in DATA_DTYPES else "float32")
        self.constants[tid] = np.array(array, dtype=self.tensors[tid].storage, order="C", copy=True)
        return tid

    def new_tensor(self, shape, name: str = "", dtype: str = "float32", qparams: Any = None) -> int:
        tid = len(self.tensors)
        self.tensors[tid] = Tensor(tid, tuple(int(d) for d in shape), name, dtype, qparams)
        return tid

    def add(self, kind: str, inputs, out_shape, source: str = "", n_out: int = 1, **layer_attrs) -> int:
        """Append a layer making ``n_out`` new tensors of ``out_shape``; returns the (first) output id."""
        outs = [self.new_tensor(out_shape) for _ in range(n_out)]
        self.layers.append(Layer(kind, list(inputs), outs, dict(layer_attrs), source))
        return outs[0]

    def shape(self, tid: int) -> tuple[int, ...]:
        return self.tensors[tid].shape

    def users(self) -> dict[int, list[Layer]]:
        """tensor id -> the layers that read it."""
        out: dict[int, list[Layer]] = {t: [] for t in self.tensors}
        for layer in self.layers:
            for t in layer.inputs:
                out[t].append(layer)
        return out

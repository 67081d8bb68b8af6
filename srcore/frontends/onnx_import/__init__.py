"""ONNX -> srcore: ``from_onnx(path_or_model_proto)``.

``load`` reads and checks the model (opset, external data, shape inference);
``graph`` walks it node by node through the converter table in ``ops`` (one small
converter per ONNX op, each emitting srcore's declared ``aten::``/``prim::`` ops);
``backend`` makes srcore an ``onnx.backend.base.Backend``. The ``onnx`` package is
imported only when a model is converted; a converted model runs without it.
"""
from __future__ import annotations

import os
from typing import Mapping

from ...errors import ConversionError
from ...model import InputSpec, Model

__all__ = ["from_onnx", "NeedsConstantInputs"]


class NeedsConstantInputs(ConversionError):
    """A ``ConversionError`` where (some of) the nodes that cannot be converted need the values of
    graph inputs at conversion (axes, pads, scales, a shape, ...): ``inputs`` names them. Converting
    again with ``from_onnx(model, constant_inputs={name: array})`` specializes the model on those
    values (what :class:`~.backend.SrcoreBackend` does on the first run)."""

    def __init__(self, message: str, inputs: tuple[str, ...], model_inputs: tuple[str, ...] = ()):
        super().__init__(message)
        self.inputs = tuple(inputs)               # the inputs wanted as constants
        self.model_inputs = tuple(model_inputs)   # every graph input (not initializer), in order


def from_onnx(model, *, base_dir: str | os.PathLike | None = None,
              constant_inputs: Mapping[str, object] | None = None) -> Model:
    """Convert an ONNX model (a file path, its bytes, or an ``onnx.ModelProto``) to a ``Model``.

    Inputs keep their ONNX names, dtypes and shapes (``dim_param`` dims are symbolic);
    initializers become parameters; outputs keep their names. ``base_dir`` is where
    external data files are found for a model given in memory (a file's own
    directory by default). ``constant_inputs`` (graph input name -> array) makes those
    inputs constants of the converted model (it no longer takes them): for inputs that
    carry what srcore needs at conversion (Unsqueeze's axes, Slice's starts, Pad's pads,
    Resize's scales, ...). Everything the converter cannot map is listed in one
    ``ConversionError``, one line per node with its name and op type; a
    :class:`NeedsConstantInputs` when graph inputs' values would help.
    """
    from .graph import GraphConverter
    from .load import load_model
    from .ops import TABLE
    from .recompose import recompose

    loaded = load_model(model, base_dir, constant_inputs)
    conv = GraphConverter(TABLE, loaded.opset, loaded.source_name, loaded.read_tensor)
    input_names, output_names = conv.convert_main(loaded.proto.graph, loaded.large_initializers.values())
    if conv.problems:
        lines = "\n".join(f"  - {p}" for p in conv.problems)
        msg = f"cannot convert {loaded.where}: {len(conv.problems)} unsupported construct(s):\n{lines}"
        if conv.wanted_constants:
            names = ", ".join(repr(n) for n in conv.wanted_constants)
            raise NeedsConstantInputs(f"{msg}\n(the values of graph inputs {names} are needed at conversion: "
                                      f"pass them as from_onnx(..., constant_inputs={{name: array}}))",
                                      tuple(conv.wanted_constants), tuple(input_names))
        raise ConversionError(msg)
    graph = conv.graph
    from ...passes.fold_qdq import fold_quantized
    from .ops.quant import dequantize_constants

    # QDQ: quantized ops where Q/DQ pairs allow, float weights where not
    fired = bool(recompose(graph)) | bool(fold_quantized(graph)) | bool(dequantize_constants(graph))
    params = conv.params
    if fired:  # drop what the recomposed ops replaced, and the constants only they used
        from ...model import collect_params
        from ...passes.dce import eliminate_dead_code

        eliminate_dead_code(graph)
        params = collect_params(graph)
    from ...ir.types import TensorType

    # tensor inputs get specs; a sequence input (Tensor[]) is described by its IR type
    specs = tuple(InputSpec(v.name, v.type.dtype, v.type.shape) for v in graph.inputs
                  if isinstance(v.type, TensorType))
    import onnx

    p = loaded.proto
    producer = f"{p.producer_name} {p.producer_version}".strip() or "unknown"
    meta = {"producer": f"srcore.from_onnx (onnx {onnx.__version__})", "source": loaded.source_name,
            "onnx_producer": producer, "onnx_opset": str(loaded.original_opset)}
    return Model(graph, params, specs, output_names, meta)

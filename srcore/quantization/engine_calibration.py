"""INT8 calibration of a float model at load, for engine backends (TensorRT's INT8 calibrator):
``Options(engine_options={"precision": "int8", "calibration": DATA})``.

srcore reads these options itself, for every engine backend (as ``profiles``): a float model is
quantized by :func:`srcore.quantize` on ``DATA`` before it is partitioned, so that its quantized
segments build into int8 engines; what cannot be quantized stays float, layer by layer, as TensorRT
falls back to float per layer. One calibrator, not a second one: the engine's integers are those of
the same model quantized by ``srcore.quantize`` and run on ``quantized_cpu``.
"""
from __future__ import annotations

from typing import Any

from ..errors import EngineOptionError, QuantizationError

#: engine options this module reads (the builders never see them)
CALIBRATION_OPTIONS = ("calibration", "calibrator", "calibration_batch_size")

#: ``calibrator`` -> srcore.quantize settings. "entropy" is TensorRT's IInt8EntropyCalibrator2 (its
#: recommended, default one); "minmax" its IInt8MinMaxCalibrator; "percentile" clips at the 99.99th
#: percentile of |x| (srcore.quantize's default observer); "moving_average" torch's observer.
CALIBRATORS = {
    "entropy": {"observer": "histogram", "histogram_method": "entropy"},
    "minmax": {"observer": "minmax"},
    "percentile": {"observer": "histogram", "histogram_method": "percentile"},
    "moving_average": {"observer": "moving_average"},
}


def _has_quantized_values(graph) -> bool:
    from ..ir.quant import is_quantized
    from ..ir.types import TensorType

    def quantized(v) -> bool:
        return isinstance(v.type, TensorType) and is_quantized(v.type.dtype)

    return any(quantized(v) for v in graph.inputs) or any(quantized(o) for n in graph.all_nodes() for o in n.outputs)


def calibrate_for_engines(model: Any, options: Any) -> tuple[Any, Any]:
    """``(model, options)`` to load: the model quantized on the calibration data when the engine
    options ask for int8 with ``calibration``, with the calibration options removed from the
    returned options; else both unchanged. Wrong combinations are an EngineOptionError; bad
    calibration data a QuantizationError naming the input (from srcore.quantize)."""
    import attrs

    eo = dict(options.engine_options)
    precision = eo.get("precision", "float32")
    calibration = eo.get("calibration")
    given = [k for k in CALIBRATION_OPTIONS if k in eo]
    if not given and precision != "int8":
        return model, options
    if given and calibration is None:
        raise EngineOptionError(f"engine option {given[0]!r} is given without 'calibration' data")
    if calibration is not None and precision != "int8":
        raise EngineOptionError(f"engine option 'calibration' calibrates a float model for int8 engines: it needs "
                                f"precision='int8' (got precision={precision!r})")
    graph = getattr(model, "graph", model)
    if calibration is None:
        if not _has_quantized_values(graph):
            raise EngineOptionError("engine option precision='int8' on a float model needs 'calibration' data "
                                    "(an .npz path, {input name: samples} or an iterable of batches) to choose "
                                    "its activation ranges, as TensorRT needs an INT8 calibrator; or pass a model "
                                    "quantized already (srcore.quantize, an imported quantized model)")
        return model, options
    if _has_quantized_values(graph):
        raise EngineOptionError("engine option 'calibration' is for a float model, but this model is quantized "
                                "already: drop 'calibration' (its int8 segments build into int8 engines as they are)")
    name = eo.get("calibrator", "entropy")
    if name not in CALIBRATORS:
        raise EngineOptionError(f"engine option calibrator={name!r}: expected one of {', '.join(CALIBRATORS)}")
    batch_size = eo.get("calibration_batch_size", 32)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise EngineOptionError(f"engine option calibration_batch_size={batch_size!r}: expected a positive integer")
    from ..model import Model
    from .api import quantize

    if not isinstance(model, Model):
        model = Model.from_graph(graph)
    try:
        qmodel = quantize(model, calibration, batch_size=batch_size, **CALIBRATORS[name])
    except QuantizationError as exc:   # bad data: say which option it came from
        raise QuantizationError(f"engine_options['calibration']: {exc}") from None
    rest = {k: v for k, v in eo.items() if k not in CALIBRATION_OPTIONS}
    return qmodel, attrs.evolve(options, engine_options=rest)

"""srcore's own post-training static quantization: ``srcore.quantize(model, calibration, ...)``.

See docs/quantization.md ("Quantizing a float model"): :mod:`.plan` decides what each node becomes,
:mod:`.observers` pick activation ranges from calibration data (:mod:`.calibration`), :mod:`.rewrite`
builds the quantized graph, :mod:`.api` ties them together and reports every node.
"""
from .api import NodeReport, QuantizationReport, quantize
from .observers import HISTOGRAM_METHODS, OBSERVERS

__all__ = ["quantize", "QuantizationReport", "NodeReport", "OBSERVERS", "HISTOGRAM_METHODS"]

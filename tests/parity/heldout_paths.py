"""Every import path of the held-out zoo (heldout_models.py) as one function: a model name and a
path give a ``srcore.Model``; used by tests/parity/test_heldout_zoo.py and benchmarks/heldout_ab.py.

Paths: ``script`` and ``trace`` (torch.jit, converted by from_torchscript, which freezes),
``frozen`` (a torch.jit.freeze'd scripted module, taken as it is), ``export`` (torch.export via
from_torch) and ``onnx`` (torch.onnx.export's TorchScript exporter, then from_onnx).
"""
from __future__ import annotations

import os
import tempfile

import torch

import srcore

PATHS = ("script", "trace", "frozen", "export", "onnx")
ONNX_OPSET = 17


def convert(module: torch.nn.Module, inputs: tuple, path: str) -> srcore.Model:
    """``module`` (eval mode) through import path ``path``, with ``inputs`` as its examples."""
    if path == "script":
        return srcore.from_torchscript(torch.jit.script(module), inputs)
    if path == "trace":
        with torch.no_grad():
            return srcore.from_torchscript(torch.jit.trace(module, inputs, check_trace=False), inputs)
    if path == "frozen":
        return srcore.from_torchscript(torch.jit.freeze(torch.jit.script(module)), inputs)
    if path == "export":
        return srcore.from_torch(module, inputs)
    if path == "onnx":
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "m.onnx")
            with torch.no_grad():
                torch.onnx.export(module, inputs, f, dynamo=False, opset_version=ONNX_OPSET)
            return srcore.from_onnx(f)
    raise ValueError(f"unknown import path {path!r} (one of {PATHS})")

"""ONNX files for the tenth held-out zoo (test_heldout10_zoo.py), each run against onnxruntime on the
same file: a small convnet + MLP quantized by ``onnxruntime.quantization`` (``quantize_static`` in
QDQ and QOperator formats, per tensor and per channel, uint8 / int8 activations and weights,
symmetric activations; ``quantize_dynamic``), and hand-built ReduceMax / ReduceMin over axes whose
size is known at run time only (empty at run time: ONNX's identity).

``quantized(name)`` writes the file for ``QUANTIZED[name]`` into a directory and gives its path.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import torch
from torch import nn


class ConvMLP(nn.Module):
    """conv, grouped conv, residual add, max pool, x * sigmoid(x), mean, two Gemms, a cat (two outputs)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.fc, self.fc2 = nn.Linear(8, 5), nn.Linear(5, 4)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.nn.functional.max_pool2d(y + torch.relu(self.c2(y)), 2)
        y = (torch.sigmoid(y) * y).mean((2, 3))
        h = self.fc(y)
        return self.fc2(torch.relu(h)), torch.cat([h, h * 2], 1)


def feeds(seed: int, batch: int = 2) -> dict:
    return {"x": np.random.default_rng(seed).standard_normal((batch, 3, 8, 8)).astype(np.float32)}


def _float_file(d: str) -> str:
    f, p = os.path.join(d, "float.onnx"), os.path.join(d, "pre.onnx")
    if not os.path.exists(p):
        from onnxruntime.quantization import quant_pre_process

        torch.manual_seed(0)
        with torch.no_grad():
            torch.onnx.export(ConvMLP().eval(), (torch.randn(2, 3, 8, 8),), f, dynamo=False, opset_version=17,
                              input_names=["x"], dynamic_axes={"x": {0: "b"}})
        quant_pre_process(f, p)
    return p


#: name -> (format ("QDQ", "QOperator" or "dynamic"), per_channel, activation type, weight type, extra options)
QUANTIZED = {
    "qdq_u8s8_tensor": ("QDQ", False, "QUInt8", "QInt8", {}),
    "qdq_u8s8_channel": ("QDQ", True, "QUInt8", "QInt8", {}),
    "qdq_s8s8_symmetric": ("QDQ", True, "QInt8", "QInt8", {"ActivationSymmetric": True}),
    "qdq_u8u8_tensor": ("QDQ", False, "QUInt8", "QUInt8", {}),
    "qdq_u8u8_channel": ("QDQ", True, "QUInt8", "QUInt8", {}),
    "qop_u8s8_tensor": ("QOperator", False, "QUInt8", "QInt8", {}),
    "qop_s8s8_channel": ("QOperator", True, "QInt8", "QInt8", {}),
    "qop_u8u8_symmetric": ("QOperator", False, "QUInt8", "QUInt8", {"ActivationSymmetric": True}),
    "dynamic_s8_tensor": ("dynamic", False, None, "QInt8", {}),
    "dynamic_u8_channel": ("dynamic", True, None, "QUInt8", {}),
}


def quantized(name: str, d: str) -> str:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

    fmt, per_channel, act, wt, extra = QUANTIZED[name]
    src, out = _float_file(d), os.path.join(d, name + ".onnx")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([feeds(s) for s in range(4)])

        def get_next(self):
            return next(self.it, None)

    # int8 weights: without VNNI, MLAS adds pairs of u8 x s8 products in saturating int16 (vpmaddubsw; int8
    # activations are shifted to uint8 first), where srcore sums exactly; 7-bit weights (ORT's own advice for
    # such CPUs) keep every pair in range, so the file's result is the same on every CPU
    reduce_range = wt == "QInt8"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fmt == "dynamic":
            quantize_dynamic(src, out, per_channel=per_channel, reduce_range=reduce_range,
                             weight_type=getattr(QuantType, wt))
        else:
            quantize_static(src, out, Reader(), quant_format=getattr(QuantFormat, fmt), per_channel=per_channel,
                            reduce_range=reduce_range, activation_type=getattr(QuantType, act),
                            weight_type=getattr(QuantType, wt), extra_options=extra)
    return out


def reduce_dynamic_axes(dtype):
    """ReduceMax over a run-time axis, ReduceMin over two, ReduceMax over all (opset 18, axes inputs)."""
    from heldout4_onnx import c, model, vi
    from onnx import helper as h

    return model([h.make_node("ReduceMax", ["x", "ax"], ["a"], keepdims=0),
                  h.make_node("ReduceMin", ["x", "ax2"], ["b"], keepdims=1),
                  h.make_node("ReduceMax", ["x"], ["d"], keepdims=0)],
                 [vi("x", dtype, [3, "K", "J"])], [vi("a", dtype, None), vi("b", dtype, None), vi("d", dtype, None)],
                 [c("ax", np.array([1], np.int64)), c("ax2", np.array([1, 2], np.int64))], opset=18)


def opset23_cases() -> dict:
    """name -> (ModelProto, feeds): RMSNormalization, RotaryEmbedding and Attention of opset 23."""
    from heldout4_onnx import c, model, vi
    from onnx import TensorProto as T, helper as h

    rng = np.random.default_rng(23)
    F = T.FLOAT

    def r(*s):
        return rng.standard_normal(s).astype(np.float32)
    out = {}
    out["rmsnorm23"] = (model([h.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1, epsilon=1e-5),
                               h.make_node("RMSNormalization", ["x", "s2"], ["y2"], axis=1)],
                              [vi("x", F, ["N", 3, 8])], [vi("y", F, None), vi("y2", F, None)],
                              [c("s", r(8)), c("s2", r(3, 8))], opset=23), {"x": r(2, 3, 8)})
    cos, sin = r(16, 4), r(16, 4)
    out["rotary23"] = (model([h.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"]),
                              h.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y2"], interleaved=1),
                              h.make_node("RotaryEmbedding", ["x3", "cos2", "sin2"], ["y3"], num_heads=2,
                                          rotary_embedding_dim=4)],
                             [vi("x", F, [2, 2, 5, 8]), vi("pos", T.INT64, [2, 5]), vi("x3", F, [2, 5, 16])],
                             [vi("y", F, None), vi("y2", F, None), vi("y3", F, None)],
                             [c("cos", cos), c("sin", sin), c("cos2", np.repeat(cos[None, :5, :2], 2, 0)),
                              c("sin2", np.repeat(sin[None, :5, :2], 2, 0))], opset=23),
                       {"x": r(2, 2, 5, 8), "pos": rng.integers(0, 16, (2, 5)), "x3": r(2, 5, 16)})
    out["attention23"] = (model([h.make_node("Attention", ["q", "k", "v"], ["y"]),
                                 h.make_node("Attention", ["q", "k", "v", "m"], ["y2"], scale=0.3),
                                 h.make_node("Attention", ["q3", "k3", "v3"], ["y3"], q_num_heads=4, kv_num_heads=2,
                                             is_causal=1)],
                                [vi("q", F, [2, 4, 5, 8]), vi("k", F, [2, 4, 6, 8]), vi("v", F, [2, 4, 6, 8]),
                                 vi("m", T.BOOL, [5, 6]), vi("q3", F, [2, 5, 32]), vi("k3", F, [2, 5, 16]),
                                 vi("v3", F, [2, 5, 16])], [vi("y", F, None), vi("y2", F, None), vi("y3", F, None)],
                                opset=23),
                          {"q": r(2, 4, 5, 8), "k": r(2, 4, 6, 8), "v": r(2, 4, 6, 8), "m": rng.random((5, 6)) > 0.3,
                           "q3": r(2, 5, 32), "k3": r(2, 5, 16), "v3": r(2, 5, 16)})
    return out

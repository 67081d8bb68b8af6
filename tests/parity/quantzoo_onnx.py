"""ONNX files for the quantized zoo (test_quantzoo.py), each run against onnxruntime on the same file:
small float models (quantzoo_models.py's nets and a transformer encoder) exported by torch.onnx at a
given opset and quantized by ``onnxruntime.quantization``: ``quantize_static`` in QDQ format (per
channel, opsets 13 and 19), in QOperator format, and ``quantize_dynamic``.

``quantized(name, d)`` writes the file for ``FILES[name]`` into directory ``d`` and gives its path.

int8 weights are quantized with ``reduce_range`` (7-bit): without VNNI (this AMD EPYC), MLAS adds pairs
of u8 x s8 products in saturating int16 where srcore sums exactly; 7-bit weights (ORT's own advice for
such CPUs) keep every pair in range, so the reference is the same on every CPU.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import torch
from torch import nn

import quantzoo_models as qz


class Encoder(nn.Module):
    """A one-layer transformer encoder written out: token embedding, q/k/v/out projections (MatMul with
    constant weights), scaled scores, softmax, layer norms, a GELU feed-forward, mean pooling, a head."""

    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, 8, d) * 0.1)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.head = nn.Linear(d, 3)

    def forward(self, ids):
        x = self.emb(ids) + self.pos
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5, -1)
        x = x + self.o((a @ v).transpose(1, 2).reshape(b, t, d))
        x = x + self.ff2(nn.functional.gelu(self.ff1(self.n2(x))))
        return self.head(x.mean(1))


class PoolNet(nn.Module):
    """Ops QOperator has own forms of: conv, LeakyReLU, average pool, sigmoid, concat, resize
    (nearest), global average pool, a Gemm."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.c3 = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = nn.functional.leaky_relu(self.c1(x), 0.1)
        z = nn.functional.avg_pool2d(y, 2)
        z = nn.functional.interpolate(torch.sigmoid(self.c2(z)), scale_factor=2.0, mode="nearest")
        y = self.c3(torch.cat([y, z], 1))
        return self.fc(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


class Tagger(nn.Module):
    """An LSTM tagger (onnxruntime's quantize_dynamic makes its LSTM a DynamicQuantizeLSTM)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


def image_feeds(seed: int, batch: int = 2, size: int = 16) -> dict:
    return {"x": np.random.default_rng(seed).standard_normal((batch, 3, size, size)).astype(np.float32)}


def token_feeds(seed: int, batch: int = 2) -> dict:
    return {"x": np.random.default_rng(seed).integers(0, 50, (batch, 8)).astype(np.int64)}


def seq_feeds(seed: int, batch: int = 2) -> dict:
    return {"x": np.random.default_rng(seed).standard_normal((batch, 5, 6)).astype(np.float32)}


#: float model -> (factory, example input shape or feeds function, feeds function)
_FLOAT = {
    "resnet": (qz.ResNetSmall, lambda s, b=2: image_feeds(s, b, 32)),
    "mobilenetv2": (qz.MobileNetV2Small, lambda s, b=2: image_feeds(s, b, 32)),
    "poolnet": (PoolNet, image_feeds),
    "encoder": (Encoder, token_feeds),
    "tagger": (Tagger, seq_feeds),
}

#: name -> (float model, opset, format ("QDQ", "QOperator" or "dynamic"), per_channel, activation type,
#: weight type, extra options)
FILES = {
    "qdq_resnet_opset13_channel": ("resnet", 13, "QDQ", True, "QUInt8", "QInt8", {}),
    "qdq_encoder_opset19_channel": ("encoder", 19, "QDQ", True, "QUInt8", "QInt8", {}),
    "qdq_poolnet_opset19_s8": ("poolnet", 19, "QDQ", True, "QInt8", "QInt8", {"ActivationSymmetric": True}),
    "qop_mobilenetv2": ("mobilenetv2", 13, "QOperator", True, "QUInt8", "QInt8", {}),
    "qop_poolnet": ("poolnet", 13, "QOperator", False, "QUInt8", "QInt8", {}),
    "dynamic_encoder": ("encoder", 17, "dynamic", True, None, "QInt8", {}),
    "dynamic_tagger": ("tagger", 17, "dynamic", False, None, "QInt8", {}),
}


def feeds(name: str, seed: int, batch: int = 2) -> dict:
    return _FLOAT[FILES[name][0]][1](seed, batch)


def _float_file(model: str, opset: int, d: str) -> str:
    f, p = os.path.join(d, f"{model}{opset}.onnx"), os.path.join(d, f"{model}{opset}-pre.onnx")
    if not os.path.exists(p):
        from onnxruntime.quantization import quant_pre_process

        factory, fd = _FLOAT[model]
        torch.manual_seed(11)
        x = torch.from_numpy(fd(0)["x"])
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(factory().eval(), (x,), f, dynamo=False, opset_version=opset, input_names=["x"],
                              dynamic_axes={"x": {0: "b"}})
        # the symbolic shape pass fails on the resize's scales; onnx's shape inference is enough here
        quant_pre_process(f, p, skip_symbolic_shape=True)
    return p


def quantized(name: str, d: str) -> str:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

    model, opset, fmt, per_channel, act, wt, extra = FILES[name]
    src, out = _float_file(model, opset, d), os.path.join(d, name + ".onnx")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([feeds(name, s) for s in range(4)])

        def get_next(self):
            return next(self.it, None)

    reduce_range = wt == "QInt8"   # int8 weights in 7 bits: see the module's docstring
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


def op_types(path: str) -> set:
    import onnx

    return {n.op_type for n in onnx.load(path).graph.node}

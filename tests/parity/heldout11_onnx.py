"""Hand-built ONNX files for the eleventh held-out zoo (test_heldout11_zoo.py): ops and attributes zoos
4-10 leave out, most of recent opsets: the window generators (HannWindow / HammingWindow /
BlackmanWindow, periodic and symmetric, int and float outputs, size 1) of opset 17 with a DFT-20
(axis as an input) log-spectrum front end; the training losses exporters write for evaluation
graphs (SoftmaxCrossEntropyLoss with weights, ignore_index and its log-prob output,
NegativeLogLikelihoodLoss on [N, C, d] inputs, every reduction); Det of a batch; AveragePool-19
with dilations and ceil_mode; Resize-19's ``half_pixel_symmetric``; GridSample-20 on 5-D volumes;
Pad-19 ``wrap`` with axes; Split-18 ``num_outputs`` that does not divide; Dropout with
``training_mode`` given as false; opset 21's shape ops (Shape start / end, Reshape ``allowzero`` on an
empty tensor, ConstantOfShape, Flatten on a negative axis, Size, Squeeze / Unsqueeze axes inputs). onnxruntime is the reference. ``REFUSED``: MelWeightMatrix,
DeformConv-19 and a window of a size known at run time only, which srcore refuses naming the node.

``CASES``: name -> (ModelProto, feeds, other feeds or None). Built at import (small).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h

from heldout4_onnx import c, model, vi

F, I64, B = T.FLOAT, T.INT64, T.BOOL
CASES = {}
rng = np.random.default_rng(11)


def _r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _i(*a):
    return np.array(a, np.int64)


# --- windows and mel filters (opset 17), a log-mel front end by DFT-20 --------------------------------
def _windows(n: int):
    return model([
        h.make_node("HannWindow", ["n"], ["hann"]),
        h.make_node("HannWindow", ["n"], ["hann_sym"], periodic=0),
        h.make_node("HammingWindow", ["n"], ["hamm"], output_datatype=T.DOUBLE),
        h.make_node("BlackmanWindow", ["n"], ["black_sym"], periodic=0),
        h.make_node("BlackmanWindow", ["n"], ["black_i"], output_datatype=T.INT32),
        h.make_node("Mul", ["x", "hann"], ["xw"]),
    ], [vi("x", F, ["b", n])], [vi("xw", F, None), vi("hann_sym", F, None), vi("hamm", T.DOUBLE, None),
                                vi("black_sym", F, None), vi("black_i", T.INT32, None)],
        [c("n", np.array(n, np.int64))], opset=17)


CASES["windows17"] = (_windows(10), {"x": _r(2, 10)}, {"x": _r(3, 10)})
CASES["windows17_size1"] = (_windows(1), {"x": _r(2, 1)}, None)

# frames [B, T, 16, 1] windowed, |rfft| over axis 2 (an input at opset 20), power, a filterbank, log
CASES["logspec_dft20"] = (model([
    h.make_node("HannWindow", ["n"], ["win"]),
    h.make_node("Reshape", ["win", "wshape"], ["w4"]),
    h.make_node("Mul", ["frames", "w4"], ["xw"]),
    h.make_node("DFT", ["xw", "", "axis"], ["spec"], onesided=1),
    h.make_node("Mul", ["spec", "spec"], ["sq"]),
    h.make_node("ReduceSum", ["sq", "last"], ["pow"], keepdims=0),
    h.make_node("MatMul", ["pow", "mel"], ["melspec"]),
    h.make_node("Add", ["melspec", "eps"], ["me"]),
    h.make_node("Log", ["me"], ["y"]),
], [vi("frames", F, ["b", "t", 16, 1])], [vi("y", F, None)],
    [c("n", np.array(16, np.int64)), c("wshape", _i(1, 1, 16, 1)), c("axis", np.array(2, np.int64)),
     c("last", _i(-1)), c("mel", np.abs(_r(9, 5))), c("eps", np.array(1e-6, np.float32))],
    opset=20), {"frames": _r(2, 3, 16, 1)}, {"frames": _r(1, 5, 16, 1)})

# DFT-20: the inverse of a complex input over axis 1, and a real input with a dft_length that pads
CASES["dft20_inverse_length"] = (model([
    h.make_node("DFT", ["x", "", "ax1"], ["inv"], inverse=1),
    h.make_node("DFT", ["r", "len", "ax1"], ["padded"]),
], [vi("x", F, [2, 6, 3, 2]), vi("r", F, [2, 5, 1])], [vi("inv", F, None), vi("padded", F, None)],
    [c("ax1", np.array(1, np.int64)), c("len", np.array(8, np.int64))], opset=20),
    {"x": _r(2, 6, 3, 2), "r": _r(2, 5, 1)}, None)

# --- losses --------------------------------------------------------------------------------------------
_labels = np.array([[0, 3, -1], [2, 2, 1]], np.int64)      # -1: ignored
for red in ("none", "mean", "sum"):
    CASES[f"softmax_ce13_{red}"] = (model([
        h.make_node("SoftmaxCrossEntropyLoss", ["x", "y", "w"], ["loss", "logp"], reduction=red, ignore_index=-1),
        h.make_node("SoftmaxCrossEntropyLoss", ["x", "y"], ["loss_nw"], reduction=red, ignore_index=-1),
    ], [vi("x", F, [2, 4, 3]), vi("y", I64, [2, 3])], [vi(o, F, None) for o in ("loss", "logp", "loss_nw")],
        [c("w", np.array([0.5, 1.0, 2.0, 0.25], np.float32))], opset=13),
        {"x": _r(2, 4, 3), "y": _labels}, {"x": _r(2, 4, 3), "y": np.array([[1, 1, 1], [3, -1, -1]], np.int64)})
    CASES[f"nll13_{red}"] = (model([
        h.make_node("NegativeLogLikelihoodLoss", ["x", "y", "w"], ["loss"], reduction=red, ignore_index=1),
    ], [vi("x", F, [2, 4, 3]), vi("y", I64, [2, 3])], [vi("loss", F, None)],
        [c("w", np.array([0.5, 1.0, 2.0, 0.25], np.float32))], opset=13),
        {"x": _r(2, 4, 3), "y": np.array([[0, 3, 1], [2, 2, 1]], np.int64)}, None)

# --- Det of a batch ------------------------------------------------------------------------------------
CASES["det_batch"] = (model([h.make_node("Det", ["x"], ["d"])], [vi("x", F, ["b", 3, 3])], [vi("d", F, None)], opset=13),
                      {"x": _r(4, 3, 3)}, {"x": np.stack([np.eye(3, dtype=np.float32), _r(3, 3)])})

# --- pooling, resizing, sampling ----------------------------------------------------------------------
CASES["avgpool19_dilations"] = (model([
    h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], dilations=[2, 2], strides=[1, 2], pads=[1, 0, 1, 1]),
    h.make_node("AveragePool", ["x"], ["yc"], kernel_shape=[2, 2], dilations=[1, 2], strides=[2, 2], ceil_mode=1,
                count_include_pad=1, pads=[1, 1, 0, 0]),
], [vi("x", F, ["b", 2, 7, 8])], [vi("y", F, None), vi("yc", F, None)], opset=19),
    {"x": _r(2, 2, 7, 8)}, {"x": _r(1, 2, 7, 8)})

CASES["resize19_half_pixel_symmetric"] = (model([
    h.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", coordinate_transformation_mode="half_pixel_symmetric"),
    h.make_node("Resize", ["x", "", "", "sizes"], ["yn"], mode="nearest",
                coordinate_transformation_mode="half_pixel_symmetric", nearest_mode="floor"),
], [vi("x", F, [1, 2, 5, 6])], [vi("y", F, None), vi("yn", F, None)],
    [c("scales", np.array([1, 1, 1.7, 0.6], np.float32)), c("sizes", _i(1, 2, 8, 4))], opset=19),
    {"x": _r(1, 2, 5, 6)}, None)

CASES["gridsample20_volumetric"] = (model([
    h.make_node("GridSample", ["x", "g"], ["lin"], mode="linear", align_corners=0, padding_mode="border"),
    h.make_node("GridSample", ["x", "g"], ["near"], mode="nearest", align_corners=1, padding_mode="zeros"),
], [vi("x", F, [2, 3, 4, 5, 6]), vi("g", F, [2, 3, 2, 4, 3])], [vi("lin", F, None), vi("near", F, None)], opset=20),
    {"x": _r(2, 3, 4, 5, 6), "g": (rng.uniform(-1.2, 1.2, (2, 3, 2, 4, 3))).astype(np.float32)}, None)

CASES["pad19_wrap_axes"] = (model([
    h.make_node("Pad", ["x", "p", "", "axes"], ["y"], mode="wrap"),
    h.make_node("Pad", ["x", "p", "", "axes"], ["e"], mode="edge"),
], [vi("x", F, ["b", 3, 5])], [vi("y", F, None), vi("e", F, None)],
    [c("p", _i(2, 1, 0, 4)), c("axes", _i(-1, 1))], opset=19),
    {"x": _r(2, 3, 5)}, {"x": _r(4, 3, 5)})

CASES["split18_num_outputs"] = (model([
    h.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3),
    h.make_node("Split", ["x"], ["d", "e"], axis=-1, num_outputs=2),
], [vi("x", F, [2, 7, 5])], [vi(o, F, None) for o in "abcde"], opset=18),
    {"x": _r(2, 7, 5)}, None)

CASES["dropout13_inference"] = (model([
    h.make_node("Dropout", ["x", "ratio", "train"], ["y", "m"]),
], [vi("x", F, [3, 4])], [vi("y", F, None), vi("m", B, None)],
    [c("ratio", np.array(0.3, np.float32)), c("train", np.array(False))], opset=13),
    {"x": _r(3, 4)}, None)

# 2-D scores, no ignore_index, int32 targets: the plain mean
CASES["softmax_ce13_2d_int32"] = (model([
    h.make_node("SoftmaxCrossEntropyLoss", ["x", "y"], ["loss", "logp"]),
], [vi("x", F, ["n", 5]), vi("y", T.INT32, ["n"])], [vi("loss", F, None), vi("logp", F, None)], opset=13),
    {"x": _r(4, 5), "y": np.array([0, 4, 2, 2], np.int32)}, {"x": _r(2, 5), "y": np.array([1, 3], np.int32)})


# --- what srcore does not run: refused naming the node (onnxruntime 1.32 has no MelWeightMatrix) --------
#: name -> (ModelProto, the error's pattern)
REFUSED = {
    "melweight17": (model([h.make_node("MelWeightMatrix", ["bins", "dft", "rate", "lo", "hi"], ["mel"], name="mel")],
                          [vi("bins", I64, []), vi("dft", I64, []), vi("rate", I64, []), vi("lo", F, []),
                           vi("hi", F, [])], [vi("mel", F, None)], opset=17),
                    r"MelWeightMatrix node 'mel': op not supported by srcore"),
    "deformconv19": (model([h.make_node("DeformConv", ["x", "w", "off"], ["y"], kernel_shape=[3, 3], name="dcn")],
                           [vi("x", F, [1, 4, 5, 6]), vi("off", F, [1, 18, 3, 4])], [vi("y", F, None)],
                           [c("w", _r(3, 4, 3, 3))], opset=19),
                     r"DeformConv node 'dcn': op not supported by srcore"),
    "window_size_an_input": (model([h.make_node("HannWindow", ["n"], ["w"], name="win")], [vi("n", I64, [])],
                                   [vi("w", F, None)], opset=17),
                             r"HannWindow node 'win': input 0 \(size\) must be a constant"),
}

# --- opset 21: shape ops with their newest attributes -------------------------------------------------
# Shape with negative start / end, Reshape allowzero=1 (a 0 in the shape is a real 0-length dim, fed an
# empty batch) and allowzero=0 (0 copies the input's dim), ConstantOfShape of an int64 value, Flatten on
# a negative axis, Size, Squeeze with axes as an input
CASES["shape_ops21"] = (model([
    h.make_node("Shape", ["x"], ["s"], start=-2, end=-1),
    h.make_node("ConstantOfShape", ["s"], ["k"], value=h.make_tensor("v", I64, [1], [7])),
    h.make_node("Reshape", ["x", "shp0"], ["r0"], allowzero=0),
    h.make_node("Flatten", ["x"], ["f"], axis=-2),
    h.make_node("Size", ["x"], ["n"]),
    h.make_node("Unsqueeze", ["x", "ax"], ["u"]),
    h.make_node("Squeeze", ["u", "ax"], ["sq"]),
    h.make_node("Reshape", ["e", "shpz"], ["rz"], allowzero=1),
], [vi("x", F, ["b", 3, 4]), vi("e", F, [0, 6])], [vi(o, t, None) for o, t in (("k", I64), ("r0", F), ("f", F), ("n", I64),
                                                                             ("sq", F), ("rz", F))],
    [c("shp0", _i(0, -1)), c("ax", _i(-1)), c("shpz", _i(0, 2, 3))], opset=21),
    {"x": _r(2, 3, 4), "e": np.zeros((0, 6), np.float32)}, {"x": _r(5, 3, 4), "e": np.zeros((0, 6), np.float32)})

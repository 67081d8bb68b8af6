"""Hand-built ONNX files for the sixth held-out zoo (test_heldout6_zoo.py): normalisations at their
newest opsets (RMSNormalization 23, LayerNormalization with its Mean/InvStdDev outputs,
GroupNormalization 21), QDQ-quantized graphs (per-channel int8 Conv, uint8 MatMul, int4-free block
quantisation at opset 21, QuantizeLinear with saturating output dtypes), GatherND/ScatterND with
batch dims and reductions, TopK smallest with ties, NonMaxSuppression, RoiAlign, Einsum forms, If
with branch-local initializers, Loop with scan outputs; onnxruntime is the reference.

``CASES``: name -> (ModelProto, feeds). Built at import (small).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h

from heldout4_onnx import c, model, vi

F = T.FLOAT
CASES = {}
rng = np.random.default_rng(6)


def _r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


x345 = _r(3, 4, 5)
img = _r(2, 4, 5, 6)

# --- normalisations ------------------------------------------------------------------------------
CASES["rmsnorm23_axis_neg2"] = (model([h.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-2, epsilon=1e-3)],
                                      [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("s", _r(4, 5))], opset=23),
                                {"x": x345})
CASES["rmsnorm23_default"] = (model([h.make_node("RMSNormalization", ["x", "s"], ["y"])],
                                    [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("s", _r(5))], opset=23), {"x": x345})
CASES["layernorm_three_outputs"] = (model([h.make_node("LayerNormalization", ["x", "s", "b"], ["y", "m", "r"], axis=-1)],
                                          [vi("x", F, [3, 4, 5])], [vi("y", F, None), vi("m", F, None), vi("r", F, None)],
                                          [c("s", _r(5)), c("b", _r(5))], opset=17), {"x": x345})
CASES["layernorm_no_bias_axis0"] = (model([h.make_node("LayerNormalization", ["x", "s"], ["y"], axis=0, epsilon=1e-2)],
                                          [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("s", _r(3, 4, 5))], opset=17),
                                    {"x": x345})
CASES["groupnorm21_per_channel"] = (model([h.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-3)],
                                          [vi("x", F, [2, 4, 5, 6])], [vi("y", F, [2, 4, 5, 6])], [c("s", _r(4)), c("b", _r(4))],
                                          opset=21), {"x": img})

# --- QDQ quantization --------------------------------------------------------------------------
wconv = _r(6, 4, 3, 3)
# 7-bit weights: without VNNI onnxruntime adds pairs of uint8 x int8 products in saturating int16, where
# srcore sums exactly; within 7 bits no pair can saturate, so the result is the same on every CPU
wscale = (np.abs(wconv).reshape(6, -1).max(1) / 63).astype(np.float32)
wq = np.clip(np.round(wconv / wscale[:, None, None, None]), -63, 63).astype(np.int8)
CASES["qdq_conv_per_channel13"] = (model([
    h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
    h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
    h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
    h.make_node("Conv", ["xd", "wd", "b"], ["y"], pads=[1, 1, 1, 1]),
    h.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
    h.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])],
    [vi("x", F, [2, 4, 5, 6])], [vi("out", F, None)],
    [c("xs", np.float32(0.02)), c("xz", np.uint8(128)), c("wq", wq), c("ws", wscale), c("wz", np.zeros(6, np.int8)),
     c("b", _r(6)), c("ys", np.float32(0.05)), c("yz", np.uint8(120))], opset=13), {"x": img})
CASES["qdq_matmul_uint8_int8_21"] = (model([
    h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
    h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
    h.make_node("DequantizeLinear", ["wq", "ws"], ["wd"], axis=1),
    h.make_node("MatMul", ["xd", "wd"], ["y"]),
    h.make_node("QuantizeLinear", ["y", "ys", "yz"], ["out"])],
    [vi("x", F, [3, 4, 5])], [vi("out", T.INT8, None)],
    [c("xs", np.float32(0.03)), c("xz", np.uint8(100)), c("wq", rng.integers(-120, 120, (5, 7)).astype(np.int8)),
     c("ws", (rng.random(7) * 0.01 + 0.001).astype(np.float32)), c("ys", np.float32(0.01)), c("yz", np.int8(-3))],
    opset=21), {"x": x345})
CASES["quantize21_blocked_uint8"] = (model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=2, block_size=2)],
                                           [vi("x", F, [3, 4, 5])], [vi("q", T.UINT8, None)],
                                           [c("s", (rng.random((3, 4, 3)) * 0.02 + 0.005).astype(np.float32)),
                                            c("z", rng.integers(100, 150, (3, 4, 3)).astype(np.uint8))], opset=21),
                                     {"x": x345})
CASES["quantize_int16_axis"] = (model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
                                       h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
                                      [vi("x", F, [3, 4, 5])], [vi("q", T.INT16, None), vi("y", F, None)],
                                      [c("s", np.array([1e-4, 2e-4, 5e-5, 1e-3], np.float32)),
                                       c("z", np.array([0, -5, 7, 100], np.int16))], opset=21), {"x": x345})

# --- gathers and scatters --------------------------------------------------------------------------
CASES["gathernd_b2"] = (model([h.make_node("GatherND", ["x", "i"], ["y"], batch_dims=2)],
                              [vi("x", F, [2, 3, 4, 5]), vi("i", T.INT64, [2, 3, 2, 1])], [vi("y", F, None)]),
                        {"x": _r(2, 3, 4, 5), "i": rng.integers(-4, 4, (2, 3, 2, 1)).astype(np.int64)})
for red in ("mul", "min", "max"):
    CASES[f"scatternd_{red}_slices"] = (model([h.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=red)],
                                              [vi("x", F, [4, 3, 5]), vi("i", T.INT64, [3, 2]), vi("u", F, [3, 5])],
                                              [vi("y", F, None)]),
                                        {"x": _r(4, 3, 5), "i": np.array([[1, 2], [3, 0], [1, 2]], np.int64),
                                         "u": _r(3, 5)})
CASES["topk_smallest_ties"] = (model([h.make_node("TopK", ["x", "k"], ["v", "i"], largest=0, axis=-1, sorted=1)],
                                     [vi("x", F, [3, 6])], [vi("v", F, None), vi("i", T.INT64, None)],
                                     [c("k", np.array([4], np.int64))]),
                               {"x": np.array([[1, 0, 1, 0, 2, 0], [3, 3, 3, 3, 3, 3], [5, -1, 4, -1, 4, 2]], np.float32)})

# --- detection ---------------------------------------------------------------------------------
boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                   [0, 100, 1, 101]]], np.float32)
scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.8, 0.7, 0.2, 0.6, 0.9]]], np.float32)
CASES["nms_two_classes"] = (model([h.make_node("NonMaxSuppression", ["b", "s", "m", "iou", "st"], ["sel"])],
                                  [vi("b", F, [1, 6, 4]), vi("s", F, [1, 2, 6])], [vi("sel", T.INT64, None)],
                                  [c("m", np.array([2], np.int64)), c("iou", np.array([0.5], np.float32)),
                                   c("st", np.array([0.25], np.float32))], opset=11), {"b": boxes, "s": scores})
CASES["nms_center_point"] = (model([h.make_node("NonMaxSuppression", ["b", "s", "m", "iou"], ["sel"], center_point_box=1)],
                                   [vi("b", F, [1, 6, 4]), vi("s", F, [1, 2, 6])], [vi("sel", T.INT64, None)],
                                   [c("m", np.array([3], np.int64)), c("iou", np.array([0.4], np.float32))], opset=11),
                             {"b": np.abs(boxes) + np.array([0, 0, 1, 1], np.float32), "s": scores})
rois = np.array([[0.5, 0.5, 3.5, 4.0], [1.0, 0.0, 5.5, 4.5], [0.0, 1.5, 2.0, 2.5]], np.float32)
for mode, ctm in (("avg", "half_pixel"), ("max", "output_half_pixel"), ("avg", "output_half_pixel")):
    CASES[f"roialign_{mode}_{ctm}"] = (model([h.make_node("RoiAlign", ["x", "r", "bi"], ["y"], mode=mode, output_height=2,
                                                          output_width=3, sampling_ratio=2, spatial_scale=0.5,
                                                          coordinate_transformation_mode=ctm)],
                                             [vi("x", F, [2, 4, 5, 6]), vi("r", F, [3, 4])], [vi("y", F, None)],
                                             [c("bi", np.array([0, 1, 1], np.int64))], opset=16),
                                       {"x": img, "r": rois * 2})

# --- Einsum ----------------------------------------------------------------------------------------
CASES["einsum_attention"] = (model([h.make_node("Einsum", ["q", "k"], ["y"], equation="bhid,bhjd->bhij")],
                                   [vi("q", F, [2, 2, 3, 4]), vi("k", F, [2, 2, 5, 4])], [vi("y", F, None)], opset=12),
                             {"q": _r(2, 2, 3, 4), "k": _r(2, 2, 5, 4)})
CASES["einsum_transpose_sum_dot"] = (model([h.make_node("Einsum", ["a"], ["t"], equation="ij->ji"),
                                            h.make_node("Einsum", ["a"], ["s"], equation="ij->"),
                                            h.make_node("Einsum", ["v", "v"], ["d"], equation="i,i")],
                                           [vi("a", F, [3, 4]), vi("v", F, [5])],
                                           [vi("t", F, None), vi("s", F, None), vi("d", F, None)], opset=12),
                                     {"a": _r(3, 4), "v": _r(5)})
CASES["einsum_bilinear_three"] = (model([h.make_node("Einsum", ["x", "w", "y"], ["o"], equation="bi,oij,bj->bo")],
                                        [vi("x", F, [2, 3]), vi("w", F, [4, 3, 5]), vi("y", F, [2, 5])], [vi("o", F, None)],
                                        opset=12), {"x": _r(2, 3), "w": _r(4, 3, 5), "y": _r(2, 5)})

# --- control flow --------------------------------------------------------------------------------
then_g = h.make_graph([h.make_node("Mul", ["x", "two"], ["t"])], "then", [], [vi("t", F, [3, 4, 5])],
                      [c("two", np.float32(2.0))])
else_g = h.make_graph([h.make_node("Sub", ["x", "one"], ["e"])], "else", [], [vi("e", F, [3, 4, 5])],
                      [c("one", np.float32(1.0))])
CASES["if_branch_initializers"] = (model([h.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
                                          h.make_node("Greater", ["m", "z"], ["cnd"]),
                                          h.make_node("If", ["cnd"], ["y"], then_branch=then_g, else_branch=else_g)],
                                         [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("z", np.float32(1.5))]),
                                   {"x": x345})
lbody = h.make_graph([h.make_node("Add", ["acc", "x"], ["acc2"]),
                      h.make_node("Cast", ["i"], ["fi"], to=F),
                      h.make_node("Mul", ["acc2", "fi"], ["scan_out"]),
                      h.make_node("Identity", ["c"], ["c2"])], "body",
                     [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("acc", F, [2, 3])],
                     [vi("c2", T.BOOL, []), vi("acc2", F, [2, 3]), vi("scan_out", F, [2, 3])])
CASES["loop_scan_outputs_outer_ref"] = (model([h.make_node("Loop", ["n", "cond", "a0"], ["acc", "stack"], body=lbody)],
                                              [vi("x", F, [2, 3]), vi("a0", F, [2, 3])],
                                              [vi("acc", F, [2, 3]), vi("stack", F, [4, 2, 3])],
                                              [c("n", np.array(4, np.int64)), c("cond", np.array(True))]),
                                        {"x": _r(2, 3), "a0": _r(2, 3)})

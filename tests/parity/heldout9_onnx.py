"""Hand-built ONNX files for the ninth held-out zoo (test_heldout9_zoo.py): the idioms zoos 4-8 leave
out. Old opsets as old exporters wrote them (opset 7 attributes; Softmax / LogSoftmax / Hardmax at
opset 11, which work on the input flattened to 2-D); tf2onnx's ``tf_half_pixel_for_nn`` Resize;
Loops written as ``while`` loops (no trip count, a carried tensor that grows, scan outputs, a
run of no iteration), a Loop appending to a sequence (torch's list idiom), an If inside a Loop
reading values two scopes up; ScatterND / ScatterElements reductions of opset 18; RoiAlign-16's
coordinate modes; antialiased Resize-18; int4 / uint4 and float8 quantization; GridSample-16
bicubic / nearest; variadic Mean / Max / Min / Sum broadcasting; LayerNormalization on axis -2
with its three outputs; DynamicQuantizeLinear -> MatMulInteger and ConvInteger (onnxruntime's
``quantize_dynamic``); Range / EyeLike / Trilu with a k input; MaxPool indices of a dynamic batch,
MaxUnpool; model-local functions with attribute references; TopK of a run-time K feeding
NonMaxSuppression. onnxruntime is the reference.

``CASES``: name -> (ModelProto, feeds, other feeds or None). Built at import (small).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h

from heldout4_onnx import c, model, vi

F, I64, B = T.FLOAT, T.INT64, T.BOOL
CASES = {}
rng = np.random.default_rng(9)


def _r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _i(*a):
    return np.array(a, np.int64)


# --- opset 11: Softmax, LogSoftmax and Hardmax on the input flattened at axis 1 ------------------------
# (onnx's version converter coerces the first two for opset 13 and not Hardmax: srcore gave a one-hot per
# row of the last axis instead of per [C*W] slab)
CASES["softmax_family11_coerced"] = (model([
    h.make_node("Softmax", ["x"], ["y"], axis=1), h.make_node("LogSoftmax", ["x"], ["ly"]),
    h.make_node("Hardmax", ["x"], ["hy"], axis=1), h.make_node("Hardmax", ["x"], ["hz"], axis=-1),
    h.make_node("Hardmax", ["x"], ["hd"])],   # axis 1 by default before opset 13
    [vi("x", F, ["N", 3, 4])], [vi(n, F, None) for n in ("y", "ly", "hy", "hz", "hd")], opset=11),
    {"x": _r(2, 3, 4)}, {"x": _r(3, 3, 4)})

# --- opset 7: attributes where later opsets take inputs ----------------------------------------------
CASES["opset7_attributes"] = (model([
    h.make_node("TopK", ["x"], ["v", "i"], k=2, axis=1),
    h.make_node("Pad", ["x"], ["p"], pads=[0, 1, 0, 2], value=1.5),
    h.make_node("Clip", ["x"], ["cl"], min=-0.5, max=0.5),
    h.make_node("Split", ["x"], ["s1", "s2"], axis=1, split=[1, 3]),
    h.make_node("Unsqueeze", ["s1"], ["u"], axes=[0]),
    h.make_node("Slice", ["x"], ["sl"], starts=[1], ends=[3], axes=[1]),
    h.make_node("BatchNormalization", ["x4", "bs", "bb", "bm", "bv"], ["bn"], epsilon=1e-3),
    h.make_node("Dropout", ["x"], ["d"], ratio=0.3),
    h.make_node("Upsample", ["x4"], ["up"], scales=[1., 1., 2., 3.], mode="nearest"),
    h.make_node("ReduceMean", ["x"], ["rm"], axes=[1], keepdims=0),
    h.make_node("Flatten", ["x4"], ["fl"], axis=2),
    h.make_node("Gemm", ["x", "gw", "gc"], ["gm"], transB=1, alpha=0.5, beta=2.0)],
    [vi("x", F, [3, 4]), vi("x4", F, [1, 2, 2, 3])],
    [vi("v", F, None), vi("i", I64, None)] + [vi(n, F, None) for n in ("p", "cl", "s2", "u", "sl", "bn", "d", "up",
                                                                       "rm", "fl", "gm")],
    [c("bs", _r(2)), c("bb", _r(2)), c("bm", _r(2)), c("bv", np.abs(_r(2)) + 0.5), c("gw", _r(5, 4)), c("gc", _r(5))],
    opset=7),
    {"x": _r(3, 4), "x4": _r(1, 2, 2, 3)}, None)

# --- tf2onnx's nearest resize: tf_half_pixel_for_nn (opset 11) ------------------------------------------
CASES["resize_tf_half_pixel_for_nn11"] = (model([
    h.make_node("Resize", ["x", "roi", "sc"], ["a"], mode="nearest",
                coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode="floor"),
    h.make_node("Resize", ["x", "roi", "roi", "sz"], ["b"], mode="nearest",
                coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode="round_prefer_ceil")],
    [vi("x", F, [1, 2, 5, 6])], [vi("a", F, None), vi("b", F, None)],
    [c("roi", np.zeros(0, np.float32)), c("sc", np.array([1, 1, 1.5, 0.7], np.float32)), c("sz", _i(1, 2, 3, 13))],
    opset=11),
    {"x": _r(1, 2, 5, 6)}, None)

# --- a while loop: no trip count, a carried tensor growing by a row each pass, a scan output ------------
_grow = h.make_graph([
    h.make_node("Concat", ["acc_in", "row"], ["acc_out"], axis=0),
    h.make_node("ReduceSum", ["acc_out"], ["tot"], keepdims=0),
    h.make_node("Less", ["tot", "lim"], ["cond_out"]),
    h.make_node("Identity", ["tot"], ["scan_tot"])], "body",
    [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [None, 3])],
    [vi("cond_out", B, []), vi("acc_out", F, [None, 3]), vi("scan_tot", F, [])])
CASES["loop_while_growing"] = (model(
    [h.make_node("Loop", ["", "c0", "acc0"], ["acc", "tots"], body=_grow)],
    [vi("acc0", F, ["K", 3]), vi("row", F, [1, 3])], [vi("acc", F, ["M", 3]), vi("tots", F, ["L"])],
    [c("c0", np.array(True)), c("lim", np.float32(20.0))], opset=13),
    {"acc0": np.ones((1, 3), np.float32), "row": np.full((1, 3), 0.7, np.float32)},
    {"acc0": np.ones((2, 3), np.float32), "row": np.full((1, 3), 2.5, np.float32)})

# --- a Loop appending to a sequence (torch.onnx's list append) ---------------------------------------
_seq_body = h.make_graph([
    h.make_node("Gather", ["x", "i"], ["row"], axis=0),
    h.make_node("Mul", ["row", "row"], ["sq"]),
    h.make_node("SequenceInsert", ["seq_in", "sq"], ["seq_out"]),
    h.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
    [vi("i", I64, []), vi("cond_in", B, []), h.make_tensor_sequence_value_info("seq_in", F, None)],
    [vi("cond_out", B, []), h.make_tensor_sequence_value_info("seq_out", F, None)])
CASES["loop_sequence_append"] = (model([
    h.make_node("SequenceEmpty", [], ["s0"], dtype=F),
    h.make_node("Shape", ["x"], ["xs"], start=0, end=1),
    h.make_node("Squeeze", ["xs", "ax0"], ["n"]),
    h.make_node("Loop", ["n", "t", "s0"], ["sf"], body=_seq_body),
    h.make_node("ConcatFromSequence", ["sf"], ["y"], axis=0, new_axis=1),
    h.make_node("SequenceAt", ["sf", "m1"], ["last"]),
    h.make_node("SequenceLength", ["sf"], ["ln"])],
    [vi("x", F, ["N", 3])], [vi("y", F, ["N", 3]), vi("last", F, [3]), vi("ln", I64, [])],
    [c("t", np.array(True)), c("ax0", _i(0)), c("m1", np.int64(-1))], opset=15),
    {"x": _r(4, 3)}, {"x": _r(2, 3)})

# --- an If inside a Loop reading the loop's carried value and the graph's initializers; zero trips ------
_then = h.make_graph([h.make_node("Add", ["acc_in", "w"], ["o"])], "then", [], [vi("o", F, [3])])
_else = h.make_graph([h.make_node("Sub", ["acc_in", "xrow"], ["o2"])], "else", [], [vi("o2", F, [3])])
_if_body = h.make_graph([
    h.make_node("Gather", ["x", "i"], ["xrow"], axis=0),
    h.make_node("ReduceSum", ["xrow"], ["s"], keepdims=0),
    h.make_node("Greater", ["s", "zero"], ["pos"]),
    h.make_node("If", ["pos"], ["acc_out"], then_branch=_then, else_branch=_else),
    h.make_node("Identity", ["cond_in"], ["cond_out"]),
    h.make_node("Identity", ["acc_out"], ["trace"])], "body",
    [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [3])],
    [vi("cond_out", B, []), vi("acc_out", F, [3]), vi("trace", F, [3])])
CASES["loop_if_outer_scope_zero_trips"] = (model(
    [h.make_node("Loop", ["n", "", "a0"], ["af", "tr"], body=_if_body)],
    [vi("x", F, ["N", 3]), vi("n", I64, [])], [vi("af", F, [3]), vi("tr", F, ["K", 3])],
    [c("a0", np.zeros(3, np.float32)), c("w", _r(3)), c("zero", np.float32(0))], opset=13),
    {"x": _r(5, 3), "n": np.array(4, np.int64)}, {"x": _r(2, 3), "n": np.array(0, np.int64)})

# --- ScatterND / ScatterElements reductions (opset 18), duplicate indices ------------------------------
CASES["scatter_reductions18"] = (model(
    [h.make_node("ScatterND", ["x", "idx", "u"], [f"nd_{r}"], reduction=r) for r in ("mul", "min", "max", "add")]
    + [h.make_node("ScatterElements", ["x", "eidx", "eu"], [f"el_{r}"], axis=1, reduction=r) for r in ("mul", "min")],
    [vi("x", F, [4, 3]), vi("u", F, [3, 3]), vi("eu", F, [4, 2])],
    [vi(f"nd_{r}", F, None) for r in ("mul", "min", "max", "add")] + [vi(f"el_{r}", F, None) for r in ("mul", "min")],
    [c("idx", _i([0], [2], [0])), c("eidx", _i([0, 0], [2, 1], [1, 1], [0, 2]))], opset=18),
    {"x": _r(4, 3), "u": _r(3, 3), "eu": _r(4, 2)}, None)

# --- RoiAlign-16: both coordinate modes, avg and max (sampling ratio 1: onnxruntime's max with a
# larger ratio is documented as not the spec's) ----------------------------------------------------------
CASES["roialign16_modes"] = (model(
    [h.make_node("RoiAlign", ["x", "rois", "bi"], [f"y_{m}_{k}"], mode=m, output_height=3, output_width=2,
                 sampling_ratio=1 if m == "max" else 2, spatial_scale=0.5, coordinate_transformation_mode=k)
     for m in ("avg", "max") for k in ("half_pixel", "output_half_pixel")],
    [vi("x", F, [2, 3, 8, 8]), vi("rois", F, ["R", 4])],
    [vi(f"y_{m}_{k}", F, None) for m in ("avg", "max") for k in ("half_pixel", "output_half_pixel")],
    [c("bi", _i(0, 1, 1))], opset=16),
    {"x": _r(2, 3, 8, 8), "rois": np.array([[1, 1, 9, 7], [0, 2, 14, 14], [3.5, 0.5, 6, 12]], np.float32)}, None)

# --- antialiased Resize-18 (downscaling), keep_aspect_ratio_policy not_smaller --------------------------
CASES["resize_antialias18"] = (model([
    h.make_node("Resize", ["x", "", "sc"], ["a"], mode="linear", antialias=1),
    h.make_node("Resize", ["x", "", "sc"], ["b"], mode="cubic", antialias=1, cubic_coeff_a=-0.5),
    h.make_node("Resize", ["x", "", "", "sz"], ["k"], mode="nearest", keep_aspect_ratio_policy="not_smaller",
                axes=[2, 3])],
    [vi("x", F, [1, 2, 8, 9])], [vi("a", F, None), vi("b", F, None), vi("k", F, None)],
    [c("sc", np.array([1, 1, 0.5, 0.4], np.float32)), c("sz", _i(5, 5))], opset=18),
    {"x": _r(1, 2, 8, 9)}, None)

# --- int4 / uint4 weights (blocked and per-axis DequantizeLinear-21), float8 cast and QDQ (opset 19) -----
_w4 = rng.integers(-8, 8, (4, 8)).astype(np.int8)
_u4 = rng.integers(0, 16, (6, 4)).astype(np.uint8)
CASES["int4_blocked_weights21"] = (model([
    h.make_node("DequantizeLinear", ["w4", "s4"], ["wd"], axis=1, block_size=4),
    h.make_node("MatMul", ["x", "wd"], ["y"]),
    h.make_node("DequantizeLinear", ["u4", "s4b", "z4"], ["ud"], axis=0),
    h.make_node("MatMul", ["ud", "xt"], ["z"])],
    [vi("x", F, ["N", 4]), vi("xt", F, [4, "M"])], [vi("y", F, None), vi("z", F, None)],
    [h.make_tensor("w4", T.INT4, [4, 8], _w4.flatten().tolist()),
     c("s4", (rng.random((4, 2)) * 0.1 + 0.01).astype(np.float32)),
     h.make_tensor("u4", T.UINT4, [6, 4], _u4.flatten().tolist()), c("s4b", (rng.random(6) * 0.1).astype(np.float32)),
     h.make_tensor("z4", T.UINT4, [6], [8, 7, 8, 9, 0, 15])], opset=21),
    {"x": _r(3, 4), "xt": _r(4, 2)}, {"x": _r(1, 4), "xt": _r(4, 5)})
CASES["float8_cast_qdq19"] = (model([
    h.make_node("Cast", ["x"], ["f8"], to=T.FLOAT8E4M3FN), h.make_node("Cast", ["f8"], ["y"], to=F),
    h.make_node("Cast", ["x"], ["e5"], to=T.FLOAT8E5M2, saturate=0), h.make_node("Cast", ["e5"], ["y5"], to=F),
    h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), h.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"])],
    [vi("x", F, ["N", 4])], [vi("y", F, None), vi("y5", F, None), vi("dq", F, None)],
    [c("s", np.float32(0.05)), h.make_tensor("z", T.FLOAT8E4M3FN, [], [0])], opset=19),
    {"x": _r(3, 4) * 10}, {"x": _r(2, 4) * 300})

# --- GridSample-16: bicubic + reflection, nearest + border with align_corners ---------------------------
CASES["gridsample16_bicubic_nearest"] = (model([
    h.make_node("GridSample", ["x", "g"], ["a"], mode="bicubic", padding_mode="reflection", align_corners=0),
    h.make_node("GridSample", ["x", "g"], ["b"], mode="nearest", padding_mode="border", align_corners=1),
    h.make_node("GridSample", ["x", "g"], ["d"], mode="bicubic", padding_mode="border", align_corners=1)],
    [vi("x", F, ["N", 2, 5, 6]), vi("g", F, ["N", 3, 4, 2])], [vi(n, F, None) for n in ("a", "b", "d")], opset=16),
    {"x": _r(2, 2, 5, 6), "g": (rng.random((2, 3, 4, 2)) * 2.6 - 1.3).astype(np.float32)},
    {"x": _r(1, 2, 5, 6), "g": (rng.random((1, 3, 4, 2)) * 2.6 - 1.3).astype(np.float32)})

# --- variadic Mean / Max / Min / Sum broadcasting three ranks; LayerNormalization on axis -2 -------------
CASES["variadic_layernorm_m2"] = (model([
    h.make_node("Mean", ["a", "b", "c"], ["m"]), h.make_node("Max", ["a", "b", "c"], ["mx"]),
    h.make_node("Min", ["c", "a"], ["mn"]), h.make_node("Sum", ["a", "b", "c", "a"], ["s"]),
    h.make_node("Sum", ["b"], ["s1"]),
    h.make_node("LayerNormalization", ["x", "sc", "bias"], ["y", "mean", "istd"], axis=-2, epsilon=1e-3)],
    [vi("a", F, ["N", 1, 4]), vi("b", F, [3, 1]), vi("c", F, [4]), vi("x", F, ["N", 3, 4])],
    [vi(n, F, None) for n in ("m", "mx", "mn", "s", "s1", "y", "mean", "istd")],
    [c("sc", _r(3, 4)), c("bias", _r(4))], opset=17),
    {"a": _r(2, 1, 4), "b": _r(3, 1), "c": _r(4), "x": _r(2, 3, 4)},
    {"a": _r(1, 1, 4), "b": _r(3, 1), "c": _r(4), "x": _r(1, 3, 4)})

# --- onnxruntime's quantize_dynamic: DynamicQuantizeLinear -> MatMulInteger, ConvInteger ---------------
CASES["dynamic_quant_integer_ops"] = (model([
    h.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
    h.make_node("MatMulInteger", ["xq", "wq", "xz", "wz"], ["acc"]),
    h.make_node("Cast", ["acc"], ["accf"], to=F), h.make_node("Mul", ["xs", "ws"], ["sc"]),
    h.make_node("Mul", ["accf", "sc"], ["y0"]), h.make_node("Add", ["y0", "b"], ["y"]),
    h.make_node("ConvInteger", ["xq4", "cw", "xz4"], ["ci"], pads=[1, 1, 1, 1])],
    [vi("x", F, ["N", 6]), vi("xq4", T.UINT8, [1, 2, 4, 4]), vi("xz4", T.UINT8, [])],
    [vi("y", F, None), vi("ci", T.INT32, None)],
    # weights halved to |w| <= 64 (same draws): onnxruntime's AVX2 u8s8 kernels (no VNNI) add pairs of
    # products in saturating int16, which full-range uint8 activations times full-range weights overflow
    # (srcore is exact); on this AMD EPYC 3 of 20 outputs differed with full-range weights
    [c("wq", (rng.integers(-128, 127, (6, 5)) // 2).astype(np.int8)), c("wz", np.int8(0)), c("ws", np.float32(0.02)),
     c("b", _r(5)), c("cw", rng.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8))], opset=11),
    {"x": _r(4, 6), "xq4": rng.integers(0, 255, (1, 2, 4, 4)).astype(np.uint8), "xz4": np.array(100, np.uint8)},
    {"x": _r(2, 6) * 5, "xq4": rng.integers(0, 255, (1, 2, 4, 4)).astype(np.uint8), "xz4": np.array(3, np.uint8)})

# --- Range with a negative float step, EyeLike with k, Trilu lower with k as input; MaxPool's Indices
# and MaxUnpool of a dynamic batch (srcore refused both: 'needs the input's shape known') -------------
CASES["range_eyelike_trilu_maxpool_indices"] = (model([
    h.make_node("Range", ["s", "l", "d"], ["r"]), h.make_node("EyeLike", ["x"], ["e"], k=-1, dtype=I64),
    h.make_node("Trilu", ["xi", "k"], ["t"], upper=0),
    h.make_node("MaxPool", ["x4"], ["p", "ix"], kernel_shape=[2, 2], strides=[2, 2]),
    h.make_node("MaxPool", ["x4"], ["p2", "ix2"], kernel_shape=[3, 2], strides=[1, 2], storage_order=1),
    h.make_node("MaxPool", ["x5"], ["p3", "ix3"], kernel_shape=[2, 3], strides=[2, 2]),
    h.make_node("MaxUnpool", ["p3", "ix3"], ["un"], kernel_shape=[2, 3], strides=[2, 2]),
    h.make_node("MaxUnpool", ["p", "ix"], ["un4"], kernel_shape=[2, 2], strides=[2, 2])],
    [vi("s", F, []), vi("l", F, []), vi("d", F, []), vi("x", F, [3, 5]), vi("xi", I64, [2, 3, 4]),
     vi("x4", F, ["N", 3, 6, 8]), vi("x5", F, [2, 2, 6, 7])],
    [vi("r", F, None), vi("e", I64, None), vi("t", I64, None), vi("p", F, None), vi("ix", I64, None),
     vi("ix2", I64, None), vi("un", F, None), vi("un4", F, ["N", 3, 6, 8])], [c("k", np.int64(-1))], opset=14),
    {"s": np.array(2.5, np.float32), "l": np.array(-1.0, np.float32), "d": np.array(-0.75, np.float32), "x": _r(3, 5),
     "xi": rng.integers(-5, 5, (2, 3, 4)).astype(np.int64), "x4": _r(2, 3, 6, 8), "x5": _r(2, 2, 6, 7)},
    {"s": np.array(0.0, np.float32), "l": np.array(1.0, np.float32), "d": np.array(0.25, np.float32), "x": _r(3, 5),
     "xi": rng.integers(-5, 5, (2, 3, 4)).astype(np.int64), "x4": _r(3, 3, 6, 8), "x5": _r(2, 2, 6, 7)})

# --- detection post-processing as exporters write it: K = min(cap, N) computed at run time for TopK,
# boxes gathered, NonMaxSuppression, the survivors gathered and counted ------------------------------
def _boxes(n):
    xy = rng.random((1, n, 2)).astype(np.float32) * 10
    return np.concatenate([xy, xy + rng.random((1, n, 2)).astype(np.float32) * 4 + 1], -1)


CASES["detection_topk_min_nms"] = (model([
    h.make_node("Shape", ["scores"], ["ss"]),
    h.make_node("Gather", ["ss", "one"], ["n"], axis=0),
    h.make_node("Min", ["n", "cap"], ["k"]),
    h.make_node("Unsqueeze", ["k", "ax0"], ["k1"]),
    h.make_node("TopK", ["scores", "k1"], ["tv", "ti"], axis=1),
    h.make_node("Squeeze", ["ti", "ax0"], ["ti0"]),
    h.make_node("Gather", ["boxes", "ti0"], ["tb"], axis=1),
    h.make_node("Unsqueeze", ["tv", "ax1"], ["tv3"]),
    h.make_node("NonMaxSuppression", ["tb", "tv3", "maxo", "iou", "sth"], ["sel"]),
    h.make_node("Gather", ["sel", "two"], ["bi"], axis=1),
    h.make_node("Gather", ["tb", "bi"], ["kept"], axis=1),
    h.make_node("Shape", ["bi"], ["cnt"]),
    h.make_node("ReduceSum", ["kept"], ["tot"], keepdims=0)],
    [vi("scores", F, [1, "N"]), vi("boxes", F, [1, "N", 4])],
    [vi("kept", F, None), vi("cnt", I64, None), vi("tot", F, None), vi("sel", I64, None)],
    [c("one", np.int64(1)), c("cap", np.int64(6)), c("ax0", _i(0)), c("ax1", _i(1)), c("maxo", np.array([4], np.int64)),
     c("iou", np.array([0.4], np.float32)), c("sth", np.array([0.1], np.float32)), c("two", np.int64(2))], opset=13),
    {"scores": rng.random((1, 9)).astype(np.float32), "boxes": _boxes(9)},
    {"scores": rng.random((1, 3)).astype(np.float32), "boxes": _boxes(3)})


# --- model-local functions (what torch.onnx's exporters write for modules kept as functions): one with
# an attribute reference, called twice with other values; from_onnx failed in any process that had not
# imported onnx.inliner ('module onnx has no attribute inliner') ---------------------------------------
def _local_functions():
    from onnx import parser

    fn = parser.parse_function("""
    <domain: "custom", opset_import: ["" : 18]>
    LeakyResidual <alpha>(x) => (y) {
        t = LeakyRelu <alpha: float = @alpha> (x)
        y = Add(t, x)
    }""")
    g = parser.parse_graph("""
    g (float[N, 4] x) => (float[N, 4] z) {
        y = custom.LeakyResidual <alpha: float = 0.2> (x)
        z = custom.LeakyResidual <alpha: float = 0.7> (y)
    }""")
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18), h.make_opsetid("custom", 1)], functions=[fn])


CASES["local_functions_attr_ref"] = (_local_functions(), {"x": _r(3, 4)}, {"x": _r(5, 4)})

"""Hand-built ONNX files for the fourth held-out zoo (test_heldout4_zoo.py): ops and attributes
torch.onnx never writes (If, Loop, Scan, Einsum, Trilu, CumSum exclusive/reverse, TopK smallest,
reductions with axes as an input at opset 18, Compress, ReverseSequence, LpPool, ...), each with
its feeds; onnxruntime is the reference.

``CASES``: name -> (ModelProto, feeds). Built at import (small: ~80 ms).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh


def vi(n, dt, shape):
    return h.make_tensor_value_info(n, dt, shape)


def model(nodes, inputs, outputs, inits=(), opset=18):
    """A one-graph model; outputs declared without a shape get the one ONNX infers (the checker,
    which srcore runs, wants one), else a rank-1 unknown shape."""
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    inf = onnx.shape_inference.infer_shapes(m)
    known = {v.name: v for v in list(inf.graph.value_info) + list(inf.graph.output)}
    for o in m.graph.output:
        if not o.type.tensor_type.HasField("shape"):
            k = known.get(o.name)
            if k is not None and k.type.tensor_type.HasField("shape"):
                o.type.tensor_type.shape.CopyFrom(k.type.tensor_type.shape)
            else:
                o.type.tensor_type.shape.dim.add().dim_param = "unk"
    return m


def c(name, arr):
    return nh.from_array(np.asarray(arr), name)


F = T.FLOAT
CASES = {}
rng = np.random.default_rng(0)
x34 = rng.standard_normal((3, 4)).astype(np.float32)
x345 = rng.standard_normal((3, 4, 5)).astype(np.float32)
# CumSum
for ex in (0, 1):
    for rv in (0, 1):
        CASES[f"cumsum_ex{ex}_rev{rv}"] = (model([h.make_node("CumSum", ["x", "ax"], ["y"], exclusive=ex, reverse=rv)],
            [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("ax", np.array(1, np.int64))]), {"x": x345})
CASES["cumsum_axis_input_neg"] = (model([h.make_node("CumSum", ["x", "ax"], ["y"], exclusive=1)],
    [vi("x", F, [3, 4, 5]), vi("ax", T.INT32, [])], [vi("y", F, None)]), {"x": x345, "ax": np.array(-1, np.int32)})
for k in (0, 1):
    CASES[f"trilu_upper{k}"] = (model([h.make_node("Trilu", ["x", "k"], ["y"], upper=k)], [vi("x", F, [3, 4, 5])],
        [vi("y", F, None)], [c("k", np.array(-1 if k else 2, np.int64))]), {"x": x345})
CASES["trilu_nok"] = (model([h.make_node("Trilu", ["x"], ["y"], upper=0)], [vi("x", F, [4, 5])], [vi("y", F, None)]),
                      {"x": x345[0]})
CASES["topk_smallest"] = (model([h.make_node("TopK", ["x", "k"], ["v", "i"], largest=0, axis=1, sorted=1)],
    [vi("x", F, [3, 4, 5])], [vi("v", F, None), vi("i", T.INT64, None)], [c("k", np.array([2], np.int64))]), {"x": x345})
CASES["topk_axis0_largest"] = (model([h.make_node("TopK", ["x", "k"], ["v", "i"], axis=0)],
    [vi("x", F, [3, 4, 5])], [vi("v", F, None), vi("i", T.INT64, None)], [c("k", np.array([3], np.int64))]), {"x": x345})
CASES["reducemean_axes_input18"] = (model([h.make_node("ReduceMean", ["x", "a"], ["y"], keepdims=0)],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("a", np.array([0, -1], np.int64))]), {"x": x345})
CASES["reducemean_noaxes18"] = (model([h.make_node("ReduceMean", ["x"], ["y"])],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None)]), {"x": x345})
CASES["reducesum_empty_noop"] = (model([h.make_node("ReduceSum", ["x", "a"], ["y"], noop_with_empty_axes=1)],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("a", np.array([], np.int64))]), {"x": x345})
CASES["reducemax_axes_runtime"] = (model([h.make_node("ReduceMax", ["x", "a"], ["y"], keepdims=1)],
    [vi("x", F, [3, 4, 5]), vi("a", T.INT64, [1])], [vi("y", F, ["a", "b", "c"])]), {"x": x345, "a": np.array([1], np.int64)})
CASES["reducelogsumexp"] = (model([h.make_node("ReduceLogSumExp", ["x", "a"], ["y"], keepdims=0)],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("a", np.array([1], np.int64))]), {"x": x345})
CASES["reducel2_sumsquare"] = (model([h.make_node("ReduceL2", ["x", "a"], ["y"]), h.make_node("ReduceSumSquare", ["x", "a"], ["z"]),
                                      h.make_node("ReduceL1", ["x", "a"], ["w"]), h.make_node("ReduceProd", ["x", "a"], ["p"])],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None), vi("z", F, None), vi("w", F, None), vi("p", F, None)], [c("a", np.array([2], np.int64))]), {"x": x345})
CASES["einsum_bij_bjk"] = (model([h.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")],
    [vi("a", F, [3, 4, 5]), vi("b", F, [3, 5, 2])], [vi("y", F, None)]),
    {"a": x345, "b": rng.standard_normal((3, 5, 2)).astype(np.float32)})
CASES["einsum_trace_diag"] = (model([h.make_node("Einsum", ["a"], ["y"], equation="ii->i")],
    [vi("a", F, [4, 4])], [vi("y", F, None)]), {"a": rng.standard_normal((4, 4)).astype(np.float32)})
CASES["einsum_ellipsis"] = (model([h.make_node("Einsum", ["a", "b"], ["y"], equation="...ij,...j->...i")],
    [vi("a", F, [2, 3, 4, 5]), vi("b", F, [2, 3, 5])], [vi("y", F, None)]),
    {"a": rng.standard_normal((2, 3, 4, 5)).astype(np.float32), "b": rng.standard_normal((2, 3, 5)).astype(np.float32)})
CASES["einsum_implicit_outer"] = (model([h.make_node("Einsum", ["a", "b"], ["y"], equation="i,j")],
    [vi("a", F, [4]), vi("b", F, [3])], [vi("y", F, None)]),
    {"a": rng.standard_normal(4).astype(np.float32), "b": rng.standard_normal(3).astype(np.float32)})
# If on an input condition
then_g = h.make_graph([h.make_node("Mul", ["x", "two"], ["t"])], "then", [], [vi("t", F, [3, 4])], [c("two", np.float32(2.0))])
else_g = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, [3, 4])])
for cond in (True, False):
    CASES[f"if_{cond}"] = (model([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        [vi("x", F, [3, 4]), vi("c", T.BOOL, [])], [vi("y", F, None)]), {"x": x34, "c": np.array(cond)})
# If on a computed condition
CASES["if_computed"] = (model([h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "z"], ["c"]),
                                h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
    [vi("x", F, [3, 4])], [vi("y", F, None)], [c("z", np.float32(0.0))]), {"x": x34})
# Loop: accumulate x * i for trip count 4, scan output stacks
body = h.make_graph([h.make_node("Cast", ["i"], ["fi"], to=F), h.make_node("Mul", ["x", "fi"], ["xi"]),
                     h.make_node("Add", ["acc", "xi"], ["acc2"]), h.make_node("Identity", ["cond"], ["cond2"]),
                     h.make_node("Identity", ["acc2"], ["scan"])], "body",
                    [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", F, [3, 4])],
                    [vi("cond2", T.BOOL, []), vi("acc2", F, [3, 4]), vi("scan", F, [3, 4])])
CASES["loop_trip"] = (model([h.make_node("Loop", ["n", "", "a0"], ["acc", "stack"], body=body)],
    [vi("x", F, [3, 4]), vi("a0", F, [3, 4])], [vi("acc", F, [3, 4]), vi("stack", F, [4, 3, 4])], [c("n", np.array(4, np.int64))]),
    {"x": x34, "a0": np.ones((3, 4), np.float32)})
# Scan: running sum over axis 0 of (5, 3)
sbody = h.make_graph([h.make_node("Add", ["s", "xt"], ["s2"]), h.make_node("Identity", ["s2"], ["o"])], "sb",
                     [vi("s", F, [3]), vi("xt", F, [3])], [vi("s2", F, [3]), vi("o", F, [3])])
CASES["scan"] = (model([h.make_node("Scan", ["s0", "xs"], ["sf", "ys"], body=sbody, num_scan_inputs=1)],
    [vi("s0", F, [3]), vi("xs", F, ["n", 3])], [vi("sf", F, [3]), vi("ys", F, ["n", 3])]),
    {"s0": np.zeros(3, np.float32), "xs": rng.standard_normal((5, 3)).astype(np.float32)})
CASES["scan_reverse_axis1"] = (model([h.make_node("Scan", ["s0", "xs"], ["sf", "ys"], body=sbody, num_scan_inputs=1,
                                                  scan_input_directions=[1], scan_input_axes=[1], scan_output_axes=[1])],
    [vi("s0", F, [3]), vi("xs", F, [3, 5])], [vi("sf", F, [3]), vi("ys", F, [3, 5])]),
    {"s0": np.zeros(3, np.float32), "xs": rng.standard_normal((3, 5)).astype(np.float32)})
# misc ops torch rarely writes
CASES["split_num_outputs18"] = (model([h.make_node("Split", ["x"], ["a", "b", "c"], axis=2, num_outputs=3)],
    [vi("x", F, [3, 4, 5])], [vi("a", F, None), vi("b", F, None), vi("c", F, None)]), {"x": x345})
CASES["gathernd_b1"] = (model([h.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
    [vi("x", F, [3, 4, 5]), vi("i", T.INT64, [3, 2, 1])], [vi("y", F, None)]),
    {"x": x345, "i": np.array([[[1], [3]], [[0], [-1]], [[2], [2]]], np.int64)})
CASES["scatternd_add"] = (model([h.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")],
    [vi("x", F, [3, 4, 5]), vi("i", T.INT64, [3, 2]), vi("u", F, [3, 5])], [vi("y", F, None)]),
    {"x": x345, "i": np.array([[0, 1], [2, 3], [0, 1]], np.int64), "u": rng.standard_normal((3, 5)).astype(np.float32)})
CASES["scatterelements_max"] = (model([h.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="max")],
    [vi("x", F, [3, 4]), vi("i", T.INT64, [3, 2]), vi("u", F, [3, 2])], [vi("y", F, None)]),
    {"x": x34, "i": np.array([[0, 0], [3, 1], [-1, 2]], np.int64), "u": rng.standard_normal((3, 2)).astype(np.float32)})
CASES["depthtospace_crd"] = (model([h.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")],
    [vi("x", F, [1, 8, 2, 3])], [vi("y", F, None)]), {"x": rng.standard_normal((1, 8, 2, 3)).astype(np.float32)})
CASES["depthtospace_dcr"] = (model([h.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="DCR")],
    [vi("x", F, [1, 8, 2, 3])], [vi("y", F, None)]), {"x": rng.standard_normal((1, 8, 2, 3)).astype(np.float32)})
CASES["spacetodepth"] = (model([h.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)],
    [vi("x", F, [1, 2, 4, 6])], [vi("y", F, None)]), {"x": rng.standard_normal((1, 2, 4, 6)).astype(np.float32)})
CASES["hardmax_lpnorm"] = (model([h.make_node("Hardmax", ["x"], ["a"], axis=1), h.make_node("LpNormalization", ["x"], ["b"], axis=1, p=1)],
    [vi("x", F, [3, 4, 5])], [vi("a", F, None), vi("b", F, None)]), {"x": x345})
CASES["shrink_thresholded"] = (model([h.make_node("Shrink", ["x"], ["a"], bias=0.1, lambd=0.5),
                                      h.make_node("ThresholdedRelu", ["x"], ["b"], alpha=0.3),
                                      h.make_node("Celu", ["x"], ["c"], alpha=0.7)],
    [vi("x", F, [3, 4])], [vi("a", F, None), vi("b", F, None), vi("c", F, None)]), {"x": x34})
CASES["mvn"] = (model([h.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2])],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None)]), {"x": x345})
CASES["layernorm_axis1"] = (model([h.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=1, epsilon=1e-3)],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("s", rng.standard_normal((4, 5)).astype(np.float32)), c("b", rng.standard_normal((4, 5)).astype(np.float32))]), {"x": x345})
CASES["groupnorm18"] = (model([h.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
    [vi("x", F, [2, 4, 3, 3])], [vi("y", F, [2, 4, 3, 3])], [c("s", np.float32([1, 2, 3, 4])), c("b", np.float32([0.1, -0.2, 0, 1]))], opset=21),
    {"x": rng.standard_normal((2, 4, 3, 3)).astype(np.float32)})
CASES["onehot"] = (model([h.make_node("OneHot", ["i", "d", "v"], ["y"], axis=-1)],
    [vi("i", T.INT64, [3, 2])], [vi("y", F, None)], [c("d", np.array(5, np.int64)), c("v", np.float32([-1, 3]))]),
    {"i": np.array([[0, 4], [-1, 2], [1, 3]], np.int64)})
CASES["compress"] = (model([h.make_node("Compress", ["x", "m"], ["y"], axis=1)],
    [vi("x", F, [3, 4])], [vi("y", F, None)], [c("m", np.array([True, False, True], bool))]), {"x": x34})
CASES["reversesequence"] = (model([h.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=1, time_axis=0)],
    [vi("x", F, [4, 3])], [vi("y", F, None)], [c("l", np.array([4, 2, 1], np.int64))]), {"x": x34.T.copy()})
CASES["argmax_last"] = (model([h.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=0, select_last_index=1),
                              h.make_node("ArgMin", ["x"], ["z"], axis=0, keepdims=1)],
    [vi("x", F, [3, 4])], [vi("y", T.INT64, None), vi("z", T.INT64, None)]), {"x": np.round(x34)})
CASES["mod_fmod"] = (model([h.make_node("Mod", ["a", "b"], ["y"], fmod=1), h.make_node("Mod", ["ia", "ib"], ["z"])],
    [vi("a", F, [3, 4]), vi("b", F, [3, 4]), vi("ia", T.INT32, [4]), vi("ib", T.INT32, [4])], [vi("y", F, None), vi("z", T.INT32, None)]),
    {"a": x34 * 5, "b": x34[::-1].copy() + 0.1, "ia": np.array([-7, 7, -7, 7], np.int32), "ib": np.array([3, -3, -3, 3], np.int32)})
CASES["range_size_shape"] = (model([h.make_node("Size", ["x"], ["n"]), h.make_node("Range", ["z", "n", "three"], ["r"]),
                                     h.make_node("Shape", ["x"], ["s"], start=1)],
    [vi("x", F, [3, 4, 5])], [vi("r", T.INT64, None), vi("s", T.INT64, None)], [c("z", np.array(0, np.int64)), c("three", np.array(7, np.int64))]), {"x": x345})
CASES["resize_cubic_halfpixel"] = (model([h.make_node("Resize", ["x", "", "sc"], ["y"], mode="cubic", coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.5)],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("sc", np.float32([1, 1, 2, 1.5]))]),
    {"x": rng.standard_normal((1, 2, 4, 5)).astype(np.float32)})
CASES["resize_nearest_floor_asym"] = (model([h.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("sz", np.array([1, 2, 7, 3], np.int64))]),
    {"x": rng.standard_normal((1, 2, 4, 5)).astype(np.float32)})
CASES["resize_linear_tf_crop_axes"] = (model([h.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel", axes=[2, 3])],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("sc", np.float32([0.5, 1.7]))]),
    {"x": rng.standard_normal((1, 2, 4, 5)).astype(np.float32)})
CASES["bitshift_bitwise"] = (model([h.make_node("BitShift", ["a", "b"], ["y"], direction="LEFT"), h.make_node("BitwiseAnd", ["a", "b"], ["z"])],
    [vi("a", T.UINT8, [4]), vi("b", T.UINT8, [4])], [vi("y", T.UINT8, None), vi("z", T.UINT8, None)]),
    {"a": np.array([1, 3, 255, 16], np.uint8), "b": np.array([1, 2, 1, 3], np.uint8)})
CASES["where_isnan_isinf"] = (model([h.make_node("IsNaN", ["x"], ["n"]), h.make_node("IsInf", ["x"], ["i"], detect_negative=0),
                                      h.make_node("Where", ["n", "z", "x"], ["y"])],
    [vi("x", F, [4])], [vi("y", F, None), vi("i", T.BOOL, None)], [c("z", np.float32(0))]),
    {"x": np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)})
CASES["nonzero_expand"] = (model([h.make_node("NonZero", ["x"], ["y"])], [vi("x", F, [3, 4])], [vi("y", T.INT64, None)]),
    {"x": (x34 > 0).astype(np.float32)})
CASES["gather_elements_neg"] = (model([h.make_node("GatherElements", ["x", "i"], ["y"], axis=0)],
    [vi("x", F, [3, 4]), vi("i", T.INT64, [2, 4])], [vi("y", F, None)]), {"x": x34, "i": np.array([[0, -1, 2, 1], [-3, 0, 0, 2]], np.int64)})
CASES["cast_like_round"] = (model([h.make_node("Round", ["x"], ["r"]), h.make_node("CastLike", ["r", "t"], ["y"])],
    [vi("x", F, [6]), vi("t", T.INT32, [1])], [vi("y", T.INT32, None)]), {"x": np.float32([0.5, 1.5, 2.5, -0.5, -1.5, 2.4]), "t": np.array([1], np.int32)})
CASES["det_cumprod_erf"] = (model([h.make_node("Erf", ["x"], ["e"]), h.make_node("Sign", ["x"], ["s"]), h.make_node("Softplus", ["x"], ["p"]),
                                    h.make_node("Softsign", ["x"], ["q"]), h.make_node("HardSigmoid", ["x"], ["hs"], alpha=0.3, beta=0.4),
                                    h.make_node("Mish", ["x"], ["m"])],
    [vi("x", F, [3, 4])], [vi("e", F, None), vi("s", F, None), vi("p", F, None), vi("q", F, None), vi("hs", F, None), vi("m", F, None)]), {"x": x34})
CASES["tile_pad_reflect_axes"] = (model([h.make_node("Pad", ["x", "p", "", "ax"], ["y"], mode="reflect"), h.make_node("Tile", ["x", "r"], ["t"])],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None), vi("t", F, None)], [c("p", np.array([1, 2, 2, 1], np.int64)), c("ax", np.array([-1, 1], np.int64)), c("r", np.array([1, 2, 1], np.int64))]), {"x": x345})
CASES["pad_wrap19"] = (model([h.make_node("Pad", ["x", "p"], ["y"], mode="wrap")],
    [vi("x", F, [3, 4])], [vi("y", F, None)], [c("p", np.array([0, 2, 1, 3], np.int64))], opset=19), {"x": x34})
CASES["averagepool_dil19"] = (model([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 1], pads=[1, 0, 1, 1], count_include_pad=0, ceil_mode=1, strides=[2, 2])],
    [vi("x", F, [1, 2, 6, 5])], [vi("y", F, None)], opset=19), {"x": rng.standard_normal((1, 2, 6, 5)).astype(np.float32)})
CASES["maxpool_indices"] = (model([h.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])],
    [vi("x", F, [1, 2, 4, 4])], [vi("y", F, None), vi("i", T.INT64, None)]), {"x": rng.standard_normal((1, 2, 4, 4)).astype(np.float32)})
CASES["lppool_globallp"] = (model([h.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], p=3), h.make_node("GlobalLpPool", ["x"], ["z"], p=2)],
    [vi("x", F, [1, 2, 4, 4])], [vi("y", F, None), vi("z", F, None)]), {"x": rng.standard_normal((1, 2, 4, 4)).astype(np.float32)})
CASES["convtranspose_outshape"] = (model([h.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[9, 8], group=2)],
    [vi("x", F, [1, 4, 4, 4])], [vi("y", F, None)], [c("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))]), {"x": rng.standard_normal((1, 4, 4, 4)).astype(np.float32)})
CASES["conv_autopad_same_lower"] = (model([h.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 2])],
    [vi("x", F, [1, 2, 5, 6])], [vi("y", F, None)], [c("w", rng.standard_normal((3, 2, 2, 3)).astype(np.float32))]), {"x": rng.standard_normal((1, 2, 5, 6)).astype(np.float32)})
CASES["gemm_trans_alpha"] = (model([h.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)],
    [vi("a", F, [4, 3]), vi("b", F, [5, 4])], [vi("y", F, None)], [c("c", rng.standard_normal((1, 5)).astype(np.float32))]),
    {"a": x34.T.copy(), "b": rng.standard_normal((5, 4)).astype(np.float32)})
CASES["matmulinteger"] = (model([h.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
    [vi("a", T.UINT8, [3, 4]), vi("b", T.INT8, [4, 2])], [vi("y", T.INT32, None)], [c("az", np.array(3, np.uint8)), c("bz", np.array(-2, np.int8))]),
    {"a": rng.integers(0, 255, (3, 4)).astype(np.uint8), "b": rng.integers(-128, 127, (4, 2)).astype(np.int8)})
CASES["qlinear_dq"] = (model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1), h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
    [vi("x", F, [3, 4])], [vi("y", F, None)], [c("s", np.float32([0.1, 0.02, 0.05, 0.3])), c("z", np.array([0, 10, 250, 128], np.uint8))]), {"x": x34})
CASES["dq_blocked21"] = (model([h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=2)],
    [vi("q", T.INT8, [3, 4])], [vi("y", F, None)], [c("s", np.float32([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])), c("z", np.array([[0, 1], [2, 3], [-4, 5]], np.int8))], opset=21),
    {"q": rng.integers(-128, 127, (3, 4)).astype(np.int8)})
CASES["matmulinteger_per_column"] = (model([h.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
    [vi("a", T.INT8, [2, 3, 4]), vi("b", T.UINT8, [4, 5])], [vi("y", T.INT32, None)],
    [c("az", np.array(-3, np.int8)), c("bz", np.array([1, 2, 3, 4, 200], np.uint8))]),
    {"a": rng.integers(-128, 127, (2, 3, 4)).astype(np.int8), "b": rng.integers(0, 255, (4, 5)).astype(np.uint8)})
CASES["unique_sorted"] = (model([h.make_node("Unique", ["x"], ["y", "i", "inv", "cnt"], sorted=1)],
    [vi("x", F, [6])], [vi("y", F, None), vi("i", T.INT64, None), vi("inv", T.INT64, None), vi("cnt", T.INT64, None)]), {"x": np.float32([2, 1, 2, 3, 1, 0])})
CASES["gelu20_tanh"] = (model([h.make_node("Gelu", ["x"], ["y"], approximate="tanh")], [vi("x", F, [3, 4])], [vi("y", F, None)], opset=20), {"x": x34})
CASES["sce_loss_free_softmax_opset11_axis"] = (model([h.make_node("Softmax", ["x"], ["y"], axis=1), h.make_node("LogSoftmax", ["x"], ["z"], axis=0)],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None), vi("z", F, None)], opset=11), {"x": x345})
CASES["squeeze11_attr"] = (model([h.make_node("Squeeze", ["x"], ["y"], axes=[1]), h.make_node("Unsqueeze", ["y"], ["z"], axes=[0, 3])],
    [vi("x", F, [3, 1, 5])], [vi("z", F, None)], opset=11), {"x": x345[:, :1]})
CASES["double_ops"] = (model([h.make_node("Exp", ["x"], ["e"]), h.make_node("CumSum", ["e", "ax"], ["y"]), h.make_node("ReduceMean", ["y", "a"], ["m"], keepdims=0)],
    [vi("x", T.DOUBLE, [3, 4])], [vi("m", T.DOUBLE, None)], [c("ax", np.array(0, np.int64)), c("a", np.array([1], np.int64))]), {"x": x34.astype(np.float64)})
CASES["int32_arith"] = (model([h.make_node("Div", ["a", "b"], ["d"]), h.make_node("Mul", ["a", "b"], ["m"]), h.make_node("Neg", ["a"], ["n"]), h.make_node("Abs", ["n"], ["ab"])],
    [vi("a", T.INT32, [4]), vi("b", T.INT32, [4])], [vi("d", T.INT32, None), vi("m", T.INT32, None), vi("ab", T.INT32, None)]),
    {"a": np.array([-7, 7, -7, 9], np.int32), "b": np.array([2, -2, -2, 4], np.int32)})

CASES["pad_edge_reflect_batch"] = (model([h.make_node("Pad", ["x", "p"], ["y"], mode="edge"), h.make_node("Pad", ["x", "p"], ["z"], mode="reflect")],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None), vi("z", F, None)], [c("p", np.array([2, 0, 1, 1, 3, 0], np.int64))]), {"x": x345})
CASES["lppool_pads_ceil"] = (model([h.make_node("LpPool", ["x"], ["y"], kernel_shape=[3, 2], p=1, pads=[1, 0, 1, 1], strides=[2, 2], ceil_mode=1)],
    [vi("x", F, [1, 2, 5, 5])], [vi("y", F, None)]), {"x": rng.standard_normal((1, 2, 5, 5)).astype(np.float32)})
CASES["compress_noaxis_short"] = (model([h.make_node("Compress", ["x", "m"], ["y"])],
    [vi("x", F, [3, 4]), vi("m", T.BOOL, [5])], [vi("y", F, None)]), {"x": x34, "m": np.array([1, 0, 0, 1, 1], bool)})
CASES["reversesequence_b0"] = (model([h.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=0, time_axis=1)],
    [vi("x", F, [3, 4, 5]), vi("l", T.INT64, [3])], [vi("y", F, None)]), {"x": x345, "l": np.array([4, 1, 3], np.int64)})
CASES["mvn_default"] = (model([h.make_node("MeanVarianceNormalization", ["x"], ["y"])],
    [vi("x", F, [2, 3, 4, 5])], [vi("y", F, [2, 3, 4, 5])]), {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32)})
sbody2 = h.make_graph([h.make_node("Mul", ["s", "xt"], ["s2"]), h.make_node("Add", ["s2", "yt"], ["o"]), h.make_node("ReduceSum", ["o"], ["o2"], keepdims=0)], "sb2",
                     [vi("s", F, [3]), vi("xt", F, [3]), vi("yt", F, [3])], [vi("s2", F, [3]), vi("o", F, [3]), vi("o2", F, [])])
CASES["scan_two_inputs_outdir"] = (model([h.make_node("Scan", ["s0", "xs", "ys"], ["sf", "o", "o2"], body=sbody2, num_scan_inputs=2,
                                                  scan_input_directions=[0, 1], scan_input_axes=[0, -1], scan_output_axes=[-1, 0], scan_output_directions=[1, 0])],
    [vi("s0", F, [3]), vi("xs", F, [4, 3]), vi("ys", F, [3, 4])], [vi("sf", F, [3]), vi("o", F, [3, 4]), vi("o2", F, [4])]),
    {"s0": np.ones(3, np.float32), "xs": rng.standard_normal((4, 3)).astype(np.float32), "ys": rng.standard_normal((3, 4)).astype(np.float32)})

"""Hand-built ONNX files for the eighth held-out zoo (test_heldout8_zoo.py): whole small graphs as
other exporters (tf2onnx, paddle2onnx, hand-written tools) write them, not single ops: the same ops in
their opset 11 / 13 / 18 forms (axes and splits as attributes vs inputs, Clip's bounds as inputs with
one of them empty), Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains on ``dim_param`` batch
dims, Slice with negative steps, Gather / GatherElements / GatherND / ScatterND / ScatterElements
together, recurrent ops with initial states and optional (``""``) inputs, ConvTranspose with
output_padding and auto_pad, InstanceNormalization / LRN, QLinearConv / QLinearMatMul / MatMulInteger,
int64 / bool / float16 / double arithmetic; onnxruntime is the reference.

``CASES``: name -> (ModelProto, feeds, other feeds or None): the other feeds have another batch (the
graph's dims are ``dim_param``s) and check the graph was not specialised to the first. Built at
import (small).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h

from heldout4_onnx import c, model, vi

F, I64, B, F16, D = T.FLOAT, T.INT64, T.BOOL, T.FLOAT16, T.DOUBLE
CASES = {}
rng = np.random.default_rng(8)


def _r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _i(*a):
    return np.array(a, np.int64)


# --- one block (split, squeeze, reduce, clip) at opsets 11, 13, 18 ------------------------------------
def _split_block(opset):
    """x [N, 6, 4]: split dim 1 as 2 + 4 (3 + 3 at opset 18), squeeze a kept dim, reduce, clip, concat back."""
    nodes, inits = [], [c("lo", np.float32(-0.5)), c("hi", np.float32(0.7))]
    if opset < 13:
        nodes += [h.make_node("Split", ["x"], ["a", "b"], axis=1, split=[2, 4]),
                  h.make_node("ReduceSum", ["b"], ["s"], axes=[1], keepdims=1),
                  h.make_node("Squeeze", ["s"], ["sq"], axes=[1]),
                  h.make_node("Unsqueeze", ["sq"], ["u"], axes=[1])]
    else:
        inits += [c("sp", _i(2, 4)), c("ax1", _i(1))]
        split = (h.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2) if opset >= 18   # 3 + 3
                 else h.make_node("Split", ["x", "sp"], ["a", "b"], axis=1))
        nodes += [split, h.make_node("ReduceSum", ["b", "ax1"], ["s"], keepdims=1),
                  h.make_node("Squeeze", ["s", "ax1"], ["sq"]),
                  h.make_node("Unsqueeze", ["sq", "ax1"], ["u"])]
    nodes += [h.make_node("Clip", ["a", "lo", ""], ["ca"]),      # min only
              h.make_node("Clip", ["u", "", "hi"], ["cu"]),      # max only
              h.make_node("Concat", ["ca", "cu"], ["y"], axis=1),
              h.make_node("ReduceMax" if opset >= 18 else "ReduceMean", ["y"], ["m"], axes=[2], keepdims=0)
              if opset < 18 else h.make_node("ReduceMax", ["y", "ax2"], ["m"], keepdims=0)]
    if opset >= 18:
        inits.append(c("ax2", _i(2)))
    return model(nodes, [vi("x", F, ["N", 6, 4])], [vi("y", F, None), vi("m", F, None)], inits, opset=opset)


for _op in (11, 13, 18):
    CASES[f"split_clip_reduce_opset{_op}"] = (_split_block(_op), {"x": _r(2, 6, 4)}, {"x": _r(3, 6, 4)})

# --- shape arithmetic on dim_param dims ---------------------------------------------------------------
# x [N, T, 8] -> reshape to [N, T * 2, 4] via Shape/Gather/Mul/Unsqueeze/Concat; ConstantOfShape of the
# shape; Range over T; Expand and Tile with computed sizes
CASES["shape_chain_reshape"] = (model([
    h.make_node("Shape", ["x"], ["shp"]),
    h.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
    h.make_node("Gather", ["shp", "one"], ["t"], axis=0),
    h.make_node("Mul", ["t", "two"], ["t2"]),
    h.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
    h.make_node("Unsqueeze", ["t2", "ax0"], ["t21"]),
    h.make_node("Concat", ["n1", "t21", "four"], ["newshape"], axis=0),
    h.make_node("Reshape", ["x", "newshape"], ["r"]),
    h.make_node("Shape", ["r"], ["rs"], start=-2),
    h.make_node("ConstantOfShape", ["rs"], ["ones"], value=h.make_tensor("v", F, [1], [1.5])),
    h.make_node("Add", ["r", "ones"], ["y"]),
    h.make_node("Range", ["z0", "t", "one"], ["rng"]),
    h.make_node("Cast", ["rng"], ["rngf"], to=F),
    h.make_node("Unsqueeze", ["rngf", "ax01"], ["rng3"]),
    h.make_node("Concat", ["n1", "one1", "one1"], ["eshape"], axis=0),
    h.make_node("Expand", ["rng3", "eshape"], ["e"]),             # [1,1,T] expanded by [N,1,1]: [N,1,T]
    h.make_node("Concat", ["one1", "two1", "one1"], ["reps"], axis=0),
    h.make_node("Tile", ["e", "reps"], ["tl"]),                    # [N, 2, T]
    h.make_node("Size", ["tl"], ["sz"])],
    [vi("x", F, ["N", "T", 8])], [vi("y", F, ["N", "T2", 4]), vi("tl", F, ["N", 2, "T"]), vi("sz", I64, [])],
    [c("zero", np.int64(0)), c("one", np.int64(1)), c("two", np.int64(2)), c("ax0", _i(0)), c("ax01", _i(0, 1)),
     c("four", _i(4)), c("z0", np.int64(0)), c("one1", _i(1)), c("two1", _i(2))], opset=15),
    {"x": _r(2, 3, 8)}, {"x": _r(3, 5, 8)})

# --- slices with negative steps, at opset 10 (inputs) and opset 9 (attributes) ------------------------
CASES["slice_negative_steps13"] = (model([
    h.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["a"]),
    h.make_node("Slice", ["x", "st2", "en2", "ax2"], ["b"]),
    h.make_node("Slice", ["a", "st3", "en3", "", "sp3"], ["c"])],
    [vi("x", F, ["N", 6, 7])], [vi("a", F, None), vi("b", F, None), vi("c", F, None)],
    [c("st", _i(-1, 5)), c("en", _i(-(2 ** 63), 0)), c("ax", _i(2, 1)), c("sp", _i(-2, -1)),
     c("st2", _i(1)), c("en2", _i(2 ** 63 - 1)), c("ax2", _i(-1)),
     c("st3", _i(0, 4, 3)), c("en3", _i(2 ** 31, -6, -100)), c("sp3", _i(1, -2, -1))], opset=13),
    {"x": _r(2, 6, 7)}, {"x": _r(1, 6, 7)})
CASES["slice_attrs9"] = (model([h.make_node("Slice", ["x"], ["y"], starts=[1, -3], ends=[1000, -1], axes=[0, 2])],
                               [vi("x", F, [3, 4, 5])], [vi("y", F, None)], opset=9), {"x": _r(3, 4, 5)}, None)

# --- gathers, scatters and Where with broadcasting ---------------------------------------------------
CASES["gather_scatter_where"] = (model([
    h.make_node("Gather", ["x", "gi"], ["g"], axis=1),                              # [N, 2, 3, 5]
    h.make_node("GatherElements", ["x", "ei"], ["ge"], axis=2),
    h.make_node("GatherND", ["x", "ni"], ["gn"]),
    h.make_node("ScatterND", ["x", "si", "su"], ["sn"]),
    h.make_node("ScatterElements", ["x", "ei", "eu"], ["se"], axis=2, reduction="add"),
    h.make_node("Greater", ["x", "thr"], ["mask"]),
    h.make_node("Where", ["mask", "row", "col"], ["w"]),                           # [N,4,5] from [1,4,1] & [5]
    h.make_node("Where", ["mask2", "x", "zf"], ["w2"])],
    [vi("x", F, ["N", 4, 5]), vi("mask2", B, [1, 1, 5])],
    [vi("g", F, None), vi("ge", F, None), vi("gn", F, None), vi("sn", F, None), vi("se", F, None),
     vi("w", F, None), vi("w2", F, None)],
    [c("gi", _i([0, -1, 2], [3, 3, -4])), c("ei", rng.integers(-5, 5, (2, 4, 3)).astype(np.int64)),
     c("ni", _i([1, 2], [0, -1])), c("si", _i([[0, 1]], [[1, 3]])), c("su", _r(2, 1, 5)),
     c("eu", _r(2, 4, 3)), c("thr", np.float32(0.1)), c("row", _r(1, 4, 1)), c("col", _r(5)),
     c("zf", np.float32(0))], opset=16),
    {"x": _r(2, 4, 5), "mask2": np.array([[[True, False, True, True, False]]])}, None)

# --- CumSum / TopK / NonZero feeding each other ---------------------------------------------------------
CASES["cumsum_topk_nonzero"] = (model([
    h.make_node("CumSum", ["x", "ax"], ["cs"], exclusive=1, reverse=1),
    h.make_node("TopK", ["cs", "k"], ["tv", "ti"], axis=-1, largest=1, sorted=1),
    h.make_node("Greater", ["x", "z"], ["pos"]),
    h.make_node("NonZero", ["pos"], ["nz"]),
    h.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
    h.make_node("GatherND", ["x", "nzt"], ["vals"]),
    h.make_node("ReduceSum", ["vals"], ["tot"], keepdims=0),
    h.make_node("CumSum", ["xi", "ax0"], ["ci"])],
    [vi("x", F, [3, 6]), vi("xi", I64, ["N", 4])],
    [vi("tv", F, None), vi("ti", I64, None), vi("nz", I64, None), vi("tot", F, None), vi("ci", I64, None)],
    [c("ax", np.int64(1)), c("ax0", np.int32(0)), c("k", _i(3)), c("z", np.float32(0.0))], opset=14),
    {"x": _r(3, 6), "xi": rng.integers(-9, 9, (2, 4)).astype(np.int64)}, None)

# --- Resize and Pad in their opset 11, 13 and 18 forms -----------------------------------------------
CASES["resize_pad_opsets11"] = (model([
    h.make_node("Resize", ["x", "roi", "sc"], ["a"], mode="linear", coordinate_transformation_mode="align_corners"),
    h.make_node("Shape", ["x"], ["xs"]),
    h.make_node("Slice", ["xs", "s0", "s2"], ["nc"]),
    h.make_node("Concat", ["nc", "hw"], ["sz"], axis=0),
    # scales empty ("roi": opset 11 wants an input there), sizes computed
    h.make_node("Resize", ["x", "roi", "roi", "sz"], ["b"], mode="nearest", coordinate_transformation_mode="half_pixel",
                nearest_mode="round_prefer_ceil"),
    h.make_node("Pad", ["x", "p", "cv"], ["pc"], mode="constant"),
    h.make_node("Pad", ["x", "p"], ["pe"], mode="edge")],
    [vi("x", F, ["N", 2, 4, 5])], [vi("a", F, None), vi("b", F, None), vi("pc", F, None), vi("pe", F, None)],
    [c("roi", np.zeros(0, np.float32)), c("sc", np.array([1, 1, 2, 1.5], np.float32)), c("s0", _i(0)), c("s2", _i(2)),
     c("hw", _i(7, 3)),
     c("p", _i(0, 0, 1, 2, 0, 0, 2, 1)), c("cv", np.float32(-3.0))], opset=11),
    {"x": _r(1, 2, 4, 5)}, {"x": _r(3, 2, 4, 5)})
CASES["resize_pad_opsets18"] = (model([
    h.make_node("Resize", ["x", "", "sc"], ["a"], mode="cubic", coordinate_transformation_mode="half_pixel",
                exclude_outside=1, cubic_coeff_a=-0.5, axes=[3, 2]),
    h.make_node("Resize", ["x", "", "", "sz"], ["b"], mode="linear", coordinate_transformation_mode="asymmetric",
                axes=[2, 3]),
    h.make_node("Pad", ["x", "p", "", "pax"], ["pr"], mode="reflect"),
    h.make_node("Pad", ["x", "p", "cv", "pax"], ["pc"])],
    [vi("x", F, ["N", 2, 4, 5])], [vi("a", F, None), vi("b", F, None), vi("pr", F, None), vi("pc", F, None)],
    [c("sc", np.array([1.6, 0.5], np.float32)), c("sz", _i(3, 8)), c("p", _i(1, -1, 2, 0)),
     c("pax", _i(-1, 2)), c("cv", np.float32(0.25))], opset=18),
    {"x": _r(2, 2, 4, 5)}, None)

# --- recurrent ops: directions, initial states, "" optional inputs -------------------------------------
def _rec(op, gates, direction, hidden=4, inp=3, seq=5, batch=2, extra=None):
    nd = 2 if direction == "bidirectional" else 1
    W = (_r(nd, gates * hidden, inp) * 0.5)
    R = (_r(nd, gates * hidden, hidden) * 0.5)
    Bb = (_r(nd, 2 * gates * hidden) * 0.5)
    names = ["X", "W", "R", "B", "", "h0"] + (["c0"] if op == "LSTM" else [])
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    inputs = [vi("X", F, [seq, "N", inp]), vi("h0", F, [nd, "N", hidden])]
    feeds = {"X": _r(seq, batch, inp), "h0": _r(nd, batch, hidden)}
    if op == "LSTM":
        inputs.append(vi("c0", F, [nd, "N", hidden]))
        feeds["c0"] = _r(nd, batch, hidden)
    node = h.make_node(op, names, outs, hidden_size=hidden, direction=direction, **(extra or {}))
    post = [h.make_node("Relu", ["Y"], ["yr"])]
    m = model([node] + post, inputs, [vi("yr", F, None)] + [vi(o, F, None) for o in outs[1:]],
              [c("W", W), c("R", R), c("B", Bb)], opset=14)
    return m, feeds


CASES["lstm_bidirectional_states"] = (*_rec("LSTM", 4, "bidirectional"), None)
CASES["gru_reverse_linear_before_reset"] = (*_rec("GRU", 3, "reverse", extra={"linear_before_reset": 1}), None)
CASES["rnn_forward_state"] = (*_rec("RNN", 1, "forward"), None)

# --- ConvTranspose with output_padding / auto_pad, InstanceNorm, LRN ----------------------------------
CASES["convtranspose_norms"] = (model([
    h.make_node("ConvTranspose", ["x", "w", "b"], ["a"], strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0],
                dilations=[1, 2]),
    h.make_node("ConvTranspose", ["x", "w"], ["s"], strides=[2, 3], auto_pad="SAME_UPPER"),
    h.make_node("InstanceNormalization", ["a", "is", "ib"], ["n"], epsilon=1e-3),
    h.make_node("LRN", ["s"], ["l"], size=3, alpha=1e-2, beta=0.75, bias=2.0)],
    [vi("x", F, ["N", 4, 5, 6])], [vi("n", F, None), vi("l", F, None)],
    [c("w", _r(4, 3, 3, 3) * 0.3), c("b", _r(3)), c("is", _r(3)), c("ib", _r(3))], opset=13),
    {"x": _r(2, 4, 5, 6)}, None)

# --- QOperator: QLinearConv (per-channel int8 weights), QLinearMatMul, MatMulInteger --------------------
# halved (the same draws): within 7 bits no pair of uint8 x int8 products saturates onnxruntime's int16 sums
# on a CPU without VNNI (srcore sums exactly), so the result is the same on every CPU
wq = (rng.integers(-100, 100, (4, 3, 3, 3)) // 2).astype(np.int8)
CASES["qlinear_conv_matmul_integer"] = (model([
    h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
    h.make_node("QLinearConv", ["xq", "xs", "xz", "wq", "ws", "wz", "ys", "yz", "bq"], ["yq"], pads=[1, 1, 1, 1],
                strides=[1, 2]),
    h.make_node("Reshape", ["yq", "flat"], ["yq2"]),
    h.make_node("QLinearMatMul", ["yq2", "ys", "yz", "mq", "ms", "mz", "os", "oz"], ["oq"]),
    h.make_node("MatMulInteger", ["yq2", "mq", "yz", "mz"], ["acc"]),
    h.make_node("DequantizeLinear", ["oq", "os", "oz"], ["out"])],
    [vi("x", F, [2, 3, 5, 6])], [vi("out", F, None), vi("acc", T.INT32, None)],
    [c("xs", np.float32(0.02)), c("xz", np.uint8(128)), c("wq", wq),
     c("ws", (rng.random(4) * 0.01 + 0.002).astype(np.float32)), c("wz", np.zeros(4, np.int8)),
     c("ys", np.float32(0.05)), c("yz", np.uint8(110)), c("bq", rng.integers(-500, 500, 4).astype(np.int32)),
     c("flat", _i(2, -1, 3)), c("mq", rng.integers(-60, 60, (3, 5)).astype(np.int8)), c("ms", np.float32(0.01)),
     c("mz", np.int8(3)), c("os", np.float32(0.1)), c("oz", np.uint8(128))], opset=13),
    {"x": _r(2, 3, 5, 6)}, None)

# --- int64 / bool / float16 / double ---------------------------------------------------------------------
CASES["dtypes_int_bool_half_double"] = (model([
    h.make_node("Div", ["ia", "ib"], ["idiv"]),
    h.make_node("Mod", ["ia", "ib"], ["imod"]),
    h.make_node("Equal", ["ia", "ib"], ["eq"]),
    h.make_node("Not", ["eq"], ["ne"]),
    h.make_node("And", ["ne", "bm"], ["both"]),
    h.make_node("Xor", ["both", "bm"], ["x1"]),
    h.make_node("Cast", ["x1"], ["x1i"], to=I64),
    h.make_node("ReduceSum", ["x1i"], ["cnt"], keepdims=0),
    h.make_node("Mul", ["ha", "hb"], ["hm"]),
    h.make_node("Sigmoid", ["hm"], ["hs"]),
    h.make_node("ReduceMean", ["hs"], ["hmean"], axes=[1], keepdims=1),
    h.make_node("Cast", ["hs"], ["hs32"], to=F),
    h.make_node("MatMul", ["da", "db"], ["dm"]),
    h.make_node("Softmax", ["dm"], ["dsm"], axis=-1),
    h.make_node("Cast", ["dsm"], ["dsm16"], to=F16)],
    [vi("ia", I64, ["N", 5]), vi("ib", I64, ["N", 5]), vi("bm", B, ["N", 5]), vi("ha", F16, [3, 4]),
     vi("hb", F16, [1, 4]), vi("da", D, [3, 4]), vi("db", D, [4, 2])],
    [vi("idiv", I64, None), vi("imod", I64, None), vi("cnt", I64, None), vi("hmean", F16, None), vi("hs32", F, None),
     vi("dsm", D, None), vi("dsm16", F16, None)], opset=13),
    {"ia": rng.integers(-20, 20, (2, 5)).astype(np.int64),
     "ib": np.array([[3, -3, 7, 1, 2], [-5, 4, 2, 9, 1]], np.int64),
     "bm": rng.random((2, 5)) > 0.5, "ha": _r(3, 4, dtype=np.float16), "hb": _r(1, 4, dtype=np.float16),
     "da": _r(3, 4, dtype=np.float64), "db": _r(4, 2, dtype=np.float64)}, None)

# --- Einsum forms with repeated operands and a three-matrix chain -------------------------------------
CASES["einsum_chain_batch_sum"] = (model([
    h.make_node("Einsum", ["a", "b", "c"], ["y"], equation="ij,jk,kl->il"),
    h.make_node("Einsum", ["t"], ["s"], equation="bijc->bc"),
    h.make_node("Einsum", ["t", "t"], ["g"], equation="bxyc,bxzc->bxyz")],
    [vi("a", F, [2, 3]), vi("b", F, [3, 4]), vi("c", F, [4, 5]), vi("t", F, ["N", 2, 3, 4])],
    [vi("y", F, None), vi("s", F, None), vi("g", F, None)], opset=12),
    {"a": _r(2, 3), "b": _r(3, 4), "c": _r(4, 5), "t": _r(2, 2, 3, 4)}, None)

# --- com.microsoft float ops onnxruntime's optimizer writes into the files it saves ---------------------
def _ms(nodes, inputs, outputs, inits=(), opset=17):
    """A model importing the com.microsoft domain (onnx infers no shapes for its ops: outputs declared)."""
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset), h.make_opsetid("com.microsoft", 1)])


def _msn(op, ins, outs, **kw):
    return h.make_node(op, ins, outs, domain="com.microsoft", **kw)


CASES["ms_fused_conv_gemm"] = (_ms([
    _msn("FusedConv", ["x", "w", "b"], ["c1"], pads=[1, 1, 1, 1], activation="LeakyRelu", activation_params=[0.2]),
    _msn("FusedConv", ["x", "w", "b", "z"], ["c2"], pads=[1, 1, 1, 1], strides=[1, 1], activation="Relu"),
    _msn("FusedConv", ["x", "w"], ["c3"], auto_pad="SAME_UPPER", activation="Clip", activation_params=[-0.5, 0.5]),
    _msn("FusedConv", ["x", "w", "b"], ["c4"], pads=[1, 1, 1, 1], activation="HardSigmoid",
         activation_params=[0.3, 0.4]),
    _msn("FusedGemm", ["a", "gw", "gb"], ["g1"], transB=1, alpha=0.5, activation="LeakyRelu", activation_alpha=0.1),
    _msn("FusedGemm", ["a", "gw2"], ["g2"], activation="Tanh")],
    [vi("x", F, ["N", 3, 5, 6]), vi("a", F, [4, 6]), vi("z", F, ["N", 4, 5, 6])],
    [vi(n, F, ["N", 4, 5, 6]) for n in ("c1", "c2", "c3", "c4")] + [vi("g1", F, [4, 3]), vi("g2", F, [4, 3])],
    [c("w", _r(4, 3, 3, 3) * 0.3), c("b", _r(4)), c("gw", _r(3, 6)), c("gb", _r(3)), c("gw2", _r(6, 3))]),
    {"x": _r(2, 3, 5, 6), "a": _r(4, 6), "z": _r(2, 4, 5, 6)},
    {"x": _r(1, 3, 5, 6), "a": _r(4, 6), "z": _r(1, 4, 5, 6)})
CASES["ms_matmul_gelus"] = (_ms([
    _msn("FusedMatMul", ["p", "q"], ["m1"], transA=1, transB=1, alpha=0.25),
    _msn("FusedMatMul", ["p", "r"], ["m2"]),
    _msn("Gelu", ["m2"], ["e1"]),
    _msn("BiasGelu", ["m2", "bias"], ["e2"]),
    _msn("FastGelu", ["m2", "bias"], ["e3"]),
    _msn("FastGelu", ["m2"], ["e4"]),
    _msn("QuickGelu", ["m2"], ["e5"], alpha=1.5)],
    [vi("p", F, ["N", 3, 4]), vi("q", F, [5, 3]), vi("r", F, [4, 5])],
    [vi("m1", F, ["N", 4, 5])] + [vi(n, F, ["N", 3, 5]) for n in ("m2", "e1", "e2", "e3", "e4", "e5")],
    [c("bias", _r(5))]),
    {"p": _r(2, 3, 4), "q": _r(5, 3), "r": _r(4, 5)}, {"p": _r(3, 3, 4), "q": _r(5, 3), "r": _r(4, 5)})

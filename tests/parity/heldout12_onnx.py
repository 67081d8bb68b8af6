"""Hand-built ONNX files for the twelfth held-out zoo (test_heldout12_zoo.py): ops zoos 4-11 leave out,
those ONNX defines by a function body and the newest opsets': SequenceMap (one and two sequences, a
tensor input, two outputs, elements of different lengths, a body with its own Loop-free ops), BitCast-26
(float32 <-> uint32 exponent tricks, float16, float64, bfloat16), CausalConvWithState-27
(Mamba's stateful depthwise causal conv, with and without past state, bias and SiLU), LinearAttention-27
(every update rule, grouped heads, a past state, a dynamic batch and length), CumProd-26 (exclusive,
reverse); onnxruntime is the reference. ``REFUSED``: Bernoulli (random), a BitCast between widths,
refused naming the node.

``CASES``: name -> (ModelProto, feeds, other feeds or None). Built at import (small).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h

from heldout4_onnx import c, model, vi

F, I64, B = T.FLOAT, T.INT64, T.BOOL
CASES = {}
rng = np.random.default_rng(12)


def _r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _i(*a):
    return np.array(a, np.int64)


def _body(nodes, ins, outs):
    return h.make_graph(nodes, "body", [vi(n, t, None) for n, t in ins], [vi(n, t, None) for n, t in outs])


# --- SequenceMap (opset 17): expanded into its ONNX function body (a Loop of SequenceAt / SequenceInsert) --
# one sequence of rows of uneven lengths (SplitToSequence by sizes), a body of two ops, concatenated back
CASES["sequencemap_uneven"] = (model([
    h.make_node("SplitToSequence", ["x", "sizes"], ["s"], axis=1),
    h.make_node("SequenceMap", ["s"], ["o"], body=_body([
        h.make_node("ReduceMax", ["a"], ["m"], keepdims=1, axes=[1]),
        h.make_node("Sub", ["a", "m"], ["b"]),
    ], [("a", F)], [("b", F)])),
    h.make_node("ConcatFromSequence", ["o"], ["y"], axis=1),
    h.make_node("SequenceLength", ["o"], ["n"]),
], [vi("x", F, ["b", 7])], [vi("y", F, ["b", 7]), vi("n", I64, [])], [c("sizes", _i(2, 4, 1))], opset=17),
    {"x": _r(3, 7)}, {"x": _r(1, 7)})

# two sequences and a tensor input, two outputs (a tensor's sequence and its sum)
CASES["sequencemap_two_seqs_two_outputs"] = (model([
    h.make_node("SplitToSequence", ["x"], ["sx"], axis=0, keepdims=0),
    h.make_node("SplitToSequence", ["y"], ["sy"], axis=0, keepdims=0),
    h.make_node("SequenceMap", ["sx", "sy", "w"], ["o1", "o2"], body=_body([
        h.make_node("MatMul", ["a", "ww"], ["aw"]),
        h.make_node("Mul", ["aw", "bb"], ["p"]),
        h.make_node("ReduceSum", ["p"], ["s"], keepdims=0),
    ], [("a", F), ("bb", F), ("ww", F)], [("p", F), ("s", F)])),
    h.make_node("ConcatFromSequence", ["o1"], ["p"], axis=0, new_axis=1),
    h.make_node("ConcatFromSequence", ["o2"], ["s"], axis=0, new_axis=1),
], [vi("x", F, ["n", 3, 4]), vi("y", F, ["n", 3, 5])], [vi("p", F, ["n", 3, 5]), vi("s", F, ["n"])],
    [c("w", _r(4, 5))], opset=17),
    {"x": _r(2, 3, 4), "y": _r(2, 3, 5)}, {"x": _r(4, 3, 4), "y": _r(4, 3, 5)})

# a body reading an outer-scope value (the column maxima) and giving a second, int64 output (each
# element's Shape), elements of 1 and 3 rows
CASES["sequencemap_outer_scope_shapes"] = (model([
    h.make_node("ReduceMax", ["x"], ["outer"], axes=[0], keepdims=1),
    h.make_node("SplitToSequence", ["x", "sizes"], ["sq"], axis=0),
    h.make_node("SequenceMap", ["sq"], ["o", "shapes"], name="m", body=h.make_graph(
        [h.make_node("Mul", ["a", "outer"], ["b"]), h.make_node("Shape", ["a"], ["s"])], "body",
        [vi("a", F, None)], [vi("b", F, None), vi("s", I64, None)])),
    h.make_node("ConcatFromSequence", ["o"], ["y"], axis=0),
    h.make_node("ConcatFromSequence", ["shapes"], ["ss"], axis=0, new_axis=1),
], [vi("x", F, [4, 3])], [vi("y", F, [4, 3]), vi("ss", I64, [2, 2])], [c("sizes", _i(1, 3))], opset=17),
    {"x": _r(4, 3)}, {"x": _r(4, 3)})

# --- BitCast-26 ---------------------------------------------------------------------------------------
# float32 -> uint32, the exponent field by shift and mask (a fast floor(log2|x|)), and back to float32
# with the exponent replaced (x scaled into [1, 2)); float16 -> int16, float64 -> int64, bfloat16 (cast in
# the graph: onnxruntime takes no bfloat16 feed) -> uint16 (onnxruntime 1.32 has no bool BitCast)


CASES["bitcast26"] = (model([
    h.make_node("BitCast", ["x"], ["u"], to=T.UINT32),
    h.make_node("BitShift", ["u", "s23"], ["sh"], direction="RIGHT"),
    h.make_node("BitwiseAnd", ["sh", "m255"], ["e"]),
    h.make_node("Cast", ["e"], ["ei"], to=T.INT32),
    h.make_node("Sub", ["ei", "b127"], ["log2"]),
    h.make_node("BitwiseAnd", ["u", "mant"], ["mu"]),
    h.make_node("BitwiseOr", ["mu", "one"], ["m1"]),
    h.make_node("BitCast", ["m1"], ["mf"], to=T.FLOAT),
    h.make_node("BitCast", ["hf"], ["hi"], to=T.INT16),
    h.make_node("BitCast", ["d"], ["di"], to=T.INT64),
    h.make_node("Cast", ["x"], ["bf"], to=T.BFLOAT16),
    h.make_node("BitCast", ["bf"], ["bu"], to=T.UINT16),
], [vi("x", F, ["n", 4]), vi("hf", T.FLOAT16, ["n", 3]), vi("d", T.DOUBLE, ["n"])],
    [vi("log2", T.INT32, None), vi("mf", F, None), vi("hi", T.INT16, None), vi("di", T.INT64, None),
     vi("bu", T.UINT16, None)],
    [c("s23", np.array(23, np.uint32)), c("m255", np.array(255, np.uint32)), c("b127", np.array(127, np.int32)),
     c("mant", np.array(0x007FFFFF, np.uint32)), c("one", np.array(0x3F800000, np.uint32))], opset=26),
    {"x": (_r(3, 4) * 100), "hf": _r(3, 3, dtype=np.float16), "d": _r(3, dtype=np.float64)},
    {"x": np.array([[1.0, 0.5, -3.0, 1e-30]], np.float32), "hf": np.array([[0.0, -0.0, np.inf]], np.float16),
     "d": np.array([np.nan])})

# --- CausalConvWithState-27 (ONNX's function body) --------------------------------------------------------
_C, _K = 3, 4
CASES["causal_conv_with_state27"] = (model([
    h.make_node("CausalConvWithState", ["x", "w", "b", "st"], ["y", "ns"], activation="silu", name="ccs"),
    h.make_node("CausalConvWithState", ["x", "w"], ["y0", "ns0"], name="ccs_nostate"),
], [vi("x", F, ["b", _C, "t"]), vi("st", F, ["b", _C, _K - 1])],
    [vi("y", F, None), vi("ns", F, None), vi("y0", F, None), vi("ns0", F, None)],
    [c("w", _r(_C, 1, _K)), c("b", _r(_C))], opset=27),
    {"x": _r(2, _C, 6), "st": _r(2, _C, _K - 1)}, {"x": _r(1, _C, 1), "st": _r(1, _C, _K - 1)})

# --- LinearAttention-27 (ONNX's function body: a Scan over time whose state is undeclared in the body) ----
_H, _KV, _D, _T = 4, 2, 4, 5


def _linear_attention(rule: str, extra: list, past: bool):
    ins = ["q", "k", "v", "past" if past else "", *extra]
    while ins[-1] == "":
        ins.pop()
    decl = [vi("q", F, ["b", "t", _H * _D]), vi("k", F, ["b", "t", _KV * _D]), vi("v", F, ["b", "t", _KV * _D])]
    decl += [vi("past", F, ["b", _KV, _D, _D])] if past else []
    decl += [vi(n, F, ["b", "t", _KV]) for n in extra if n]
    return model([h.make_node("LinearAttention", ins, ["y", "state"], q_num_heads=_H, kv_num_heads=_KV,
                              update_rule=rule, name="la")], decl, [vi("y", F, None), vi("state", F, None)], opset=27)


def _la_feeds(b: int, t: int, extra: list, past: bool):
    fd = {"q": _r(b, t, _H * _D), "k": _r(b, t, _KV * _D) * 0.3, "v": _r(b, t, _KV * _D)}
    if past:
        fd["past"] = _r(b, _KV, _D, _D) * 0.1
    if "g" in extra:
        fd["g"] = -np.abs(_r(b, t, _KV))
    if "beta" in extra:
        fd["beta"] = rng.uniform(0, 1, (b, t, _KV)).astype(np.float32)
    return fd


for _rule, _extra, _past in (("linear", [], False), ("gated", ["g"], True), ("delta", ["", "beta"], False),
                             ("gated_delta", ["g", "beta"], True)):
    CASES[f"linear_attention27_{_rule}"] = (_linear_attention(_rule, _extra, _past), _la_feeds(2, _T, _extra, _past),
                                            _la_feeds(1, 1, _extra, _past))

# --- CumProd-26 (onnxruntime 1.32 has no Swish-24) -------------------------------------------------------
CASES["cumprod26"] = (model([
    h.make_node("CumProd", ["x", "ax"], ["p"]),
    h.make_node("CumProd", ["x", "ax"], ["pe"], exclusive=1, reverse=1),
], [vi("x", F, ["b", 5])], [vi(o, F, None) for o in ("p", "pe")], [c("ax", np.array(-1, np.int64))], opset=26),
    {"x": _r(2, 5)}, {"x": _r(3, 5)})


# --- what srcore does not run: refused naming the node --------------------------------------------------
#: name -> (ModelProto, the error's pattern)
REFUSED = {
    # Bernoulli's function body draws with RandomUniformLike, which srcore has no kernel for
    "bernoulli22": (model([h.make_node("Sigmoid", ["x"], ["p"]), h.make_node("Bernoulli", ["p"], ["y"], name="coin")],
                          [vi("x", F, [3, 4])], [vi("y", F, None)], opset=22),
                    r"Bernoulli node 'coin': op not supported by srcore"),
    "bitcast_widths": (model([h.make_node("BitCast", ["x"], ["y"], to=T.INT32, name="bc")],
                             [vi("x", T.FLOAT16, [3])], [vi("y", T.INT32, None)], opset=26),
                       r"BitCast node 'bc': bit cast from float16 to int32: their widths differ"),
}

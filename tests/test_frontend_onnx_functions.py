"""Ops ONNX defines by a function body, expanded by onnx_import/expand.py; BitCast; a Scan whose body
declares no types (what such a body holds). Against onnxruntime or numpy."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T, helper as h

import srcore
from srcore.frontends.onnx_import.expand import expand_function_ops

ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.one_pass


def _vi(name, dt, shape):
    return h.make_tensor_value_info(name, dt, shape)


def _model(nodes, inputs, outputs, opset, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _ort(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _body(nodes, ins, outs):
    return h.make_graph(nodes, "body", [_vi(n, T.FLOAT, None) for n in ins], [_vi(n, T.FLOAT, None) for n in outs])


def test_sequence_map_of_a_sequence_and_a_tensor_matches_onnxruntime():
    """SequenceMap (no converter) becomes onnx's body for it: a Loop of SequenceAt, the body and
    SequenceInsert; elements of different lengths, a tensor passed to every iteration."""
    m = _model([h.make_node("SplitToSequence", ["x", "sizes"], ["s"], axis=1),
                h.make_node("SequenceMap", ["s", "w"], ["o"], name="map",
                            body=_body([h.make_node("Mul", ["a", "ww"], ["b"])], ["a", "ww"], ["b"])),
                h.make_node("ConcatFromSequence", ["o"], ["y"], axis=1)],
               [_vi("x", T.FLOAT, ["n", 6]), _vi("w", T.FLOAT, [])], [_vi("y", T.FLOAT, ["n", 6])], 17,
               [h.make_tensor("sizes", T.INT64, [3], [1, 2, 3])])
    sm = srcore.StaticModule(srcore.from_onnx(m))
    for n in (3, 1):
        feeds = {"x": np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32), "w": np.array(-2.5, np.float32)}
        np.testing.assert_allclose(sm(**feeds), _ort(m, feeds)[0], rtol=1e-6)


def test_a_body_srcore_cannot_convert_is_not_expanded_and_the_node_is_refused_by_its_name():
    """Bernoulli's body draws with RandomUniformLike: left as it is, refused as Bernoulli."""
    m = _model([h.make_node("Bernoulli", ["x"], ["y"], name="coin")], [_vi("x", T.FLOAT, [3])],
               [_vi("y", T.FLOAT, [3])], 22)
    with pytest.raises(srcore.ConversionError, match=r"Bernoulli node 'coin': op not supported by srcore"):
        srcore.from_onnx(m)


def test_a_model_without_such_ops_is_left_as_it_is():
    import onnx

    m = _model([h.make_node("MeanVarianceNormalization", ["x"], ["y"])], [_vi("x", T.FLOAT, [1, 2, 3, 3])],
               [_vi("y", T.FLOAT, [1, 2, 3, 3])], 18)
    assert expand_function_ops(onnx, m, 18, "<m>") is m


def test_an_error_inside_an_expanded_body_names_the_node_it_came_from():
    """A CausalConvWithState whose input rank ONNX cannot know: the error names 'conv' in its body's node."""
    import onnx

    m = _model([h.make_node("CausalConvWithState", ["x", "w"], ["y", "s"], name="conv")],
               [_vi("x", T.FLOAT, [1, 2, 5]), _vi("w", T.FLOAT, [2, 1, 3])], [_vi("y", T.FLOAT, None),
                                                                                _vi("s", T.FLOAT, None)], 27)
    out = expand_function_ops(onnx, m, 27, "<m>")
    assert not any(n.op_type == "CausalConvWithState" for n in out.graph.node)
    assert all(n.name.startswith("conv/CausalConvWithState:") for n in out.graph.node)
    assert not out.functions and all(o.domain != "srcore.expanded" for o in out.opset_import)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"), ("float16", "int16"),
                                     ("float64", "uint64"), ("uint8", "int8"), ("bfloat16", "uint16"),
                                     ("bool", "uint8")])
def test_bit_cast_is_a_view_of_the_same_bits(src, dst):
    """Against numpy's ``view`` (ml_dtypes' bfloat16): NaN, infinities, -0 and subnormals kept bit for bit."""
    from srcore.frontends.onnx_import.dtypes import DTYPE_TO_ONNX, np_dtype

    vals = np.array([0.0, -0.0, 1.5, -3.25, np.inf, -np.inf, np.nan, 1e-40, 7.0, 255.0])
    x = (vals > 0) if src == "bool" else vals.astype(np_dtype(src)) if "int" not in src else \
        np.arange(-5, 5).astype(np_dtype(src))
    m = _model([h.make_node("BitCast", ["x"], ["y"], to=DTYPE_TO_ONNX[dst])], [_vi("x", DTYPE_TO_ONNX[src], [10])],
               [_vi("y", DTYPE_TO_ONNX[dst], [10])], 26)
    got = srcore.StaticModule(srcore.from_onnx(m))(x)
    assert got.dtype == np_dtype(dst)
    np.testing.assert_array_equal(got, x.view(np_dtype(dst)))


def test_bit_cast_between_widths_is_refused_naming_the_node():
    m = _model([h.make_node("BitCast", ["x"], ["y"], to=T.INT64, name="bc")], [_vi("x", T.FLOAT, [2])],
               [_vi("y", T.INT64, [2])], 26)
    with pytest.raises(srcore.ConversionError, match=r"BitCast node 'bc': bit cast from float32 to int64: "
                                                     r"their widths differ"):
        srcore.from_onnx(m)


@pytest.mark.parametrize("out_axis", [0, 1, -1])
def test_scan_whose_body_declares_no_types_matches_onnxruntime(out_axis):
    """A Scan body with untyped inputs (as function bodies have: ONNX infers nothing inside), an
    Unsqueeze by an outer-scope axes constant, and a Transpose of the stacked scan output: srcore's
    rules type the slices and the stacked output (they were of unknown rank: 'the rank of input 0 is
    unknown'). A dynamic batch, one step and several."""
    body = h.make_graph([h.make_node("Unsqueeze", ["x_t", "neg1"], ["col"]),
                         h.make_node("Unsqueeze", ["x_t", "neg2"], ["row"]),
                         h.make_node("MatMul", ["col", "row"], ["outer"]),
                         h.make_node("Add", ["s_in", "outer"], ["s_out"]),
                         h.make_node("ReduceSum", ["s_out", "neg1"], ["r"], keepdims=0)],
                        "step", [_vi("s_in", T.FLOAT, None), _vi("x_t", T.FLOAT, None)],
                        [_vi("s_out", T.FLOAT, None), _vi("r", T.FLOAT, None)])
    m = _model([h.make_node("Scan", ["s0", "x"], ["s", "rs"], num_scan_inputs=1, body=body,
                            scan_input_axes=[1], scan_output_axes=[out_axis]),
                h.make_node("Transpose", ["rs"], ["rt"], perm=[2, 1, 0])],
               [_vi("s0", T.FLOAT, ["b", 3, 3]), _vi("x", T.FLOAT, ["b", "t", 3])],
               [_vi("s", T.FLOAT, ["b", 3, 3]), _vi("rt", T.FLOAT, ["d0", "d1", "d2"])], 18,
               [h.make_tensor("neg1", T.INT64, [1], [-1]), h.make_tensor("neg2", T.INT64, [1], [-2])])
    sm = srcore.StaticModule(srcore.from_onnx(m))
    rng = np.random.default_rng(0)
    for b, t in ((2, 4), (1, 1)):
        feeds = {"s0": rng.standard_normal((b, 3, 3)).astype(np.float32),
                 "x": rng.standard_normal((b, t, 3)).astype(np.float32)}
        for g, w in zip(sm(**feeds), _ort(m, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [17, 19, 21, 28])
def test_sequence_map_in_a_file_of_a_newer_opset_matches_onnxruntime(opset):
    """onnx builds SequenceMap's body at opset 17 only; onnx's inliner inlines only functions of the
    model's opset, so the body is brought to it (unchanged ops: the opset set; else onnx's version
    converter). The user's body, written at the file's opset, reads its axes from an input (ReduceMax-18)."""
    axes_from_input = opset >= 18
    reduce = (h.make_node("ReduceMax", ["a", "ax"], ["m"], keepdims=1) if axes_from_input
              else h.make_node("ReduceMax", ["a"], ["m"], keepdims=1, axes=[0]))
    m = _model([h.make_node("SplitToSequence", ["x"], ["sq"], axis=0, keepdims=0),
                h.make_node("SequenceMap", ["sq"], ["o"], name="m",
                            body=_body([reduce, h.make_node("Sub", ["a", "m"], ["b"])], ["a"], ["b"])),
                h.make_node("ConcatFromSequence", ["o"], ["y"], axis=0, new_axis=1)],
               [_vi("x", T.FLOAT, [4, 3])], [_vi("y", T.FLOAT, [4, 3])], opset,
               [h.make_tensor("ax", T.INT64, [1], [0])])
    x = np.random.default_rng(opset).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(srcore.StaticModule(srcore.from_onnx(m))(x=x), _ort(m, {"x": x})[0])

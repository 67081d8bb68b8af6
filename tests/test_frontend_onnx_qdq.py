"""from_onnx of QDQ models: QuantizeLinear / DequantizeLinear onto srcore's quantized types.

An ONNX Runtime ``quantize_static`` QDQ model (per tensor and per channel) converts into
``quantized::qconv2d`` / ``qlinear`` / ``add`` and matches onnxruntime running the QDQ nodes as
ONNX defines them within one quantization step of the output; Q/DQ with parameters known only at run time follow ONNX's arithmetic exactly
(onnx's reference evaluator); what srcore cannot represent is a ConversionError naming the node.
"""
from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import srcore

pytestmark = pytest.mark.one_pass   # conversion checks and a few runs: the executor is tested elsewhere


def _float_net(rng):
    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"]),
             helper.make_node("Relu", ["a"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
                          [init("w1", (8, 3, 3, 3), 0.3), init("b1", (8,), 0.3), init("w2", (8, 8, 3, 3), 0.1),
                           init("b2", (8,), 0.3), init("wf", (5, 8), 0.3), init("bf", (5,), 0.3)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _quantize(tmp_path, per_channel: bool):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(0)
    onnx.save(_float_net(rng), str(tmp_path / "float.onnx"))
    batches = iter([{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(8)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(batches, None)

    out = tmp_path / "qdq.onnx"
    quantize_static(str(tmp_path / "float.onnx"), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=per_channel, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return out


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_onnxruntime_qdq_model_folds_into_quantized_ops_and_matches(tmp_path, per_channel):
    path = _quantize(tmp_path, per_channel)
    proto = onnx.load(str(path))
    assert {n.op_type for n in proto.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    model = srcore.from_onnx(str(path))
    kinds = collections.Counter(n.kind for n in model.graph.all_nodes())
    assert kinds["quantized::qconv2d"] == 2 and kinds["quantized::add"] == 1 and kinds["quantized::qlinear"] == 1
    assert kinds["aten::conv2d"] == 0 and kinds["aten::linear"] == 0
    qparams = [p for p in model.params.values() if getattr(p, "qdtype", None)]
    assert {p.qdtype for p in qparams} == {"qint8"} and len(qparams) == 3   # the folded ops' weights stay int8
    assert any(p.qparams.per_channel for p in qparams) == per_channel
    # the reference: onnxruntime running the QDQ nodes as ONNX defines them (float ops between
    # quantize and dequantize; its optimized QLinear kernels round differently, up to 5 output steps
    # apart from this on these inputs). The folded integer ops agree with it within one output step.
    inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    (out_dq,) = [n for n in proto.graph.node if n.output[0] == "y"]
    step = float(inits[out_dq.input[1]])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    sm = srcore.StaticModule(model)
    for seed in range(4):
        x = np.random.default_rng(10 + seed).standard_normal((1, 3, 8, 8)).astype(np.float32)
        got, want = np.asarray(sm(x)), sess.run(None, {"x": x})[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=0, atol=1.01 * step)


def _qdq_node(op, xs, attrs=None, out_dtype=TensorProto.UINT8):
    """A one-node model whose every input is a graph input: parameters known only at run time."""
    names = [f"i{k}" for k in range(len(xs))]
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
           for n, x in zip(names, xs)]
    g = helper.make_graph([node], "q", ins, [helper.make_tensor_value_info("y", out_dtype, xs[0].shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


CASES = [
    # QuantizeLinear: ties (x / scale = k + 0.5) round half to even; saturation both ways
    ("QuantizeLinear", [np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 7.24], np.float32),
                        np.array(1.0, np.float32), np.array(10, np.uint8)], {}, TensorProto.UINT8),
    ("QuantizeLinear", [np.array([[-3.0, 1.0], [250.0, -251.0]], np.float32), np.array(2.0, np.float32),
                        np.array(-3, np.int8)], {}, TensorProto.INT8),
    ("QuantizeLinear", [np.array([-70000.0, 3.0, 5.0, 70000.0], np.float32), np.array(2.0, np.float32),
                        np.array(7, np.int16)], {}, TensorProto.INT16),
    ("QuantizeLinear", [np.arange(-12, 12, dtype=np.float32).reshape(2, 3, 4), np.array([0.5, 2.0, 3.0], np.float32),
                        np.array([0, 10, 250], np.uint8)], {"axis": 1}, TensorProto.UINT8),
    ("QuantizeLinear", [np.array([1.0, -2.0, 3.3], np.float32), np.array(0.5, np.float32)], {}, TensorProto.UINT8),
    # blocked: blocks of 2 along axis 1 (the last one short); a float16 scale divides in float16
    ("QuantizeLinear", [np.linspace(-9, 9, 10, dtype=np.float32).reshape(2, 5),
                        np.array([[0.5, 1.0, 2.0], [3.0, 0.25, 1.5]], np.float32),
                        np.array([[1, -2, 3], [0, 5, -7]], np.int8)], {"axis": 1, "block_size": 2}, TensorProto.INT8),
    ("QuantizeLinear", [np.array([1001.0, 3.7, -2.5], np.float32), np.array(0.3, np.float16),
                        np.array(0, np.int16)], {}, TensorProto.INT16),
    # DequantizeLinear: int32 without wrap-around, per axis (negative axis), float16 scale
    ("DequantizeLinear", [np.array([0, 3, 128, 255], np.uint8), np.array(2.0, np.float32), np.array(128, np.uint8)],
     {}, TensorProto.FLOAT),
    ("DequantizeLinear", [np.array([-2 ** 31, 2 ** 31 - 1, 5], np.int32), np.array(0.5, np.float32),
                          np.array(7, np.int32)], {}, TensorProto.FLOAT),
    ("DequantizeLinear", [np.arange(24, dtype=np.int8).reshape(2, 3, 4), np.array([0.5, 2.0, 3.0, 1.5], np.float32),
                          np.array([0, -10, 100, 3], np.int8)], {"axis": -1}, TensorProto.FLOAT),
    ("DequantizeLinear", [np.array([-300, 5, 1270], np.int16), np.array(0.25, np.float16)], {}, TensorProto.FLOAT16),
    ("DequantizeLinear", [np.arange(-6, 6, dtype=np.int8).reshape(4, 3), np.array([[0.5, 2.0, 3.0], [1.5, 0.1, 7.0]],
                          np.float32), np.array([[0, 1, -1], [2, 3, 4]], np.int8)], {"axis": 0, "block_size": 3},
     TensorProto.FLOAT),
]


@pytest.mark.parametrize("op,xs,attrs,out", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_runtime_parameters_follow_onnx_arithmetic(op, xs, attrs, out):
    m = _qdq_node(op, xs, attrs, out)
    want = ReferenceEvaluator(m).run(None, {f"i{k}": x for k, x in enumerate(xs)})[0]
    got = np.asarray(srcore.StaticModule(srcore.from_onnx(m))(*xs))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_constant_parameters_quantize_to_quantized_values():
    x = np.array([[0.5, 1.5, 2.5, 1000.0, -3.0, 0.26]], np.float32)
    s, z = numpy_helper.from_array(np.array(0.5, np.float32), "s"), numpy_helper.from_array(np.array(3, np.uint8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
                          [helper.make_tensor_value_info("q", TensorProto.UINT8, [1, 6]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])], [s, z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    model = srcore.from_onnx(m)
    kinds = [n.kind for n in model.graph.all_nodes() if n.kind != "prim::Constant"]
    assert kinds == ["aten::quantize_per_tensor", "aten::int_repr", "aten::dequantize"]
    q, y = srcore.StaticModule(model)(x)
    want_q, want_y = ReferenceEvaluator(m).run(None, {"x": x})
    np.testing.assert_array_equal(np.asarray(q), want_q)
    np.testing.assert_array_equal(np.asarray(y), want_y)


def test_what_srcore_cannot_represent_names_the_node():
    m = _qdq_node("QuantizeLinear", [np.zeros(4, np.float32), np.ones((), np.float32)],
                  {"output_dtype": TensorProto.FLOAT4E2M1}, TensorProto.FLOAT4E2M1)
    m.graph.node[0].name = "q4"
    with pytest.raises(srcore.ConversionError, match=r"q4.*FLOAT4E2M1"):
        srcore.from_onnx(m)


def test_without_the_quantized_plugin_qdq_runs_as_float_arithmetic(tmp_path, monkeypatch):
    from srcore.frontends.onnx_import.ops import quant

    declared = quant.declared_ops() - {"aten::quantize_per_tensor", "aten::int_repr", "aten::dequantize"}
    monkeypatch.setattr(quant, "declared_ops", lambda: declared)
    path = _quantize(tmp_path, per_channel=False)
    model = srcore.from_onnx(str(path))
    assert not any(n.kind.startswith("quantized::") or "quantize" in n.kind for n in model.graph.all_nodes())
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    proto = onnx.load(str(path))
    step = float(next(numpy_helper.to_array(t) for t in proto.graph.initializer
                      if t.name == next(n for n in proto.graph.node if n.output[0] == "y").input[1]))
    np.testing.assert_allclose(np.asarray(srcore.StaticModule(model)(x)), want, rtol=0, atol=1.01 * step)


def test_a_negative_scale_follows_onnx_arithmetic_not_a_quantized_type():
    x = np.array([1.0, -2.0, 0.0, 300.0], np.float32)
    s = numpy_helper.from_array(np.array(-0.5, np.float32), "s")
    z = numpy_helper.from_array(np.array(3, np.uint8), "z")
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], "q",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [4])], [s, z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    model = srcore.from_onnx(m)   # srcore's quantized types need a positive scale: float arithmetic
    assert "aten::quantize_per_tensor" not in {n.kind for n in model.graph.all_nodes()}
    np.testing.assert_array_equal(np.asarray(srcore.StaticModule(model)(x)), want)

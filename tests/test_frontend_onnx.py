"""from_onnx: reading files (initializers, external data, dim_param), what a converted graph holds,
and bad input (truncated/invalid files, too-new opsets, missing external data, unsupported ops)
as one SrcoreError naming the file and node. Values are checked against onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import srcore

pytestmark = pytest.mark.one_pass


def _mlp(opset: int = 17, batch="N", external: bool = False):
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 8)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((4, 16)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="act"),
             helper.make_node("MatMul", ["r", "w2t"], ["y"], name="fc2")]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
             numpy_helper.from_array(np.ascontiguousarray(w2.T), "w2t")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model, *xs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})


def test_file_with_symbolic_batch_matches_onnxruntime(tmp_path):
    m = _mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(m, str(path))
    model = srcore.from_onnx(str(path))
    (spec,) = model.input_specs
    assert (spec.name, spec.dtype, spec.shape) == ("x", "float32", ("N", 8))
    assert model.output_names == ("y",)
    assert set(model.params) == {"w1", "b1", "w2t"}
    assert model.metadata["source"] == "mlp.onnx"  # the base name, never the converting machine's path
    kinds = [n.kind for n in model.graph.nodes if n.kind != "prim::Constant"]
    assert kinds == ["aten::linear", "aten::relu", "aten::matmul"]
    sm = srcore.StaticModule(model)
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        np.testing.assert_allclose(sm(x), _ort(m, x)[0], rtol=1e-5, atol=1e-5)


def test_model_proto_bytes_and_a_saved_srm_round_trip(tmp_path):
    m = _mlp()
    x = np.ones((2, 8), np.float32)
    want = _ort(m, x)[0]
    for src in (m, m.SerializeToString()):
        model = srcore.from_onnx(src)
        srcore.save(model, str(tmp_path / "m.srm"))
        np.testing.assert_allclose(srcore.StaticModule(srcore.load(str(tmp_path / "m.srm")))(x), want,
                                   rtol=1e-5, atol=1e-5)


def test_external_data_is_read_and_memory_mapped(tmp_path):
    m = _mlp()
    onnx.save(m, str(tmp_path / "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.data", size_threshold=0)
    model = srcore.from_onnx(str(tmp_path / "ext.onnx"))
    assert isinstance(model.params["w1"], np.memmap) and not model.params["w1"].flags.writeable
    x = np.ones((3, 8), np.float32)
    np.testing.assert_allclose(srcore.StaticModule(model)(x), _ort(_mlp(), x)[0], rtol=1e-5, atol=1e-5)


def test_missing_or_truncated_external_data_names_the_tensor(tmp_path):
    m = _mlp()
    path = tmp_path / "ext.onnx"
    onnx.save(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="ext.data",
              size_threshold=0)
    data = tmp_path / "ext.data"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(srcore.ConversionError, match=r"initializer 'w\w+'.*truncated"):
        srcore.from_onnx(str(path))
    data.unlink()
    with pytest.raises(srcore.ConversionError, match=r"initializer 'w1'.*ext.data.* is missing"):
        srcore.from_onnx(str(path))


def test_an_attribute_no_converter_reads_is_reported(monkeypatch):
    """A valid attribute the converter does not handle is never silently ignored."""
    from srcore.frontends.onnx_import.ops import TABLE, elementwise

    monkeypatch.setitem(TABLE, "LeakyRelu", TABLE["LeakyRelu"].__class__(elementwise.unary("aten::relu"),
                                                                         TABLE["LeakyRelu"].versions))
    g = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=0.2)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(srcore.ConversionError, match=r"LeakyRelu node 'lr': attribute alpha not supported"):
        srcore.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def test_external_data_outside_the_model_directory_is_refused(tmp_path):
    m = _mlp()
    for t in m.graph.initializer:
        if t.name == "w1":
            arr = numpy_helper.to_array(t)
            (tmp_path / "secret.bin").write_bytes(arr.tobytes())
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
            t.external_data.add(key="location", value="../secret.bin")
    sub = tmp_path / "model"
    sub.mkdir()
    onnx.save(m, str(sub / "m.onnx"))
    with pytest.raises(srcore.ConversionError, match=r"'w1'.*must be a relative path inside"):
        srcore.from_onnx(str(sub / "m.onnx"))


def test_truncated_and_invalid_files_name_the_file(tmp_path):
    good = _mlp().SerializeToString()
    for name, data in [("trunc.onnx", good[: len(good) // 3]), ("empty.onnx", b""),
                       ("text.onnx", b"this is not an onnx model\n" * 10)]:
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(srcore.ConversionError, match=name) as info:
            srcore.from_onnx(str(path))
        assert "Traceback" not in str(info.value)
    with pytest.raises(srcore.ConversionError, match="cannot read"):
        srcore.from_onnx(str(tmp_path / "nope.onnx"))


def test_a_graph_that_uses_an_undefined_value_is_invalid(tmp_path):
    m = _mlp()
    m.graph.node[1].input[0] = "nowhere"
    onnx.save(m, str(tmp_path / "bad.onnx"))
    with pytest.raises(srcore.ConversionError, match=r"bad.onnx: invalid ONNX model.*nowhere"):
        srcore.from_onnx(str(tmp_path / "bad.onnx"))


def test_too_new_opset_is_refused():
    m = _mlp()
    m.opset_import[0].version = onnx.defs.onnx_opset_version() + 5
    with pytest.raises(srcore.ConversionError, match=r"opset \d+ is newer than the newest"):
        srcore.from_onnx(m)


def test_old_opset_goes_through_the_version_converter():
    g = helper.make_graph([helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
                           helper.make_node("ReduceSum", ["u"], ["y"], axes=[2], keepdims=0)], "old",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    model = srcore.from_onnx(m)
    assert model.metadata["onnx_opset"] == "11"
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(srcore.StaticModule(model)(x), x.sum(1)[None])


def test_an_attribute_the_op_does_not_have_is_an_invalid_model():
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], name="soft", bogus=3)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    with pytest.raises(srcore.ConversionError, match=r"invalid ONNX model.*bogus.*soft"):
        srcore.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def test_every_unsupported_node_and_attribute_is_listed_at_once():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("StringNormalizer", ["s"], ["s2"], name="strings"),
             helper.make_node("MaxPool", ["a"], ["b"], name="pool", kernel_shape=[1], storage_order=1),
             helper.make_node("Custom", ["b"], ["c"], name="mine", domain="com.example"),
             helper.make_node("Relu", ["c"], ["y"], name="after")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                                       helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.raises(srcore.ConversionError) as info:
        srcore.from_onnx(m)
    msg = str(info.value)
    assert "graph input 's': element type STRING is not supported" in msg
    assert "MaxPool node 'pool': storage_order=1" in msg
    assert "Custom node 'mine': domain 'com.example' is not supported" in msg
    assert "StringNormalizer node 'strings': op not supported" in msg
    assert "'after'" not in msg  # it only follows a reported node


def test_converted_nodes_carry_the_onnx_node_as_their_source():
    model = srcore.from_onnx(_mlp())
    relu = next(n for n in model.graph.nodes if n.kind == "aten::relu")
    assert str(relu.source) == "<ModelProto>:act:2"
    assert relu.output.name == "r"


def test_dim_param_dims_are_shared_symbols():
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", "seq"]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])])
    model = srcore.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert [s.shape for s in model.input_specs] == [("batch", "seq"), ("batch", 1)]
    sm = srcore.StaticModule(model)
    a, b = np.ones((2, 5), np.float32), np.full((2, 1), 2, np.float32)
    np.testing.assert_allclose(sm(a, b), a + b)
    with pytest.raises(srcore.SrcoreInputError, match="'b'"):
        sm(a, np.ones((3, 1), np.float32))  # batch must agree between the inputs


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.float32)))


@pytest.mark.parametrize("half_first", [False, True])
def test_exported_gelu_and_linear_are_put_back_together(half_first):
    """torch's exporter writes gelu as Div/Erf/Add/Mul/Mul and a Linear on 3-D input as MatMul + Add:
    from_onnx makes them aten::gelu and aten::linear again (one op each, fusable), same values."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    gelu = [_const("s2", np.sqrt(2.0)), _const("one", 1.0), _const("half", 0.5),
            helper.make_node("Div", ["h", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["a"])]
    gelu += ([helper.make_node("Mul", ["h", "half"], ["m"]), helper.make_node("Mul", ["m", "a"], ["y"])] if half_first
             else [helper.make_node("Mul", ["h", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["b", "mm"], ["h"]), *gelu]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 6])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model = srcore.from_onnx(m)
    kinds = [n.kind for n in model.graph.nodes if n.kind != "prim::Constant"]
    assert kinds == ["aten::linear", "aten::gelu"]
    assert set(model.params) == {"w.T", "b"}
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    np.testing.assert_allclose(srcore.StaticModule(model)(x), _ort(m, x)[0], rtol=1e-5, atol=1e-6)


def test_a_pattern_with_other_uses_is_left_alone():
    nodes = [_const("s2", np.sqrt(2.0)), _const("one", 1.0), _const("half", 0.5),
             helper.make_node("Div", ["x", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]),
                           helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])])   # erf is an output too
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model = srcore.from_onnx(m)
    assert not any(n.kind == "aten::gelu" for n in model.graph.nodes)
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    for got, want in zip(srcore.StaticModule(model)(x), _ort(m, x)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("scaled", ["qk", "scores", "none"])
def test_exported_attention_becomes_sdpa(scaled):
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])]
    if scaled == "qk":   # torch's exporter scales q and kᵀ by sqrt(scale) each
        nodes += [_const("s", 0.125 ** 0.5), helper.make_node("Mul", ["q", "s"], ["qs"]),
                  helper.make_node("Mul", ["kt", "s"], ["kts"]), helper.make_node("MatMul", ["qs", "kts"], ["sc"])]
    elif scaled == "scores":
        nodes += [_const("d", 8.0), helper.make_node("MatMul", ["q", "kt"], ["raw"]),
                  helper.make_node("Div", ["raw", "d"], ["sc"])]
    else:
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["sc"])]
    nodes += [helper.make_node("Softmax", ["sc"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    t = [1, 2, 5, 4]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, t) for n in "qkv"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, t)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model = srcore.from_onnx(m)
    assert [n.kind for n in model.graph.nodes if n.kind != "prim::Constant"] == \
        ["aten::scaled_dot_product_attention"]
    q, k, v = (np.random.default_rng(i).standard_normal(t).astype(np.float32) for i in range(3))
    np.testing.assert_allclose(srcore.StaticModule(model)(q, k, v), _ort(m, q, k, v)[0], rtol=1e-5, atol=1e-6)


def test_bfloat16_inputs_and_initializers_compute_as_torch():
    import ml_dtypes
    import torch

    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(3)
    b = rng.standard_normal((2, 3)).astype(bf16)
    nodes = [helper.make_node("Mul", ["x", "b"], ["m"]), helper.make_node("Add", ["m", "x"], ["s"]),
             helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "bf", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [numpy_helper.from_array(b, "b")])
    model = srcore.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert model.input_specs[0].dtype == "bfloat16" and model.params["b"].dtype == bf16
    x = rng.standard_normal((2, 3)).astype(bf16)
    tx, tb = (torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16) for a in (x, b))
    want = (tx * tb + tx).float().numpy()
    np.testing.assert_array_equal(np.asarray(srcore.StaticModule(model)(x)), want)


@pytest.mark.parametrize("shape,attrs", [
    ((1, 2, 7, 8), {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [1, 2]}),
    ((1, 3, 6, 7), {"kernel_shape": [3, 3], "pads": [0, 2, 1, 0], "count_include_pad": 0}),
    ((2, 2, 7, 6), {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3], "dilations": [2, 1, 2], "strides": [2, 3, 1], "ceil_mode": 1,
                       "count_include_pad": 1}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
], ids=["dilated", "asym-pads-exclude", "ceil-pads", "3d-dilated-ceil-include", "same-lower"])
def test_average_pool_beyond_torch_matches_onnx_reference(shape, attrs):
    from onnx.reference import ReferenceEvaluator

    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "p", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, want.shape))
    got = np.asarray(srcore.StaticModule(srcore.from_onnx(m))(x))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("order", [0, 1])
def test_max_pool_indices_are_onnx_flat_indices(order):
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 6)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                            storage_order=order)
    g = helper.make_graph([node], "p", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 3, 3]),
                           helper.make_tensor_value_info("i", TensorProto.INT64, [2, 3, 3, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    y, i = srcore.StaticModule(srcore.from_onnx(m))(x)
    want_y, want_i = _ort(m, x)
    np.testing.assert_array_equal(np.asarray(y), want_y)
    np.testing.assert_array_equal(np.asarray(i), want_i)


@pytest.mark.parametrize("reduction", ["mul", "max", "min"])
def test_scatter_nd_reductions_with_duplicate_indices_match_onnx_reference(reduction):
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(6)
    data = rng.standard_normal((4, 3, 5)).astype(np.float32)
    idx = np.array([[[1, 2], [3, -1]], [[1, 2], [0, 0]]], np.int64)      # (1, 2) twice, a negative index
    upd = rng.standard_normal((2, 2, 5)).astype(np.float32)
    node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=reduction)
    g = helper.make_graph([node], "s", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                      a.shape) for n, a in (("d", data), ("u", upd))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, data.shape)],
                          [numpy_helper.from_array(idx, "i")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    want = ReferenceEvaluator(m).run(None, {"d": data, "u": upd})[0]
    np.testing.assert_allclose(np.asarray(srcore.StaticModule(srcore.from_onnx(m))(data, upd)), want, rtol=1e-6)


def test_sequences_are_values_and_match_onnx_reference():
    """SequenceInsert/SequenceErase leave their input sequence as it was (it is used again after)."""
    from onnx.reference import ReferenceEvaluator

    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1),                 # 4 parts of (2, 1)
             helper.make_node("SequenceInsert", ["s", "x", "p"], ["s2"]),              # x in front
             helper.make_node("SequenceErase", ["s2", "m"], ["s3"]),                   # drop the last
             helper.make_node("SequenceAt", ["s", "m"], ["last"]),                     # s is unchanged
             helper.make_node("SequenceLength", ["s3"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=1),
             helper.make_node("ConcatFromSequence", ["s"], ["stk"], axis=0, new_axis=1)]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "p"), numpy_helper.from_array(np.array(-1, np.int64), "m")]
    g = helper.make_graph(nodes, "seq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("last", TensorProto.FLOAT, [2, 1]),
                           helper.make_tensor_value_info("n", TensorProto.INT64, []),
                           helper.make_tensor_value_info("cat", TensorProto.FLOAT, [2, 7]),
                           helper.make_tensor_value_info("stk", TensorProto.FLOAT, [4, 2, 1])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    want = ReferenceEvaluator(m).run(None, {"x": x})
    got = srcore.StaticModule(srcore.from_onnx(m))(x)
    for g_, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g_), w)


def test_bfloat16_through_the_torch_fallback_matches_torch():
    """Celu has no bfloat16 kernel of its own: the torch fallback runs it on ml_dtypes' bfloat16 bits."""
    import ml_dtypes
    import torch

    x = np.random.default_rng(8).standard_normal((3, 4)).astype(ml_dtypes.bfloat16)
    g = helper.make_graph([helper.make_node("Celu", ["x"], ["y"], alpha=0.7)], "c",
                          [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3, 4])])
    model = srcore.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    got = np.asarray(srcore.StaticModule(model)(x))
    want = torch.celu(torch.from_numpy(x.view(np.int16)).view(torch.bfloat16), 0.7)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.view(np.int16), want.view(torch.int16).numpy())


def test_sequence_graph_inputs_take_a_list_of_arrays():
    """A ``seq(tensor)`` graph input is a ``Tensor[]`` input (no InputSpec: its IR type says it);
    the backend passes a list of arrays; the caller's list is left as it was."""
    from onnx.reference import ReferenceEvaluator

    from srcore.frontends.onnx_import.backend import SrcoreBackend

    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    g = helper.make_graph(
        [helper.make_node("SequenceInsert", ["s", "x", "pos"], ["s2"]),
         helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0)],
        "seq", [helper.make_value_info("s", seq_t), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                helper.make_tensor_value_info("pos", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    seq = [np.array([1.0, 2.0], np.float32), np.array([3.0], np.float32)]
    x, pos = np.array([7.0, 8.0], np.float32), np.array(1)
    want = ReferenceEvaluator(m).run(None, {"s": seq, "x": x, "pos": pos})[0]
    model = srcore.from_onnx(m)
    assert [s.name for s in model.input_specs] == ["x", "pos"]
    np.testing.assert_array_equal(srcore.StaticModule(model)(seq, x, pos), want)
    (y,) = SrcoreBackend.prepare(m).run([seq, x, pos])
    np.testing.assert_array_equal(y, want)
    assert len(seq) == 2

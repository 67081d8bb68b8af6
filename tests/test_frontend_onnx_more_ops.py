"""Ops of ops/transformer.py, ops/misc.py and Upsample beyond the ONNX node tests (which
tests/test_onnx_conformance.py runs under SRCORE_ONNX_CONFORMANCE=1): a linear Upsample and an
opset-23 decoder step against onnxruntime, and refusals that name the node and the attribute."""
from __future__ import annotations

import numpy as np

import pytest
from onnx import TensorProto, helper, numpy_helper

import srcore

ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.one_pass


def _run_ort(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_upsample_of_an_opset9_file_matches_onnxruntime(mode):
    """onnx's version converter makes Resize-11 of it with half_pixel coordinates; load.py sets asymmetric."""
    node = helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode)
    g = helper.make_graph([node], "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 12])],
                          [numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(srcore.StaticModule(srcore.from_onnx(m))(x), _run_ort(m, {"x": x})[0],
                               rtol=1e-6, atol=1e-6)


def test_rms_norm_rotary_and_causal_gqa_attention_match_onnxruntime():
    """One opset-23 decoder step: RMSNormalization -> RotaryEmbedding on q and k -> Attention
    (4 query heads on 2 key/value heads, causal, a past of 3 positions)."""
    rng = np.random.default_rng(0)
    b, s, past, hd = 2, 4, 3, 8
    inits = [numpy_helper.from_array(rng.standard_normal(4 * hd).astype(np.float32), "g"),
             numpy_helper.from_array(np.cos(np.arange(16)[:, None] * np.arange(hd // 2)).astype(np.float32), "cos"),
             numpy_helper.from_array(np.sin(np.arange(16)[:, None] * np.arange(hd // 2)).astype(np.float32), "sin")]
    nodes = [helper.make_node("RMSNormalization", ["x", "g"], ["n"], epsilon=1e-6),
             helper.make_node("RotaryEmbedding", ["n", "cos", "sin", "pos"], ["q"], num_heads=4),
             helper.make_node("RotaryEmbedding", ["k", "cos", "sin", "pos"], ["kr"], num_heads=2, interleaved=1),
             helper.make_node("Attention", ["q", "kr", "v", "", "pk", "pv"], ["y", "present_k", "present_v"],
                              q_num_heads=4, kv_num_heads=2, is_causal=1)]
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("x", f, [b, s, 4 * hd]),
              helper.make_tensor_value_info("k", f, [b, s, 2 * hd]),
              helper.make_tensor_value_info("v", f, [b, s, 2 * hd]),
              helper.make_tensor_value_info("pos", TensorProto.INT64, [b, s]),
              helper.make_tensor_value_info("pk", f, [b, 2, past, hd]),
              helper.make_tensor_value_info("pv", f, [b, 2, past, hd])]
    outputs = [helper.make_tensor_value_info("y", f, [b, s, 4 * hd]),
               helper.make_tensor_value_info("present_k", f, [b, 2, past + s, hd]),
               helper.make_tensor_value_info("present_v", f, [b, 2, past + s, hd])]
    m = helper.make_model(helper.make_graph(nodes, "step", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 23)])
    feeds = {"x": rng.standard_normal((b, s, 4 * hd)).astype(np.float32),
             "k": rng.standard_normal((b, s, 2 * hd)).astype(np.float32),
             "v": rng.standard_normal((b, s, 2 * hd)).astype(np.float32),
             "pos": np.array([[3, 4, 5, 6], [3, 4, 5, 6]], np.int64),
             "pk": rng.standard_normal((b, 2, past, hd)).astype(np.float32),
             "pv": rng.standard_normal((b, 2, past, hd)).astype(np.float32)}
    got = srcore.StaticModule(srcore.from_onnx(m))(*feeds.values())
    for g_, w in zip(got, _run_ort(m, feeds)):
        np.testing.assert_allclose(g_, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("node, inputs, match", [
    (helper.make_node("RMSNormalization", ["x", "g"], ["y"], name="rms", stash_type=11), ["x", "g"],
     r"RMSNormalization node 'rms'.*stash_type=11"),
    (helper.make_node("Compress", ["x", "k"], ["y"], name="cmp", axis=0), ["x", "k"],
     r"Compress node 'cmp'.*condition must be 1-D"),
    (helper.make_node("Attention", ["x", "x", "x"], ["y"], name="att"), ["x"],
     r"Attention node 'att'.*3-D Q needs"),
])
def test_what_is_not_mapped_is_refused_naming_node_and_attribute(node, inputs, match):
    types = {"x": (TensorProto.FLOAT, [2, 3, 4]), "g": (TensorProto.FLOAT, [4]), "c": (TensorProto.BOOL, [2]), "k": (TensorProto.BOOL, [2, 2])}
    g = helper.make_graph([node], "bad", [helper.make_tensor_value_info(n, *types[n]) for n in inputs],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    with pytest.raises(srcore.SrcoreError, match=match):
        srcore.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))


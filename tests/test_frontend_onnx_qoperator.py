"""Quantized ONNX files as onnxruntime's quantizer writes them (QOperator format and
``quantize_dynamic``): a small torch CNN exported, quantized, converted by ``from_onnx``, and run
against onnxruntime bit for bit (ops/qlinear.py reproduces its integer arithmetic). What srcore
cannot map is refused naming the node and the input."""
from __future__ import annotations

import io

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import srcore

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.one_pass


class _Net(torch.nn.Module):
    """Conv (grouped, strided), Relu, LeakyRelu, Sigmoid, Add, Mul, Concat, Slice, AveragePool, MaxPool,
    global pool, a Linear
    on 2-D (Gemm: QGemm) and one on 3-D (MatMul + Add: QLinearMatMul, QLinearAdd)."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.c3 = torch.nn.Conv2d(8, 16, 3, stride=2)
        self.fc = torch.nn.Linear(16, 12)
        self.fc3d = torch.nn.Linear(4, 5)

    def forward(self, x):
        a = torch.relu(self.c1(x))
        b = torch.sigmoid(self.c2(a))
        h = torch.cat([a + b, a * b], 1)[:, :8]
        h = torch.nn.functional.leaky_relu(self.c3(h), 0.1)
        h = torch.nn.functional.max_pool2d(torch.nn.functional.avg_pool2d(h, 3, 1, 1, count_include_pad=False), 2)
        h = torch.relu(self.fc(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)))
        return self.fc3d(h.reshape(-1, 3, 4))


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    torch.manual_seed(0)
    f = io.BytesIO()
    torch.onnx.export(_Net().eval(), (torch.randn(2, 3, 12, 12),), f, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    path = tmp_path_factory.mktemp("q") / "float.onnx"
    path.write_bytes(f.getvalue())
    return path


class _Calibration(quantization.CalibrationDataReader):
    def __init__(self):
        rng = np.random.default_rng(1)
        self.batches = iter([{"x": rng.standard_normal((2, 3, 12, 12)).astype(np.float32)} for _ in range(3)])

    def get_next(self):
        return next(self.batches, None)


@pytest.mark.parametrize("how, ops", [
    ("static_per_channel", {"QLinearConv", "QGemm", "QLinearMatMul", "QLinearAdd", "QLinearMul", "QLinearSigmoid",
                            "QLinearLeakyRelu", "QLinearConcat", "QLinearAveragePool", "QLinearGlobalAveragePool"}),
    ("dynamic", {"ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"}),
])
def test_quantized_cnn_matches_onnxruntime_bit_for_bit(float_model, how, ops):
    out = float_model.parent / f"{how}.onnx"
    if how == "dynamic":
        # 7-bit weights (reduce_range), as onnxruntime advises for x86 without VNNI: its AVX2 u8s8 kernels add
        # pairs of products in saturating int16, which full-range weights overflow on uint8 activations
        # (10 of 30 outputs differed on an AVX2-only AMD EPYC); srcore accumulates exactly
        quantization.quantize_dynamic(str(float_model), str(out), reduce_range=True)
    else:
        quantization.quantize_static(str(float_model), str(out), _Calibration(),
                                     quant_format=quantization.QuantFormat.QOperator, per_channel=True)
    assert ops <= {n.op_type for n in onnx.load(str(out)).graph.node}   # the ops under test are in the file
    sm = srcore.StaticModule(srcore.from_onnx(str(out)))
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for seed in (2, 3):
        x = np.random.default_rng(seed).standard_normal((2, 3, 12, 12)).astype(np.float32) * 1.5
        np.testing.assert_array_equal(sm(x), sess.run(None, {"x": x})[0])


def _qlinear_conv(scale_input: bool):
    """One QLinearConv; its x_scale a graph input when ``scale_input``."""
    w = np.arange(-9, 9, dtype=np.int8).reshape(2, 1, 3, 3)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
             numpy_helper.from_array(np.array(128, np.uint8), "xz"), numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array([0.02, 0.03], np.float32), "ws"),
             numpy_helper.from_array(np.zeros(2, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.1, np.float32), "ys"),
             numpy_helper.from_array(np.array(100, np.uint8), "yz")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 1, 5, 5])]
    if scale_input:
        inits = inits[1:]
        inputs.append(helper.make_tensor_value_info("xs", TensorProto.FLOAT, []))
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], name="qconv",
                            pads=[1, 1, 0, 0])
    out = helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 2, 4, 4])
    g = helper.make_graph([node], "q", inputs, [out], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_qlinear_conv_with_asymmetric_pads_matches_onnxruntime():
    m = _qlinear_conv(False)
    x = np.random.default_rng(0).integers(0, 256, (1, 1, 5, 5), dtype=np.uint8)
    got = srcore.StaticModule(srcore.from_onnx(m))(x)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)


def test_a_scale_known_only_at_run_time_and_an_unknown_contrib_op_are_refused_by_name():
    with pytest.raises(srcore.SrcoreError, match=r"QLinearConv node 'qconv'.*x_scale.*known at conversion"):
        srcore.from_onnx(_qlinear_conv(True))
    node = helper.make_node("QLinearSoftmax", ["x"], ["y"], name="qsm", domain="com.microsoft")
    g = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(srcore.SrcoreError, match=r"QLinearSoftmax node 'qsm'.*'com.microsoft' is not supported"):
        srcore.from_onnx(m)

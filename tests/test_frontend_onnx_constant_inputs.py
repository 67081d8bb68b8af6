"""Graph inputs whose values srcore needs at conversion (axes, pads, starts, a training flag):
``from_onnx`` names them in a ``NeedsConstantInputs`` error, ``constant_inputs=`` specializes the
model on given values, and the ONNX backend specializes on each run's values (rebuilding when they
change). Values are checked against onnxruntime on the unspecialized model."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import srcore
from srcore.frontends.onnx_import import NeedsConstantInputs
from srcore.frontends.onnx_import.backend import SPECIALIZATIONS, SrcoreBackend

pytestmark = pytest.mark.one_pass


def _model(nodes, inputs, outputs, opset=18):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _unsqueeze_then_pad():
    """y = Pad(Unsqueeze(x, axes), pads, mode=reflect): two inputs needed at conversion."""
    return _model([helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
                   helper.make_node("Pad", ["u", "pads"], ["y"], mode="reflect")],
                  [("x", TensorProto.FLOAT, [3, 4]), ("axes", TensorProto.INT64, [1]),
                   ("pads", TensorProto.INT64, [6])],
                  [("y", TensorProto.FLOAT, [None, None, None])])


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_from_onnx_names_the_inputs_it_needs_and_constant_inputs_specializes():
    m = _unsqueeze_then_pad()
    with pytest.raises(NeedsConstantInputs) as info:
        srcore.from_onnx(m)
    # Pad's input comes from the Unsqueeze that could not convert: named once axes are known
    assert info.value.inputs == ("axes",) and info.value.model_inputs == ("x", "axes", "pads")
    assert isinstance(info.value, srcore.ConversionError) and "'axes'" in str(info.value)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    axes, pads = np.array([0]), np.array([0, 1, 2, 0, 1, 1])
    with pytest.raises(NeedsConstantInputs) as info:
        srcore.from_onnx(m, constant_inputs={"axes": axes})
    assert info.value.inputs == ("pads",) and info.value.model_inputs == ("x", "pads")
    conv = srcore.from_onnx(m, constant_inputs={"axes": axes, "pads": pads})
    assert [s.name for s in conv.input_specs] == ["x"]
    out = srcore.StaticModule(conv)(x)
    np.testing.assert_array_equal(out, _ort(m, {"x": x, "axes": axes, "pads": pads})[0])


def test_constant_inputs_errors_name_the_input():
    m = _unsqueeze_then_pad()
    with pytest.raises(srcore.ConversionError, match="'nope'.*not graph inputs"):
        srcore.from_onnx(m, constant_inputs={"nope": np.array([0])})
    with pytest.raises(srcore.ConversionError, match="'axes' is int32, the model declares int64"):
        srcore.from_onnx(m, constant_inputs={"axes": np.array([0], np.int32), "pads": np.zeros(6, np.int64)})


def test_backend_specializes_per_value_and_rebuilds_when_they_change():
    m = _unsqueeze_then_pad()
    rep = SrcoreBackend.prepare(m)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    cases = [(np.array([0]), np.array([0, 1, 2, 0, 1, 1])), (np.array([-2]), np.array([0, 0, 2, 0, 0, 3])),
             (np.array([0]), np.array([0, 1, 2, 0, 1, 1]))]
    for axes, pads in cases:
        (y,) = rep.run([x, axes, pads])
        np.testing.assert_array_equal(y, _ort(m, {"x": x, "axes": axes, "pads": pads})[0])
    assert len(rep._reps) == 2    # the third run reused the first specialization
    for k in range(SPECIALIZATIONS + 2):   # bounded: the oldest go
        rep.run({"x": x, "axes": np.array([k % 3]), "pads": np.zeros(6, np.int64)})
    assert len(rep._reps) == SPECIALIZATIONS
    with pytest.raises(srcore.SrcoreInputError, match="missing inputs \\['pads'\\]"):
        rep.run({"x": x, "axes": np.array([0])})


def test_backend_learns_inputs_needed_only_once_others_are_known():
    """Dropout: training_mode first; once it is True, the ratio too (0 keeps every element; another
    ratio is random and refused, never a wrong answer)."""
    m = _model([helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])],
               [("x", TensorProto.FLOAT, [2, 3]), ("r", TensorProto.FLOAT, []), ("t", TensorProto.BOOL, [])],
               [("y", TensorProto.FLOAT, [2, 3]), ("mask", TensorProto.BOOL, [2, 3])])
    rep = SrcoreBackend.prepare(m)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, mask = rep.run([x, np.array(0.5, np.float32), np.array(False)])
    np.testing.assert_array_equal(y, x) and np.testing.assert_array_equal(mask, np.ones((2, 3), bool))
    y, mask = rep.run([x, np.array(0.0, np.float32), np.array(True)])
    np.testing.assert_array_equal(y, x) and np.testing.assert_array_equal(mask, np.ones((2, 3), bool))
    assert rep.constant_inputs == ("t", "r")
    with pytest.raises(srcore.ConversionError, match="ratio > 0"):
        rep.run([x, np.array(0.5, np.float32), np.array(True)])

"""ONNX's narrow and unsigned dtypes: float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) and int4/uint4 as
ml_dtypes' numpy types for Cast/CastLike, Q/DQ and data movement, uint16/32/64 for the integer
kernels; .srm files store them; other kernels refuse them at load. Expected values: onnx's
reference implementation and hand-derived ONNX rules (saturation, wrap-around)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import srcore

pytestmark = pytest.mark.one_pass

F8 = {17: ml_dtypes.float8_e4m3fn, 18: ml_dtypes.float8_e4m3fnuz, 19: ml_dtypes.float8_e5m2,
      20: ml_dtypes.float8_e5m2fnuz}


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _bits_equal(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool((a.view(np.uint8) == b.view(np.uint8)).all())


@pytest.mark.parametrize("code", sorted(F8))
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_float8_saturates_as_onnx_says(code, saturate):
    x = np.array([0.0, 1.3, -2.7, 239.0, 300.0, -1000.0, 70000.0, np.inf, -np.inf, np.nan], np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=code, saturate=saturate)],
               [("x", 1, [10])], [("y", code, [10])])
    y = srcore.StaticModule(srcore.from_onnx(m))(x)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert _bits_equal(y, want.astype(F8[code]) if want.dtype != F8[code] else want)
    big = float(ml_dtypes.finfo(F8[code]).max)
    if saturate:   # hand-derived: the largest finite value of the sign, for infinities too
        assert [float(v) for v in y[6:9]] == [big, big, -big]
    else:          # out of range: infinity where the type has one (e5m2), else NaN
        assert float(y[6]) == np.inf if code == 19 else np.isnan(float(y[6]))
    assert np.isnan(float(y[9]))


def test_cast_from_float8_and_int4_is_exact_and_to_int4_wraps():
    x8 = np.array([0.5, -448, 3.75], ml_dtypes.float8_e4m3fn)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=1)], [("x", 17, [3])], [("y", 1, [3])])
    np.testing.assert_array_equal(srcore.StaticModule(srcore.from_onnx(m))(x8), [0.5, -448, 3.75])
    x = np.array([-9.0, -8.0, 2.5, 3.7, -2.7, 7.0, 8.0, 15.0], np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=22)], [("x", 1, [8])], [("y", 22, [8])])
    y = srcore.StaticModule(srcore.from_onnx(m))(x)
    # truncation toward zero, then two's complement wrap-around in 4 bits (onnx's reference agrees)
    np.testing.assert_array_equal(y.astype(np.int8), [7, -8, 2, 3, -2, 7, -8, -1])
    assert _bits_equal(y, ReferenceEvaluator(m).run(None, {"x": x})[0])


def test_quantize_dequantize_float8_int4_uint16_match_the_reference():
    x = np.array([[-3.1, 0.0, 0.7], [2.2, 100.0, -0.05]], np.float32)
    for code in (17, 19, 22, 21, 4):
        zero = {17: F8[17], 19: F8[19], 22: ml_dtypes.int4, 21: ml_dtypes.uint4, 4: np.uint16}[code]
        zp = np.array(1 if code in (21, 4) else 0).astype(zero)
        inits = [numpy_helper.from_array(np.array(0.25, np.float32), "s"), numpy_helper.from_array(zp, "z")]
        m = _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                    helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                   [("x", 1, [2, 3])], [("q", code, [2, 3]), ("y", 1, [2, 3])], inits)
        q, y = srcore.StaticModule(srcore.from_onnx(m))(x)
        wq, wy = ReferenceEvaluator(m).run(None, {"x": x})
        assert _bits_equal(q, wq), code
        np.testing.assert_array_equal(y, wy)


def test_unsigned_integer_kernels_and_srm_storage_of_every_new_dtype(tmp_path):
    a = np.array([1, 60000, 65535], np.uint16)
    b = np.array([2, 10000, 1], np.uint16)
    m = _model([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Greater", ["a", "b"], ["g"]),
                helper.make_node("BitShift", ["a", "b"], ["r"], direction="RIGHT")],
               [("a", 4, [3]), ("b", 4, [3])], [("s", 4, [3]), ("g", 9, [3]), ("r", 4, [3])])
    s, g, r = srcore.StaticModule(srcore.from_onnx(m))(a, b)
    np.testing.assert_array_equal(s, np.array([3, 4464, 0], np.uint16))   # wraps modulo 2**16
    np.testing.assert_array_equal(g, [False, True, True])
    np.testing.assert_array_equal(r, [0, 0, 32767])
    assert s.dtype == np.uint16
    arrays = {"f8a": np.array([1.5, -448], F8[17]), "f8b": np.array([1.5, -240], F8[18]),
              "f8c": np.array([1.5, np.inf], F8[19]), "f8d": np.array([1.5, -3], F8[20]),
              "i4": np.array([-8, 7], ml_dtypes.int4), "u4": np.array([0, 15], ml_dtypes.uint4),
              "u32": np.array([1, 2 ** 32 - 1], np.uint32), "u64": np.array([1, 2 ** 64 - 1], np.uint64)}
    codes = {"f8a": 17, "f8b": 18, "f8c": 19, "f8d": 20, "i4": 22, "u4": 21, "u32": 12, "u64": 13}
    m = _model([helper.make_node("Reshape", [k, "shape"], ["o_" + k]) for k in arrays], [],
               [("o_" + k, codes[k], [2]) for k in arrays],
               [numpy_helper.from_array(v, k) for k, v in arrays.items()]
               + [numpy_helper.from_array(np.array([2]), "shape")])
    srcore.save(srcore.from_onnx(m), tmp_path / "m.srm")
    outs = srcore.StaticModule(srcore.load(tmp_path / "m.srm"))()
    for (k, want), got in zip(arrays.items(), outs):
        assert _bits_equal(got, want), k


@pytest.mark.parametrize("code", [17, 22, 4])
def test_kernels_without_the_dtype_refuse_it_at_conversion_or_load(code):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", code, [3])], [("y", code, [3])])
    with pytest.raises(srcore.ConversionError, match="Relu node #0: input 0 of dtype"):
        srcore.from_onnx(m)
    from srcore.ir.parser import parse_graph

    name = {17: "Float8_e4m3fn", 22: "Int4", 4: "UInt16"}[code]
    g = parse_graph(f"graph(%x : {name}(3)):\n  %y : {name}(3) = aten::relu(%x)\n  return (%y)\n")
    with pytest.raises(srcore.UnsupportedOpError, match="aten::relu.*with dtypes"):
        srcore.StaticModule(g)

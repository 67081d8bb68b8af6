"""Quantized values in the IR and at run time: QParams, TensorType.qparams in IR text, QuantizedArray."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore.ir import QParams, TensorType
from srcore.ir.quant import check_qparams
from srcore.qarray import QuantizedArray

pytestmark = [pytest.mark.one_pass, pytest.mark.filterwarnings("ignore::UserWarning")]


def test_qparams_reject_bad_scales_zero_points_and_axes():
    for scale in (0.0, -1.0, float("inf"), float("nan"), "x", True):
        with pytest.raises(srcore.QuantizationError, match="scale"):
            QParams(scale, 0)
    with pytest.raises(srcore.QuantizationError, match="integer"):
        QParams(0.1, 1.5)
    with pytest.raises(srcore.QuantizationError, match="axis"):
        QParams((0.1, 0.2), (0, 0))
    with pytest.raises(srcore.QuantizationError, match="2 scales but 1 zero points"):
        QParams((0.1, 0.2), (0,), axis=0)
    with pytest.raises(srcore.QuantizationError, match=r"scale\[1\]"):
        QParams((0.1, 0.0), (0, 0), axis=0)
    with pytest.raises(srcore.QuantizationError, match="no axis"):
        QParams(0.1, 0, axis=1)
    with pytest.raises(srcore.QuantizationError, match=r"outside the range of quint8 \[0, 255\]"):
        check_qparams("quint8", QParams(0.1, -1))
    with pytest.raises(srcore.QuantizationError, match=r"outside the range of qint8"):
        check_qparams("qint8", QParams((0.1, 0.1), (0, 128), axis=0))
    with pytest.raises(srcore.QuantizationError, match="axis 2 is out of range for a tensor of rank 2"):
        check_qparams("qint8", QParams((0.1,), (0,), axis=2), (1, 4))
    with pytest.raises(srcore.QuantizationError, match="3 per-channel scales for dim 0 of size 4"):
        check_qparams("qint8", QParams((0.1,) * 3, (0,) * 3, axis=0), (4, 2))
    check_qparams("qint8", QParams((0.1,) * 4, (0,) * 4, axis=0), ("n", 2))  # symbolic dims are not checked
    QParams(np.float32(0.5), np.int64(3))  # numpy numbers are numbers


_scale = st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def quantized_types(draw):
    dtype = draw(st.sampled_from(["quint8", "qint8", "qint32"]))
    lo, hi = {"quint8": (0, 255), "qint8": (-128, 127), "qint32": (-2 ** 31, 2 ** 31 - 1)}[dtype]
    shape = draw(st.lists(st.one_of(st.integers(1, 6), st.sampled_from(["batch", None])), min_size=0, max_size=4))
    if shape and draw(st.booleans()):
        axis = draw(st.integers(0, len(shape) - 1))
        n = shape[axis] if isinstance(shape[axis], int) else draw(st.integers(1, 5))
        q = QParams(tuple(draw(st.lists(_scale, min_size=n, max_size=n))),
                    tuple(draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))), axis)
    else:
        q = QParams(draw(_scale), draw(st.integers(lo, hi)))
    return TensorType(dtype, tuple(shape) if draw(st.booleans()) or q.axis is not None else None, q)


@settings(max_examples=80, deadline=None)
@given(t=quantized_types())
def test_quantized_types_print_and_parse_back_exactly(t):
    g = srcore.parse_graph(f"graph(%x : {t}):\n  return (%x)\n")
    assert g.inputs[0].type == t
    assert srcore.parse_graph(srcore.print_graph(g)).inputs[0].type == t


@pytest.mark.parametrize("text, message", [
    ("QUInt8(2, scale=0.0, zero_point=3)", "positive and finite"),
    ("QUInt8(2, scale=0.1, zero_point=300)", r"outside the range of quint8"),
    ("QInt8(2, axis=1, scale=[1.0], zero_point=[0])", "axis 1 is out of range"),
    ("QInt8(2, scale=[1.0, 1.0], zero_point=[0, 0])", "needs axis="),
    ("QInt8(2, scale=1.0)", "lack zero_point"),
    ("Float(2, scale=1.0, zero_point=0)", "not quantized"),
    ("QUInt8(2, scale=0.1, scale=0.2, zero_point=0)", "given twice"),
])
def test_bad_quantization_parameters_in_ir_text_name_the_position(text, message):
    with pytest.raises(srcore.GraphParseError, match=message) as err:
        srcore.parse_graph(f"graph(%x : {text}):\n  return (%x)\n")
    assert "<graph>:1:" in str(err.value)   # line:col of the type (or of the repeated keyword)


def test_quantized_array_checks_its_values_and_parameters():
    qa = QuantizedArray(np.array([0, 3, 255], np.uint8), "quint8", QParams(0.5, 3))
    assert (qa.scale, qa.zero_point, qa.qdtype) == (0.5, 3, "quint8")
    np.testing.assert_array_equal(qa.dequantize(), [-1.5, 0.0, 126.0])
    assert type(qa.int_repr()) is np.ndarray and qa.int_repr().dtype == np.uint8
    assert QuantizedArray([1, 2], "qint8", (0.1, 0)).dtype == np.int8   # in range: stored as int8
    with pytest.raises(srcore.QuantizationError, match="from -1 to 300"):
        QuantizedArray(np.array([-1, 300]), "quint8", QParams(0.1, 0))    # never wrapped around
    with pytest.raises(srcore.QuantizationError, match="float32"):
        QuantizedArray(np.ones(2, np.float32), "quint8", QParams(0.1, 0))
    with pytest.raises(srcore.QuantizationError, match="not a quantized dtype"):
        QuantizedArray(np.ones(2, np.uint8), "uint8", QParams(0.1, 0))
    with pytest.raises(srcore.QuantizationError, match="per-channel scales"):
        QuantizedArray(np.ones((3, 2), np.int8), "qint8", QParams((0.1, 0.2), (0, 0), axis=0))
    pc = QuantizedArray(np.ones((2, 3), np.int8), "qint8", QParams((0.5, 0.25), (0, 1), axis=0))
    with pytest.raises(srcore.QuantizationError, match="no single scale"):
        pc.scale
    np.testing.assert_array_equal(pc.dequantize(), [[0.5] * 3, [0.0] * 3])
    row = qa[1:]
    assert isinstance(row, QuantizedArray) and row.qparams == qa.qparams


def test_dequantize_rounds_like_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 3, 5)) * 20).astype(np.float32)
    t = torch.quantize_per_tensor(torch.from_numpy(x), 0.0731, 17, torch.quint8)
    qa = QuantizedArray(t.int_repr().numpy(), "quint8", QParams(t.q_scale(), t.q_zero_point()))
    np.testing.assert_array_equal(qa.dequantize(), t.dequantize().numpy())
    scales, zps = rng.uniform(0.01, 1, 3), rng.integers(-20, 20, 3)
    tc = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(scales), torch.from_numpy(zps), 1,
                                    torch.qint8)
    qc = QuantizedArray(tc.int_repr().numpy(), "qint8", QParams(tuple(scales), tuple(zps), axis=1))
    np.testing.assert_array_equal(qc.dequantize(), tc.dequantize().numpy())


@pytest.mark.parametrize("scale, zp, dtype, message", [
    (-0.1, 3, 13, "scale must be positive and finite, got -0.1"),
    (0.1, 300, 13, r"zero point 300 is outside the range of quint8 \[0, 255\]"),
    (0.1, 3, 6, "dtype float32 is not a quantized dtype"),
])
def test_bad_constant_quantization_parameters_fail_at_load_naming_the_node(scale, zp, dtype, message):
    g = srcore.parse_graph(f"""graph(%x : Float(2, 3)):
  %s : float = prim::Constant[value={scale}]()
  %z : int = prim::Constant[value={zp}]()
  %dt : int = prim::Constant[value={dtype}]()
  %q : Tensor = aten::quantize_per_tensor(%x, %s, %z, %dt) # model.py:7:3
  %d : Tensor = aten::dequantize(%q)
  return (%d)
""")
    with pytest.raises(srcore.QuantizationError, match=message) as err:
        srcore.StaticModule(g)
    assert "aten::quantize_per_tensor" in str(err.value) and "model.py:7:3" in str(err.value)

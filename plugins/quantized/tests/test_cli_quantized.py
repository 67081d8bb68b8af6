"""The command line with a quantized model: run -o writes quantized outputs with their parameters
(or float values), -i reads a quantized input back, inspect --graph shows the parameters."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore.cli.main import main
from srcore.ir import QParams
from srcore.qarray import QuantizedArray, from_npz

pytestmark = pytest.mark.one_pass   # CLI plumbing: independent of the executor and planner

GRAPH = """graph(%x : QUInt8(2, 3)):
  %w : QInt8(4, 3, axis=0, scale=[0.5, 0.25, 0.125, 1.0], zero_point=[0, 0, 0, 0]) = prim::Constant[param="w"]()
  %b : NoneType = prim::Constant()
  %s : float = prim::Constant[value=0.5]()
  %z : int = prim::Constant[value=10]()
  %y : Tensor = quantized::qlinear(%x, %w, %b, %s, %z)
  %d : Tensor = aten::dequantize(%y)
  return (%y, %d)
"""


@pytest.fixture
def model_path(tmp_path):
    w = QuantizedArray(np.array([[1, 2, 3], [-1, 0, 1], [4, 4, 4], [0, 1, 0]], np.int8), "qint8",
                       QParams((0.5, 0.25, 0.125, 1.0), (0, 0, 0, 0), axis=0))
    g = srcore.parse_graph(GRAPH, params={"w": w})
    path = tmp_path / "q.srm"
    srcore.save(srcore.Model.from_graph(g), path)
    return path


def test_run_writes_quantized_outputs_with_their_parameters_and_reads_them_back(model_path, tmp_path, capsys):
    x = QuantizedArray(np.array([[3, 5, 7], [9, 0, 2]], np.uint8), "quint8", QParams(0.1, 1))
    inp = tmp_path / "x.npz"
    from srcore.qarray import npz_entries
    np.savez(inp, **npz_entries("x", x))
    out = tmp_path / "out.npz"
    assert main(["run", str(model_path), "-i", f"x={inp}", "-o", str(out)]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "quint8[2, 4] (scale=0.5, zero_point=10)" in printed
    with np.load(out, allow_pickle=False) as f:
        y = from_npz(f, "output0")
        d = f["output1"]
    sm = srcore.StaticModule(srcore.load(model_path))
    ref_y, ref_d = sm(x)
    assert isinstance(y, QuantizedArray) and y.qparams == QParams(0.5, 10) and y.qdtype == "quint8"
    np.testing.assert_array_equal(y.int_repr(), ref_y.int_repr())
    np.testing.assert_array_equal(d, ref_d)
    deq = tmp_path / "deq.npz"
    assert main(["run", str(model_path), "-i", f"x={inp}", "-o", str(deq), "--dequantize"]) == 0
    with np.load(deq, allow_pickle=False) as f:
        assert "output0.scale" not in f.files
        np.testing.assert_array_equal(f["output0"], ref_y.dequantize())


def test_run_with_random_quantized_inputs_and_inspect_shows_parameters(model_path, capsys):
    assert main(["run", str(model_path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["inspect", str(model_path), "--graph"]) == 0
    text = capsys.readouterr().out
    assert "QInt8(4, 3, axis=0, scale=[0.5, 0.25, 0.125, 1.0], zero_point=[0, 0, 0, 0])" in text
    assert "QUInt8(2, 4, scale=0.5, zero_point=10) = quantized::qlinear" in text


def test_a_plain_array_for_a_quantized_input_is_refused_by_name(model_path, tmp_path, capsys):
    inp = tmp_path / "x.npy"
    np.save(inp, np.zeros((2, 3), np.uint8))
    assert main(["run", str(model_path), "-i", f"x={inp}"]) == 1
    assert "input 'x': expected a quantized tensor (quint8), got a plain uint8 array" in capsys.readouterr().err

"""``srcore quantize``: the model and report it writes, --format json against its schema, output
paths checked before any work, bad calibration files named (exit 1)."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import srcore
from srcore.cli.main import main
from srcore.cli.output import load_schema

pytestmark = pytest.mark.one_pass   # CLI plumbing: independent of the executor and planner

DIGITS = Path(__file__).resolve().parents[3] / "examples" / "digits"
MODEL, CALIB = str(DIGITS / "digits.srm"), str(DIGITS / "digits_calib.npz")


def test_quantize_writes_the_model_and_the_report(tmp_path, capsys):
    out, rep = tmp_path / "q.srm", tmp_path / "r.json"
    code = main(["quantize", MODEL, "--calibration", CALIB, "-o", str(out), "--report", str(rep),
                 "--keep-float", "input.17", "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    jsonschema.validate(doc, load_schema("quantize"))
    assert doc["calibration_samples"] == 256 and doc["nodes"]["float"] == 1
    assert doc["kept_float"][0]["name"] == "input.17" and doc["quantized_param_bytes"] < doc["float_param_bytes"]
    report = json.loads(rep.read_text())
    by_name = {n["name"]: n for n in report["nodes"]}
    assert by_name["input.17"]["status"] == "float" and by_name["input.6"]["status"] == "quantized"
    assert by_name["input.6"]["quantized_op"] == "quantized::qconv2d_relu"
    q = srcore.load(out)
    assert "aten::linear" in q.required_ops() and "quantized::qlinear_relu" in q.required_ops()


def test_text_summary(tmp_path, capsys):
    assert main(["quantize", MODEL, "--calibration", CALIB, "-o", str(tmp_path / "q.srm"), "--observer",
                 "minmax"]) == 0
    out = capsys.readouterr().out
    assert "4 ops quantized" in out and "0 kept float" in out and "output output: max |error|" in out


def test_output_paths_are_checked_before_any_work(tmp_path, capsys):
    assert main(["quantize", MODEL, "--calibration", CALIB, "-o", str(tmp_path / "no" / "q.srm")]) == 1
    assert "-o" in capsys.readouterr().err
    assert main(["quantize", MODEL, "--calibration", CALIB, "-o", "-", "--report", "-"]) == 2
    assert "both write to standard output" in capsys.readouterr().err


def test_bad_calibration_is_a_user_error_naming_the_input(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((3, 1, 8, 8), np.float64))
    assert main(["quantize", MODEL, "--calibration", str(bad), "-o", str(tmp_path / "q.srm")]) == 1
    err = capsys.readouterr().err
    assert "calibration input 'x'" in err and "float64" in err and err.count("hint:") == 1
    assert main(["quantize", MODEL, "--calibration", str(tmp_path / "none.npz"), "-o", str(tmp_path / "q.srm")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_activations_use_7_bits_unless_full_range(tmp_path, capsys):
    """Default: each activation's observed range maps onto 0..127 (reduce_range); --full-range onto 0..255."""
    maxima = {}
    for flag in ([], ["--full-range"]):
        rep = tmp_path / f"r{len(flag)}.json"
        assert main(["quantize", MODEL, "--calibration", CALIB, "-o", str(tmp_path / f"q{len(flag)}.srm"),
                     "--observer", "minmax", "--report", str(rep), *flag]) == 0
        capsys.readouterr()
        x = json.loads(rep.read_text())["inputs"][0]          # the input's range: [0, 1] (digits pixels)
        maxima[bool(flag)] = (1.0 / x["scale"]) + x["zero_point"]
    assert maxima[False] == pytest.approx(127, abs=0.01) and maxima[True] == pytest.approx(255, abs=0.01)

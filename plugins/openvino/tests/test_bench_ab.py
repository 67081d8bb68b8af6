"""benchmarks.openvino_ab's arithmetic: ratios are taken per round, then their median (so a slow
phase of the machine, which hits both runners of a round, cancels out)."""
from __future__ import annotations

import pytest

from benchmarks.openvino_ab import markdown, paired_ratios

pytestmark = pytest.mark.one_pass


def test_ratios_are_medians_of_per_round_ratios():
    # round 2 is a slow phase for everyone: per-round ratios stay 1.02 and 0.5
    times = {"openvino": [1.02, 10.2, 1.02], "ov_onnx": [1.0, 10.0, 1.0], "ort": [2.0, 20.0, 2.0],
             "trt_like": [1.5, 15.0, 1.5], "srcore_codegen_standard": [3.0, 30.0, 3.0]}
    r = paired_ratios(times)
    assert r["openvino/ov_onnx"] == pytest.approx(1.02)
    assert r["fastest_srcore"] == "openvino" and r["fastest_srcore/ort"] == pytest.approx(0.51)
    assert r["trt_like/ort"] == pytest.approx(0.75)
    assert "openvino_bf16/ov_onnx_bf16" not in r


def test_markdown_table():
    report = {"models": [{"model": "mlp_tiny", "threads": 1, "ratios": {"openvino/ov_onnx": 1.02,
                                                                         "fastest_srcore": "trt_like",
                                                                         "fastest_srcore/ort": 0.75},
                          "runners": {"openvino": {"status": "ok", "median_us": 12.34},
                                      "ov_onnx": {"status": "ok", "median_us": 1234.5},
                                      "openvino_bf16": {"status": "skipped", "note": "no bf16"}}}]}
    text = markdown(report)
    assert "| mlp_tiny | 1 | 12.3 µs | 1.23 ms | – | 1.020x | 0.75x (trt_like) |" in text, text


def test_markdown_shows_bf16_times_with_their_error():
    report = {"models": [{"model": "resnet_small", "threads": 1, "ratios": {},
                          "runners": {"openvino_bf16": {"status": "ok", "median_us": 2500.0, "max_rel_err": 2.5e-3},
                                      "openvino": {"status": "ok", "median_us": 9000.0, "max_rel_err": 1e-6}}}]}
    assert "| resnet_small | 1 | 9.00 ms | 2.50 ms (2.5e-03) | – | – |" in markdown(report), markdown(report)


def test_a_wrong_runner_is_shown_not_timed_and_the_sets_cover_the_families():
    from benchmarks.openvino_ab import SETS, tolerance
    from benchmarks.families import FAMILIES

    assert set(FAMILIES) <= set(SETS["all"]) and set(SETS["families"]) == set(FAMILIES)
    assert tolerance("openvino") == 1e-3 and tolerance("openvino_bf16") > tolerance("openvino")
    report = {"models": [{"model": "unet_small", "threads": 1, "ratios": {},
                          "runners": {"openvino": {"status": "wrong", "max_rel_err": 0.25},
                                      "ov_onnx": {"status": "ok", "median_us": 10.0}}}]}
    assert "| unet_small | 1 | wrong (2.5e-01) | 10.0 µs | – | – |" in markdown(report), markdown(report)


def test_benchmarks_run_cells_do_not_time_a_wrong_openvino_answer(monkeypatch, tmp_path):
    import numpy as np

    import benchmarks.cell as cell

    ref = np.ones((2, 3), np.float32)
    monkeypatch.setattr(cell, "load_inputs", lambda art: (["x"], [ref]))
    monkeypatch.setattr(cell, "load_refs", lambda art: [ref])
    monkeypatch.setattr(cell, "preimport", lambda runner: None)
    for runner, answer, status in (("openvino", ref * 1.01, "wrong"), ("openvino", ref, "ok"),
                                   ("eager", ref * 1.01, "ok")):   # peers record their error only
        monkeypatch.setattr(cell, "load_runner", lambda *a, y=answer: (lambda: y))
        res = cell.run_cell("m", runner, 1, tmp_path, True)
        assert res["status"] == status and ("best_round_median_us" in res) == (status == "ok"), res

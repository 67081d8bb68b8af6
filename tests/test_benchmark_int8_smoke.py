"""benchmarks/int8.py end to end on its smallest model at 32x32, one short round: srcore float and
int8 by default; ``SRCORE_BENCH_INT8_FULL=1`` adds every peer (trt_like, torch FX int8, ONNX Runtime
float and quantize_static int8; ~30 s more). Every runner agrees with torch float, the ratios and
sizes are there."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.one_pass   # a benchmark harness: independent of the executor and planner

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package of the checkout, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import int8  # noqa: E402


def test_int8_benchmark_smoke(monkeypatch):
    import torch

    net, _ = int8.build("dwsep_convnet")
    monkeypatch.setattr(int8, "build", lambda name: (net, (torch.randn(1, 3, 32, 32),)))   # a cheap input
    full = os.environ.get("SRCORE_BENCH_INT8_FULL") == "1" or os.environ.get("SRCORE_TESTS_FULL") == "1"
    r = int8.run_model("dwsep_convnet", rounds=1, min_time=0.01, skip=set() if full else {"trt_like", "torch", "ort"})
    runners = {"srcore_float", "srcore_int8"} | ({"srcore_trt_like", "torch_int8", "ort_float", "ort_int8"}
                                                 if full else set())
    assert set(r["best_ms"]) == runners
    # the CPU time of the thread per call, beside the wall clock
    assert set(r["best_cpu_ms"]) == runners and all(0 < r["best_cpu_ms"][k] for k in runners)
    err = r["rel_error_vs_torch_float"]
    assert all(err[k] < 1e-5 for k in runners if "int8" not in k)
    assert all(err[k] < 0.05 for k in runners if "int8" in k)     # the int8 models stay near float
    assert r["ratios"]["file int8/float"] < 0.3 and "int8/float_cpu" in r["ratios"]
    assert ("int8/ort_int8" in r["ratios"]) == full
    assert "srcore_int8" in int8._table([r])

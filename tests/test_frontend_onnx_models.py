"""Bench models exported from torch to ONNX (the exporter the benchmark uses: legacy, opset 17; the
scripted module for control_flow) run through from_onnx and match torch eager, with the dims the
exporter made symbolic kept symbolic. Both passes: these run whole models through StaticModule."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from benchmarks.models import MODELS  # noqa: E402

pytestmark = pytest.mark.torch


def _export(name, path, dynamic=False):
    m, inputs = MODELS[name][0]()
    src = torch.jit.script(m) if name == "control_flow" else m
    kw = {"dynamic_axes": {"x": {0: "batch"}, "y": {0: "batch"}}} if dynamic else {}
    torch.onnx.export(src, inputs, str(path), dynamo=False, input_names=["x"], output_names=["y"],
                      opset_version=17, **kw)
    return m, inputs


@pytest.mark.parametrize("name", ["mlp_tiny", "control_flow", "transformer_block"])
def test_bench_model_through_onnx_matches_torch(tmp_path, name):
    m, inputs = _export(name, tmp_path / "m.onnx")
    model = srcore.from_onnx(str(tmp_path / "m.onnx"))
    assert model.output_names == ("y",)
    with torch.inference_mode():
        want = m(*inputs).numpy()
    got = srcore.StaticModule(model)(inputs[0].numpy())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_dynamic_batch_from_the_exporter(tmp_path):
    m, inputs = _export("mlp_tiny", tmp_path / "m.onnx", dynamic=True)
    model = srcore.from_onnx(str(tmp_path / "m.onnx"))
    assert model.input_specs[0].shape == ("batch", 64)
    sm = srcore.StaticModule(model)
    for b in (1, 7):
        x = torch.randn(b, 64)
        with torch.inference_mode():
            np.testing.assert_allclose(sm(x.numpy()), m(x).numpy(), rtol=1e-5, atol=1e-6)

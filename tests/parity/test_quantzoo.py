"""The quantized zoo: quantized models of forms the other zoos do not test, against the library that made
them, on this machine.

- torch (quantzoo_models.py): FX PTQ of a small ResNet and MobileNetV2 (x86 and qnnpack engines), FX
  QAT of a MobileNetV3-ish net, eager QAT, eager PTQ with two QuantStubs and every FloatFunctional op
  (qnnpack), ConvTranspose2d (fbgemm), a recommender quantized three ways (8- and 4-bit embedding bags
  weight-only, per-channel dynamic linears), per-channel quantize_dynamic LSTM / GRU / Linear, FX
  dynamic quantization, an FX reference model; scripted, frozen, traced, as a module, or a saved frozen
  file. Static models bit for bit (torch's integers), dynamic and reference ones to float rounding.
- onnxruntime (quantzoo_onnx.py): quantize_static QDQ (per channel, opsets 13 and 19), QOperator,
  quantize_dynamic. QOperator and dynamic files against onnxruntime as it runs them (the same integer
  arithmetic: float rounding only); QDQ files against onnxruntime running them as ONNX defines them
  (optimizations off; its QLinear fusions round otherwise, docs/onnx.md): within one step of the
  output's scale (measured: equal). onnxruntime's DynamicQuantizeLSTM is refused by name.

What the zoo found is fixed and tested in plugins/quantized/tests/test_qnnpack.py: with torch's qnnpack
engine srcore computed fbgemm's arithmetic where torch runs QNNPACK's (conv, linear, add, average pools,
mean, hardswish: up to one step off on a few elements).
"""
from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import quantzoo_models as qz  # noqa: E402  (tests/parity is on sys.path: conftest.py)
from _harness import flatten_np, run, torch_outputs  # noqa: E402
from _zoo import param  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

#: torch models in the default run (the rest under ``full``)
TORCH_DEFAULT = ("resnet_fx_x86", "mobilenetv2_fx_qnnpack", "mobilenetv3_fx_qat", "eager_functional_qnnpack",
                 "convtranspose_eager_fbgemm", "recommender_mixed", "seq2vec_dynamic_per_channel")


def _handed(m, inputs, how: str, d: str):
    """``m`` as the test hands it to from_torchscript (quantzoo_models.MODELS' second field)."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if how == "module":
            return m
        if how == "trace":
            return torch.jit.trace(m, inputs, check_trace=False)
        script = torch.jit.script(m)
        if how == "script":
            return script
        frozen = torch.jit.freeze(script.eval())
        if how == "frozen":
            return frozen
        path = os.path.join(d, "frozen.pt")   # "saved": loading re-packs the weights under the engine
        torch.jit.save(frozen, path)
        return path


@pytest.mark.parametrize("name", [param(n, n, default=n in TORCH_DEFAULT) for n in qz.MODELS])
def test_torch_quantized_model_matches_torch(name):
    build, how, bound = qz.MODELS[name]
    before = torch.backends.quantized.engine
    try:
        m, inputs, engine = build()
        torch.backends.quantized.engine = engine
        want = torch_outputs(m, inputs)
        with tempfile.TemporaryDirectory() as d:
            model = srcore.from_torchscript(_handed(m, inputs, how, d), inputs)
        sm = srcore.StaticModule(model)
    finally:
        torch.backends.quantized.engine = before
    for k in range(2):   # twice: planned buffers reused
        got = run(sm, inputs)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{name} output {i}"
            if bound == "exact":
                np.testing.assert_array_equal(g, w, err_msg=f"{name} output {i}, run {k}")
            else:
                np.testing.assert_allclose(g, w, rtol=bound, atol=bound * float(np.abs(w).max()),
                                           err_msg=f"{name} output {i}, run {k}")
    assert any(pn.fn is not None and pn.fn.backend == "quantized_cpu" for pn in sm.top.nodes)


# -- onnxruntime.quantization files ------------------------------------------------------------------

ONNX_DEFAULT = ("qdq_resnet_opset13_channel", "qdq_encoder_opset19_channel", "qop_poolnet", "dynamic_encoder")


@pytest.fixture(scope="module")
def qdir():
    with tempfile.TemporaryDirectory() as d:
        yield d


def _ort(path: str, optimized: bool):
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _last_output_step(path: str) -> float:
    """The scale of the DequantizeLinear that makes the model's (first) output: one output step."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    node = next(n for n in m.graph.node if n.output[0] == m.graph.output[0].name)
    assert node.op_type == "DequantizeLinear", node.op_type
    return float(inits[node.input[1]])


@pytest.mark.parametrize("name", [param(n, n, default=n in ONNX_DEFAULT) for n in
                                  ("qdq_resnet_opset13_channel", "qdq_encoder_opset19_channel", "qdq_poolnet_opset19_s8",
                                   "qop_mobilenetv2", "qop_poolnet", "dynamic_encoder")])
def test_onnxruntime_quantized_file_matches_onnxruntime(name, qdir):
    import quantzoo_onnx as qo

    path = qo.quantized(name, qdir)
    fmt = qo.FILES[name][2]
    qdq = fmt == "QDQ"
    sess = _ort(path, optimized=not qdq)
    atol = 1.01 * _last_output_step(path) if qdq else 1e-5   # one output step (documented), float-safe
    sm = srcore.StaticModule(srcore.from_onnx(path))
    for k, fd in enumerate((qo.feeds(name, 99), qo.feeds(name, 98, 3), qo.feeds(name, 99))):
        want = sess.run(None, fd)
        got = flatten_np(sm(**fd))
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{name} feeds {k} output {i}"
            np.testing.assert_allclose(g, w, rtol=0, atol=atol, err_msg=f"{name} feeds {k} output {i}")
    if qdq:   # the Q/DQ pairs folded into quantized ops (QOperator's QLinear ops run as ONNX's integer formulas)
        kinds = {pn.node.kind for pn in sm.top.nodes if pn.fn is not None}
        assert {"quantized::qconv2d", "quantized::qlinear"} & kinds, kinds


def test_onnxruntime_dynamic_lstm_is_refused_by_name(qdir):
    """onnxruntime's quantize_dynamic makes an LSTM a com.microsoft DynamicQuantizeLSTM: srcore has no
    kernel for it and says so, naming the node (never a partial model)."""
    import quantzoo_onnx as qo

    path = qo.quantized("dynamic_tagger", qdir)
    with pytest.raises(srcore.ConversionError, match=r"DynamicQuantizeLSTM node '[^']+'.*com\.microsoft"):
        srcore.from_onnx(path)

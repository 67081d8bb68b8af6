"""Quantized models from torch's workflows (eager and FX post-training static quantization with the
x86 and qnnpack qconfigs, quantize_dynamic), imported through from_torchscript (scripted, frozen,
traced) and run on the default backends, against torch.

Per model, the result is bit for bit torch's (``EXACT``); the float tail of a dynamic-quantized
model differs from torch's by float rounding only. The default run converts each model one way;
``SRCORE_QUANT_FULL=1`` runs every model scripted, frozen and traced.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
import quantized_models as qm  # noqa: E402  (tests/parity is on sys.path: conftest.py)

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

#: model -> how srcore's output compares with torch's: "exact" or a float tolerance (relative to the scale)
EXACT = {"resnet_eager_x86": "exact", "resnet_eager_qnnpack": "exact", "mlp_fx_qnnpack": "exact",
         "mlp_fx_x86": "exact", "dwsep_fx_x86": "exact", "attention_dynamic": 1e-5}
#: the default run: one import path per model (every path with SRCORE_QUANT_FULL=1)
DEFAULT = {"resnet_eager_x86": "frozen", "resnet_eager_qnnpack": "trace", "mlp_fx_qnnpack": "script",
           "dwsep_fx_x86": "frozen", "attention_dynamic": "script"}
FULL = os.environ.get("SRCORE_QUANT_FULL") == "1" or os.environ.get("SRCORE_TESTS_FULL") == "1"
CASES = [(m, k) for m in qm.ZOO for k in ("script", "frozen", "trace")] if FULL else list(DEFAULT.items())


def _torchscript(model, x, kind):
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if kind == "trace":
            return torch.jit.trace(model, x)
        scripted = torch.jit.script(model)
        return torch.jit.freeze(scripted.eval()) if kind == "frozen" else scripted


@pytest.fixture
def restore_engine():
    """torch's quantized engine put back after the test: left at qnnpack, it changed what later tests in
    the same worker packed and ran (the x86 qconfig models of test_qconv3d.py and others)."""
    before = torch.backends.quantized.engine
    yield
    torch.backends.quantized.engine = before


def check(name, got, ref):
    bound = EXACT[name]
    if bound == "exact":
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=bound, atol=bound * float(np.abs(ref).max()))


@pytest.mark.parametrize("name, kind", [pytest.param(m, k, marks=() if (m, k) == ("resnet_eager_x86", "frozen")
                                                     else pytest.mark.one_pass) for m, k in CASES])
def test_quantized_model_imports_and_matches_torch(name, kind, restore_engine):
    model, x, engine = qm.build(name)
    torch.backends.quantized.engine = engine
    ts = _torchscript(model, x, kind)
    with torch.no_grad():
        ref = ts(x).numpy()
    sm = srcore.StaticModule(srcore.from_torchscript(ts, (x,)))
    check(name, sm(x.numpy()), ref)
    quantized = [pn for pn in sm.top.nodes if pn.fn is not None and pn.fn.backend == "quantized_cpu"]
    assert quantized, "no node ran on quantized_cpu"


@pytest.mark.one_pass
def test_quantized_model_saves_with_its_parameters_and_inspects(tmp_path, restore_engine):
    model, x, engine = qm.build("resnet_eager_x86")
    torch.backends.quantized.engine = engine
    ts = _torchscript(model, x, "frozen")
    m = srcore.from_torchscript(ts, (x,))
    path = tmp_path / "q.srm"
    srcore.save(m, path)
    loaded = srcore.load(path, verify="full")
    w = loaded.params["stem.0.weight"]
    assert isinstance(w, srcore.QuantizedArray) and w.qdtype == "qint8" and w.qparams.axis == 0
    assert w.qparams == m.params["stem.0.weight"].qparams
    from srcore.format.srm import read_metadata
    assert read_metadata(path)["format_version"] == "2"
    with torch.no_grad():
        ref = ts(x).numpy()
    np.testing.assert_array_equal(srcore.StaticModule(loaded)(x.numpy()), ref)
    text = srcore.print_graph(srcore.StaticModule(loaded).graph)
    assert "QInt8(16, 3, 3, 3, axis=0, scale=[" in text and "QUInt8(2, 16, 8, 8, scale=" in text


@pytest.mark.one_pass
def test_unsupported_packed_parameters_are_named():
    class Recurrent(torch.nn.Module):  # (quantize_dynamic's LSTM and GRU are supported: test_heldout{3,5}_zoo.py)
        def __init__(self):
            super().__init__()
            self.cell = torch.nn.GRUCell(4, 6)

        def forward(self, x, h):
            return self.cell(x, h)

    model = torch.ao.quantization.quantize_dynamic(Recurrent().eval(), {torch.nn.GRUCell}, dtype=torch.qint8)
    with pytest.raises(srcore.ConversionError, match="quantized_gru_cell_dynamic with packed parameters"):
        srcore.from_torchscript(model, (torch.randn(1, 4), torch.randn(1, 6)))


def test_pt2e_model_folds_qdq_into_quantized_ops_within_one_step():
    """PT2E (prepare_pt2e / convert_pt2e, X86InductorQuantizer) through from_torch: the
    quantize -> op -> dequantize patterns become quantized ops; their integer accumulation differs
    from the reference's float op + quantize by at most one step of that op's output, and the float
    logits by at most one step of the last quantized value times the head's weights."""
    pytest.importorskip("torchao")
    gm, x = qm.pt2e()
    with torch.no_grad():
        ref = gm(x).numpy()
    model = srcore.from_torch(gm, (x,))
    kinds = [n.kind for n in model.graph.all_nodes()]
    assert "quantized::qconv2d_relu" in kinds and "quantized::qlinear_relu" in kinds
    assert not any(k.startswith("quantized_decomposed::") for k in kinds)
    sm = srcore.StaticModule(model)
    got = sm(x.numpy())
    # measured: 1.1e-8 of logits up to 0.26 (one step of fc1's output, 0.0014, would move them ~1e-3)
    np.testing.assert_allclose(got, ref, rtol=0, atol=0.01 * float(np.abs(ref).max()))

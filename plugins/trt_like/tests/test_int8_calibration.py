"""INT8 calibration inside the engine build (TensorRT's INT8 calibrator):
``engine_options={"precision": "int8", "calibration": DATA}`` on a FLOAT model.

Independent references: the same float model quantized by ``srcore.quantize`` (same observer)
and run node by node on ``quantized_cpu`` (itself bit for bit with torch's fbgemm kernels, see
plugins/quantized/tests) must give the engine's output bit for bit; and the float model's output,
within an error bound derived from the quantization steps of a single linear layer.
"""
from __future__ import annotations

import numpy as np
import pytest

import srcore

# engines are one node whatever the executor and memory planner
pytestmark = pytest.mark.one_pass

DIGITS = "examples/digits/digits.srm"
CALIB = "examples/digits/digits_calib.npz"
TRT = ("trt_like", "quantized_cpu", "cpu")


def _int8(engine_options: dict, backends=TRT) -> srcore.Options:
    # timing off: the first (usual winner) tactic per layer; every int8 tactic gives the same integers
    return srcore.Options(backends=backends, engine_options={"precision": "int8", "timing": False, **engine_options})


def _int8_steps(sm) -> list[str]:
    engines = [pn.fn.fn for pn in sm.top.nodes if pn.fn is not None and pn.fn.backend == "trt_like"]
    return [f"{s.layer.kind}:{s.tactic}" for e in engines for p in e.engine.plans.values() for s in p.steps
            if s.precision == "int8"]


@pytest.fixture(scope="module")
def digits(request):
    root = request.config.rootpath
    model = srcore.load(root / DIGITS)
    with np.load(root / "examples/digits/digits_test.npz") as d:
        x = d["x"][:64]
    return model, str(root / CALIB), x


@pytest.mark.parametrize("calibrator,observer", [("entropy", {"observer": "histogram", "histogram_method": "entropy"}),
                                                 ("minmax", {"observer": "minmax"})])
def test_calibrated_engine_is_srcore_quantize_on_quantized_cpu_bit_for_bit(digits, calibrator, observer):
    model, calib, x = digits
    sm = srcore.StaticModule(model, options=_int8({"calibration": calib, "calibrator": calibrator}))
    got = sm(x)                          # a symbolic batch: the plan is made at the first call
    steps = _int8_steps(sm)
    assert any(s.startswith("qconv:") for s in steps) and any(s.startswith("qgemm:") for s in steps), steps
    ref = srcore.StaticModule(srcore.quantize(model, calib, **observer))   # quantized_cpu + cpu
    assert not any(pn.fn.backend == "trt_like" for pn in ref.top.nodes if pn.fn is not None)
    assert np.array_equal(got, ref(x))
    # the module runs (and would save) the quantized model; its options no longer carry the data
    assert "calibration" not in dict(sm.options.engine_options)
    assert any(n.kind.startswith("quantized::") for n in sm.model.graph.all_nodes())


def _linear_model(w: np.ndarray, b: np.ndarray, x: np.ndarray) -> srcore.Model:
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    return srcore.from_torchscript(lin.eval(), (torch.from_numpy(x),))


def test_calibrated_linear_engine_is_within_the_derived_error_bound():
    """One linear layer, minmax calibration on the data it then runs (no clipping): each output's
    error against float is at most, summed over k, the input's rounding (s_x/2) times |w|, the
    weight's (s_w/2) times |x| and their product, plus one output step (rounding s_y/2 and the
    zero point's rounding of the range, s_y/2)."""
    rng = np.random.default_rng(7)
    k, n = 96, 24
    w = rng.normal(0, 0.2, (n, k)).astype(np.float32)
    b = rng.normal(0, 0.1, n).astype(np.float32)
    x = rng.normal(0.3, 1.0, (40, k)).astype(np.float32)
    model = _linear_model(w, b, x)
    sm = srcore.StaticModule(model, options=_int8({"calibration": {"input": x}, "calibrator": "minmax", "calibration_batch_size": 40}))
    assert _int8_steps(sm), sm.partition.format()
    got = sm(x)
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + b
    # the quantization steps srcore.quantize chose (its graph's types)
    types = {n.kind: n for n in sm.model.graph.all_nodes()}
    s_x = types["aten::quantize_per_tensor"].output.type.qparams.scale
    qlin = next(n for n in sm.model.graph.all_nodes() if n.kind.startswith("quantized::qlinear"))
    s_y = qlin.output.type.qparams.scale
    s_w = np.abs(w).max(axis=1) / 127.0
    bound = (np.abs(w).sum(1) * s_x / 2 + np.abs(x) @ np.broadcast_to(s_w / 2, (k, n)) + k * s_x * s_w / 4
             + s_y)
    err = np.abs(got - ref)
    assert np.all(err <= bound * (1 + 1e-5)), float((err / bound).max())
    assert err.max() > 0    # it is quantized, not float


@pytest.mark.parametrize("calibration,message", [
    ({"image": np.zeros((4, 1, 8, 8), np.float32)}, r"'x'"),
    ({"x": np.zeros((4, 1, 9, 8), np.float32)}, r"calibration input 'x'.*dim 2 is 9"),
    ({"x": np.zeros((4, 1, 8, 8), np.float64)}, r"calibration input 'x'.*dtype float64"),
    ("no/such/calib.npz", r"no/such/calib.npz: no such calibration file"),
])
def test_bad_calibration_data_is_an_error_naming_the_input(digits, calibration, message):
    model, _, _ = digits
    with pytest.raises(srcore.SrcoreError, match=r"engine_options\['calibration'\]: .*" + message):
        srcore.StaticModule(model, options=_int8({"calibration": calibration}))


def test_calibration_option_errors(digits):
    model, calib, _ = digits
    with pytest.raises(srcore.EngineOptionError, match=r"needs precision='int8' \(got precision='float32'\)"):
        srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"calibration": calib}))
    with pytest.raises(srcore.EngineOptionError, match=r"calibrator='kl': expected one of entropy, minmax"):
        srcore.StaticModule(model, options=_int8({"calibration": calib, "calibrator": "kl"}))
    with pytest.raises(srcore.EngineOptionError, match=r"'calibrator' is given without 'calibration' data"):
        srcore.StaticModule(model, options=_int8({"calibrator": "minmax"}))
    qmodel = srcore.quantize(model, calib)
    with pytest.raises(srcore.EngineOptionError, match=r"this model is quantized already"):
        srcore.StaticModule(qmodel, options=_int8({"calibration": calib}))
    # a quantized model with precision int8 and no data: its segments are int8 engines as they are
    sm = srcore.StaticModule(qmodel, options=_int8({}))
    sm(np.zeros((2, 1, 8, 8), np.float32))
    assert _int8_steps(sm)

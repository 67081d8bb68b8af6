"""What the held-out zoo tests share: the backends, the options each runs with, the test cells
(model x import path x backend, most under ``full``) and the check of one cell against torch."""
from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
import warnings

import numpy as np
import pytest
import torch

import srcore
from _harness import RTOL, assert_close, flatten_np, run, torch_outputs
from heldout_paths import PATHS, convert

BACKENDS = {"cpu": ("cpu",), "trt_like": ("trt_like", "cpu"), "openvino": ("openvino", "cpu")}
HAVE_OPENVINO = importlib.util.find_spec("openvino") is not None


def options(backend: str) -> srcore.Options:
    if backend == "cpu":
        return srcore.Options(backends=BACKENDS["cpu"])
    # tactic timing off: each engine takes its first applicable tactic (the parity is the point here)
    return srcore.Options(backends=BACKENDS[backend], engine_min_block_size=1, engine_options={"timing": False})


def engine_options(backend: str) -> srcore.Options:
    """The zoos' options for ``backend`` with ``quantized_cpu`` in both lists (what quantized models run
    on); trt_like: tactic timing off, every block an engine (the parity is the point)."""
    if backend == "cpu":
        return srcore.Options(backends=("quantized_cpu", "cpu"))
    return srcore.Options(backends=(backend, "quantized_cpu", "cpu"), engine_min_block_size=1,
                          engine_options={"timing": False})


def assert_no_fallback(sm: srcore.StaticModule, backend: str) -> None:
    """On an engine backend, no segment fell back to cpu."""
    if backend != "cpu":
        failed = [s for s in sm.partition.segments if s.status == "fallback"]
        assert not failed, "\n".join(f"{s.name}: {s.reason}" for s in failed)


def check_onnx_vs_ort(name: str, proto, feed_sets, backend: str, tol: float = 1e-4) -> None:
    """ONNX ``proto`` through srcore on ``backend`` (:func:`engine_options`) against onnxruntime on each
    feed dict of ``feed_sets`` (None entries skipped), in order with one StaticModule: the same outputs,
    shapes and dtypes exactly, bools exactly, values within ``tol`` relative and ``tol / 10`` absolute;
    no engine segment fell back."""
    import onnxruntime as ort

    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    sm = srcore.StaticModule(srcore.from_onnx(proto), options=engine_options(backend))
    for k, fd in enumerate(feed_sets):
        if fd is None:
            continue
        want = sess.run(None, fd)
        got = flatten_np(sm(**fd))
        assert len(got) == len(want), f"{name} feeds {k}"
        for i, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{name} feeds {k} output {i}"
            if w.dtype == bool:
                np.testing.assert_array_equal(g, w, err_msg=f"{name} feeds {k} output {i}")
            else:
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol / 10, err_msg=f"{name} feeds {k} output {i}")
    assert_no_fallback(sm, backend)


def param(cell_id: str, *values, default: bool):
    """One case: in the default run if ``default``, else under ``full``."""
    return pytest.param(*values, id=cell_id, marks=[] if default else [pytest.mark.full])


def grid_cells(grid: dict, backends=("cpu", "trt_like"), trt_like_default=()) -> list:
    """The (model, path, backend) cells of a zoo whose models name their own paths (``grid``: name ->
    (factory, paths, rtol)): by default each model on cpu through a path that rotates over its paths,
    those named in ``trt_like_default`` on trt_like through the next one; the rest under ``full``."""
    out = []
    for i, (name, (_f, paths, _rtol)) in enumerate(grid.items()):
        for j, path in enumerate(paths):
            for backend in backends:
                if backend == "cpu":
                    default = j == i % len(paths)
                else:
                    default = name in trt_like_default and j == (i + 1) % len(paths)
                out.append(param(f"{name}-{path}-{backend}", name, path, backend, default=default))
    return out


def cells(models, trt_like_default=(), openvino_default=(), cannot_export=None) -> list:
    """Every (model, path, backend) cell: by default each model on cpu through a path that rotates
    over the zoo (every path covered), those named on trt_like or openvino through the next paths;
    the rest under ``full``. ``cannot_export``: (model, path) -> why torch's exporter fails (strict
    xfails under ``full``)."""
    out = []
    for i, name in enumerate(models):
        default = {(PATHS[i % 5], "cpu")}
        if name in trt_like_default:
            default.add((PATHS[(i + 1) % 5], "trt_like"))
        if name in openvino_default:
            default.add((PATHS[(i + 3) % 5], "openvino"))
        for path in PATHS:
            for backend in BACKENDS:
                marks = [] if (path, backend) in default else [pytest.mark.full]
                if backend == "openvino":
                    marks.append(pytest.mark.skipif(not HAVE_OPENVINO, reason="openvino is not installed"))
                why = (cannot_export or {}).get((name, path))
                if why is not None:
                    marks = [pytest.mark.full, pytest.mark.xfail(raises=torch.onnx.errors.OnnxExporterError,
                                                                 strict=True, reason=why)]
                out.append(pytest.param(name, path, backend, id=f"{name}-{path}-{backend}", marks=marks))
    return out


def check_cell(factory, name: str, path: str, backend: str, monkeypatch, tmp_path_factory,
               rtol: float = RTOL) -> None:
    """Model ``factory()`` through ``path`` on ``backend`` matches torch eager twice (within
    ``rtol``: :func:`_harness.assert_close`); on an engine backend no segment fell back."""
    if backend == "openvino":  # OpenVINO's compiled models go to a temporary cache, never to ~/.cache/srcore
        monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "srcore-cache"))
    m, inputs = factory()
    sm = srcore.StaticModule(convert(m, inputs, path), options=options(backend))
    want = torch_outputs(m, inputs)
    what = f"{name} via {path} on {backend}"
    assert_close(run(sm, inputs), want, what, rtol)
    assert_close(run(sm, inputs), want, what + ", run 2", rtol)
    assert_no_fallback(sm, backend)


def fx_x86(factory):
    """Model ``factory()`` after FX post-training static quantization (x86 qconfig, calibrated on
    four seeded batches), scripted, and its example inputs (quantized engine x86 set by the caller)."""
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    m, inputs = factory()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_fx(m, tq.get_default_qconfig_mapping("x86"), inputs)
        with torch.no_grad():
            for s in range(4):
                prepared(*[torch.randn(x.shape, generator=torch.Generator().manual_seed(s)) for x in inputs])
        return torch.jit.script(convert_fx(prepared)), inputs


def check_fx_quantized(factory) -> None:
    """The FX-quantized model (:func:`fx_x86`) through srcore matches torch bit for bit; torch's
    quantized engine is x86 meanwhile and restored after."""
    before = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "x86"
        ts, inputs = fx_x86(factory)
        want = torch_outputs(ts, inputs)
        sm = srcore.StaticModule(srcore.from_torchscript(ts, inputs))
    finally:
        torch.backends.quantized.engine = before
    got = run(sm, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def onnx_from_torch(m, inputs, opset: int, dynamic_batch: bool = True) -> srcore.Model:
    """``m`` written by torch.onnx (TorchScript exporter) at ``opset``, inputs ``in0``, ``in1``, ...
    (their dim 0 a dynamic ``batch`` unless ``dynamic_batch`` is false), read back by srcore."""
    names = [f"in{i}" for i in range(len(inputs))]
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "m.onnx")
        with torch.no_grad():
            torch.onnx.export(m, inputs, f, dynamo=False, opset_version=opset, input_names=names,
                              dynamic_axes={k: {0: "batch"} for k in names} if dynamic_batch else None)
        return srcore.from_onnx(f)


def hand_built_onnx_params(module: str, default) -> list:
    """One param per hand-built ONNX case of ``module`` (its ``CASES``: name -> (proto, feeds)); those
    not in ``default`` under ``full``."""
    cases = importlib.import_module(module).CASES
    return [pytest.param(n, marks=[] if n in default else [pytest.mark.full]) for n in cases]


def onnx_backend_cells(module: str, backends, trt_like_default) -> list:
    """One ``(name, backend)`` param per hand-built case of ``module`` (its ``CASES``) and backend: every cpu
    cell and the trt_like cells of ``trt_like_default`` in the default run, the rest under ``full``."""
    cases = importlib.import_module(module).CASES
    return [param(f"{n}-{b}", n, b, default=b == "cpu" or n in trt_like_default) for n in cases for b in backends]


def refused_params(module: str) -> list:
    """One ``(proto, pattern)`` param per file of ``module``'s ``REFUSED`` (name -> (proto, pattern))."""
    refused = importlib.import_module(module).REFUSED
    return [pytest.param(p, pat, id=n) for n, (p, pat) in refused.items()]


def check_hand_built_onnx(module: str, name: str, tol: float = 1e-4) -> None:
    """Hand-built ONNX case ``name`` of ``module`` through srcore against onnxruntime: the same outputs
    (shapes and dtypes exactly, values within ``tol`` relative, ``tol / 10`` absolute)."""
    import onnxruntime as ort

    proto, feeds = importlib.import_module(module).CASES[name]
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = srcore.StaticModule(srcore.from_onnx(proto))(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"output {i}"
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol / 10, err_msg=f"{name} output {i}")

"""srcore against the ONNX backend test suite shipped in the ``onnx`` package.

``node_cases(modules)`` builds the node tests (all of them, or only those of some
of ``onnx.backend.test.case.node``'s modules: importing one module builds its
cases only), ``model_cases(kinds)`` loads the model tests the wheel ships with
their data (``simple``, ``pytorch-converted``, ``pytorch-operator``), and
``run_case`` runs one through :class:`~srcore.frontends.onnx_import.backend.SrcoreBackend`
and classifies it:

* ``pass``: every output has the expected shape, dtype and values (the case's rtol/atol; float16 and
  bfloat16 two units in the last place more: onnx.reference rounds after every op, srcore once);
* ``unsupported``: ``prepare`` raised an ``srcore.SrcoreError`` (conversion or load);
* ``error``: running raised an ``srcore.SrcoreError`` (a clear error, not an answer);
* ``mismatch``: a wrong answer (shape, dtype or values): never acceptable;
* ``crash``: any other exception: a bug.

``tools/gen_onnx_conformance.py`` writes ``docs/onnx-conformance.md`` from these.
"""
from __future__ import annotations

import glob
import importlib
import os
import re
import traceback
import warnings
from typing import Any, Iterable, Sequence

import attrs
import numpy as np

STATUSES = ("pass", "unsupported", "error", "mismatch", "crash")


@attrs.frozen
class Case:
    name: str
    kind: str                 # "node" or a model-test kind ("simple", "pytorch-converted", ...)
    op: str                   # the op a node test is about ("" for model tests)
    expanded: bool            # a node test of the op's function body (the op expanded into others)
    model: Any                # ModelProto
    data_sets: list           # [(inputs, expected outputs)]
    rtol: float
    atol: float


@attrs.frozen
class Result:
    case: Case
    status: str
    reason: str = ""


def node_cases(modules: Sequence[str] | None = None) -> list[Case]:
    """The node tests: every one (``modules=None``; ~10 s), or those built by the named modules of
    ``onnx.backend.test.case.node`` (``["relu", "conv"]``)."""
    from onnx.backend.test.case import node as node_pkg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if modules is None:
            tests = node_pkg.collect_testcases(None)
        else:
            for m in modules:
                importlib.import_module(f"onnx.backend.test.case.node.{m}")
            tests = node_pkg._NodeTestCases  # the cases the imported modules' exporters built
    ops = {}
    for t in tests:
        if not t.name.endswith("_expanded") and "_expanded_ver" not in t.name and len(t.model.graph.node) == 1:
            ops[t.name] = t.model.graph.node[0].op_type
    cases = []
    for t in tests:
        base = re.sub(r"_expanded(_ver\d+)?$", "", t.name)
        expanded = base != t.name
        op = ops.get(base) or (t.model.graph.node[0].op_type if len(t.model.graph.node) == 1 else "?")
        atol = max(t.atol, REFERENCE_NOISE.get(t.name, 0.0))
        data = list(t.data_sets)
        if t.name in OUTPUT_LENGTH_ALIGN_CORNERS:
            data = [(i, _by_output_sizes(t.model, i)) for i, _ in data]
        cases.append(Case(t.name, "node", op, expanded, t.model, data, t.rtol, atol))
    return cases


#: node tests whose shipped values take align_corners' ``length_resized`` as the input length times the
#: scale, unrounded (onnx's reference, which made them); the operator's text ("the length of the resized
#: tensor"), onnxruntime and torch (``F.interpolate(scale_factor=.., align_corners=True)``, which
#: torch.onnx exports as these scales) take the output's integer length, as srcore does: their expected
#: values are the reference's for the output sizes instead of the scales
OUTPUT_LENGTH_ALIGN_CORNERS = ("test_resize_downsample_scales_linear_align_corners",
                               "test_resize_downsample_scales_cubic_align_corners")


def _by_output_sizes(model, inputs) -> list:
    """The outputs onnx's reference gives the one-Resize ``model`` fed ``inputs`` when its scales are
    replaced by the output sizes they give (``floor(length * scale)``)."""
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    node = model.graph.node[0]
    feeds = dict(zip([v.name for v in model.graph.input], inputs))
    x, scales = feeds[node.input[0]], feeds[node.input[2]]
    sizes = np.floor(np.array(x.shape) * scales.astype(np.float32)).astype(np.int64)
    r = helper.make_node("Resize", [node.input[0], "", "", "sizes"], list(node.output))
    r.attribute.extend(node.attribute)
    g = helper.make_graph([r], "r", [model.graph.input[0]], list(model.graph.output),
                          [numpy_helper.from_array(sizes, "sizes")])
    m = helper.make_model(g, opset_imports=list(model.opset_import))
    return [np.asarray(o) for o in ReferenceEvaluator(m).run(None, {node.input[0]: x})]


#: node tests whose expected values carry numpy's single-precision FFT rounding where the exact result
#: is 0 (up to 1.5e-6 off the float64 transform; srcore's float64 DFT is within 4.5e-7 of it): the
#: absolute tolerance those zeros get
REFERENCE_NOISE = {"test_dft_inverse": 5e-6, "test_dft_inverse_opset19": 5e-6}


def with_constant_inputs(case: Case) -> Case | None:
    """The node test with every input but the first made an initializer holding the value its (first)
    data set feeds: the form exported models have, where axes, scales, pads or steps are constants.
    None when it has fewer than two inputs or its data sets feed different such values."""
    from onnx import numpy_helper

    inputs, outputs = case.data_sets[0]
    if len(inputs) < 2 or not all(isinstance(a, np.ndarray) for a in inputs[1:]):
        return None
    for other, _ in case.data_sets[1:]:
        if any(not np.array_equal(a, b) for a, b in zip(inputs[1:], other[1:])):
            return None
    m = type(case.model)()
    m.CopyFrom(case.model)
    graph_inputs = list(m.graph.input)
    for vi, arr in zip(graph_inputs[1:], inputs[1:]):
        m.graph.initializer.append(numpy_helper.from_array(arr, vi.name))
    del m.graph.input[1:]
    return attrs.evolve(case, model=m, data_sets=[(list(i[:1]), o) for i, o in case.data_sets])


MODEL_KINDS = ("simple", "pytorch-converted", "pytorch-operator")


def model_cases(kinds: Iterable[str] = MODEL_KINDS) -> list[Case]:
    """The model tests whose model and data the onnx wheel ships."""
    import onnx
    from onnx.backend.test.loader import load_model_tests

    cases = []
    for kind in kinds:
        for t in load_model_tests(kind=kind):
            if t.model_dir is None:
                continue
            model = onnx.load(os.path.join(t.model_dir, "model.onnx"))
            data = [_load_data_set(model, d) for d in sorted(glob.glob(os.path.join(t.model_dir, "test_data_set_*")))]
            cases.append(Case(t.name, kind, "", False, model, data, t.rtol, t.atol))
    return cases


def _load_data_set(model, directory: str):
    def load(prefix: str, types):
        out = []
        for i in range(len(glob.glob(os.path.join(directory, f"{prefix}_*.pb")))):
            with open(os.path.join(directory, f"{prefix}_{i}.pb"), "rb") as f:
                data = f.read()
            out.append(_proto_value(data, types[i] if i < len(types) else None))
        return out

    inits = {t.name for t in model.graph.initializer}
    in_types = [vi.type for vi in model.graph.input if vi.name not in inits]
    return load("input", in_types), load("output", [vi.type for vi in model.graph.output])


def _proto_value(data: bytes, type_proto):
    import onnx
    from onnx import numpy_helper

    which = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if which == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return numpy_helper.to_list(seq)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def run_case(case: Case, **prepare_kwargs) -> Result:
    """Run ``case`` through srcore's backend and classify the outcome (see the module docstring)."""
    from ..errors import SrcoreError
    from ..frontends.onnx_import.backend import SrcoreBackend

    try:
        rep = SrcoreBackend.prepare(case.model, **prepare_kwargs)
    except SrcoreError as exc:
        return Result(case, "unsupported", _reason(exc))
    except Exception as exc:  # noqa: BLE001 - a bug: reported as such
        return Result(case, "crash", f"prepare: {type(exc).__name__}: {exc} {_where(exc)}")
    for inputs, expected in case.data_sets:
        inputs, expected = _normalize(inputs), _normalize(expected)
        try:
            with np.errstate(all="ignore"):
                outs = rep.run(list(inputs))
        except SrcoreError as exc:
            return Result(case, "error", _reason(exc))
        except Exception as exc:  # noqa: BLE001
            return Result(case, "crash", f"run: {type(exc).__name__}: {exc} {_where(exc)}")
        problem = compare(list(outs), list(expected), case.rtol, case.atol)
        if problem:
            return Result(case, "mismatch", problem)
    return Result(case, "pass")


def _normalize(values) -> list:
    """TensorProto items (some generated cases hold them) as arrays, as onnx's runner does."""
    from onnx import TensorProto, numpy_helper

    return [numpy_helper.to_array(v) if isinstance(v, TensorProto) else v for v in values]


def compare(outs: list, expected: list, rtol: float, atol: float) -> str:
    """'' when ``outs`` match ``expected`` (count, shape, dtype, values with NaN == NaN), else why not."""
    if len(outs) != len(expected):
        return f"{len(outs)} outputs, expected {len(expected)}"
    for i, (o, e) in enumerate(zip(outs, expected)):
        if isinstance(e, list):
            if not isinstance(o, (list, tuple)) or len(o) != len(e):
                return f"output {i}: expected a sequence of {len(e)}"
            for j, (oj, ej) in enumerate(zip(o, e)):
                why = compare([oj], [ej], rtol, atol)
                if why:
                    return f"output {i}[{j}]: {why}"
            continue
        o, e = np.asarray(o), np.asarray(e)
        if o.shape != e.shape:
            return f"output {i}: shape {list(o.shape)}, expected {list(e.shape)}"
        if o.dtype != e.dtype:
            return f"output {i}: dtype {o.dtype}, expected {e.dtype}"
        if e.dtype == object or e.dtype.kind in "biuSU":
            if not np.array_equal(o, e):
                return f"output {i}: values differ at {int(np.sum(o != e))} of {e.size} positions"
        else:
            why = _values_differ(o, e, rtol, atol)
            if why:
                return f"output {i}: {why}"
    return ""


def _values_differ(o: np.ndarray, e: np.ndarray, rtol: float, atol: float) -> str:
    """'' when float ``o`` is within ``atol + rtol·|e|`` of ``e`` (NaN == NaN, inf == inf), else how not.
    float16/bfloat16: the expected values are onnx.reference's roundings after every op (srcore's
    kernels compute in float32 and round once), and a case's rtol can be finer than the type
    resolves: two units in the last place of each expected value more."""
    if e.dtype.kind == "c":
        return "" if np.allclose(o, e, rtol=rtol, atol=atol, equal_nan=True) else "complex values differ"
    o64, e64 = o.astype(np.float64), e.astype(np.float64)
    with np.errstate(invalid="ignore"):   # inf - inf: the equality test decides
        tol = atol + rtol * np.abs(e64)
        if e.dtype.itemsize <= 2:
            tol = tol + 2 * np.abs(np.spacing(e)).astype(np.float64)
        bad = ~((np.abs(o64 - e64) <= tol) | (np.isnan(o64) & np.isnan(e64)) | (o64 == e64))
        if not bad.any():
            return ""
        return f"{int(bad.sum())} of {e.size} values differ (max abs diff {float(np.nanmax(np.abs(o64 - e64))):.3g})"


def _reason(exc: Exception) -> str:
    """The lines of a srcore error that say why (the problem lines of a ConversionError)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    problems = [ln[2:] for ln in lines if ln.startswith("- ")]
    text = "; ".join(problems) if problems else " ".join(lines[:3])
    return f"{type(exc).__name__}: {text}"[:400]


def _where(exc: Exception) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    return f"at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""


def run_all(cases: Iterable[Case], **prepare_kwargs) -> list[Result]:
    return [run_case(c, **prepare_kwargs) for c in cases]

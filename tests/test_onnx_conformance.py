"""srcore as an ONNX backend against the onnx package's backend test suite (the node tests and the
model tests its wheel ships). No case may give a wrong answer (a mismatch) or fail with anything
but a srcore.SrcoreError; the node tests of the ops in the default set pass at least at the rate
docs/onnx-conformance.md records.

The default run takes a representative set of node-test modules (the ops models use most, and
control flow) and every other shipped model test; ``SRCORE_ONNX_CONFORMANCE=1`` runs all ~1,900
node tests and every model test (about two minutes), the run ``tools/gen_onnx_conformance.py``
makes the docs page from.
The cases test the converter's mapping of ONNX semantics, not the executors (compared elsewhere):
first pass only.
"""
from __future__ import annotations

import collections
import os

import pytest

from srcore.frontends.onnx_import.ops import TABLE
from srcore.testing import onnx_conformance as oc

pytestmark = pytest.mark.one_pass

FULL = os.environ.get("SRCORE_ONNX_CONFORMANCE") == "1" or os.environ.get("SRCORE_TESTS_FULL") == "1"

#: modules of onnx.backend.test.case.node: importing one builds only its cases
#: (pooling comes from the model tests: its node-test modules take ~25 s to build their expected outputs)
DEFAULT_MODULES = ["add", "relu", "conv", "convtranspose", "gemm", "matmul", "globalaveragepool", "batch_normalization", "layernormalization", "softmax", "reshape",
                   "transpose", "concat", "slice", "gather", "split", "squeeze", "unsqueeze", "flatten",
                   "expand", "where", "clip", "reducesum", "reducemean", "cast", "pad", "topk", "argmax",
                   "if_", "loop", "resize", "gelu", "erf", "pow", "sigmoid", "tanh", "div", "shape",
                   "reduceprod", "quantizelinear", "dequantizelinear", "cumsum", "scatternd",
                   "reducemax", "reducemin", "bitshift", "gathernd", "dropout",
                   "qlinearconv", "matmulinteger", "convinteger", "meanvariancenormalization"]

#: the pass rate the default set must keep (supported dtypes; docs/onnx-conformance.md has the full run)
MIN_PASS_RATE = 0.97


@pytest.fixture(scope="module")
def results():
    models = sorted(oc.model_cases(), key=lambda c: c.name)
    cases = oc.node_cases(None if FULL else DEFAULT_MODULES) + (models if FULL else models[::2])
    return oc.run_all(cases)


def test_no_wrong_answer_and_no_crash(results):
    bad = [f"{r.case.name}: {r.status}: {r.reason}" for r in results if r.status in ("mismatch", "crash")]
    assert not bad, "\n".join(bad)
    assert len(results) > (1500 if FULL else 350)


def test_mapped_ops_pass(results):
    mapped = [r for r in results if r.case.kind == "node" and r.case.op in TABLE
              and "element type" not in r.reason]   # not the tensors of dtypes srcore lacks
    passed = sum(r.status == "pass" for r in mapped)
    by_status = collections.Counter(r.status for r in mapped)
    assert passed >= MIN_PASS_RATE * len(mapped), (passed, len(mapped), by_status)


def test_model_tests_pass(results):
    models = [r for r in results if r.case.kind != "node"]
    failing = {r.case.name for r in models if r.status != "pass"}
    # what the shipped model tests need and srcore lacks: strings, training-only ops
    expected = {"test_gradient_of_add", "test_gradient_of_add_and_mul"}
    assert {n for n in failing if not n.startswith("test_strnorm")} <= expected, sorted(failing - expected)
    assert sum(r.status == "pass" for r in models) >= (132 if FULL else 66)


def test_unsupported_cases_say_why(results):
    for r in results:
        if r.status in ("unsupported", "error"):
            assert r.reason.split(":")[0] in {"ConversionError", "UnsupportedOpError", "KernelError", "ShapeError",
                                              "SrcoreInputError", "VerificationError", "PassError",
                                              "NeedsConstantInputs"}, r.reason
            assert len(r.reason) > 30, r.reason


def test_compare_allows_two_units_in_the_last_place_of_half_precision_only():
    import numpy as np

    e16 = np.array([0.4949, -2.0, 0.0], np.float16)
    two = e16 + 2 * np.spacing(e16)
    three = e16 + 3 * np.spacing(e16)
    assert oc.compare([two], [e16], 1e-6, 0.0) == ""
    assert "3 of 3 values differ" in oc.compare([three], [e16], 1e-6, 0.0)
    e32 = np.array([0.4949, -2.0], np.float32)
    assert "values differ" in oc.compare([e32 + 2 * np.spacing(e32)], [e32], 0.0, 0.0)
    assert oc.compare([np.array([np.nan], np.float16)], [np.array([np.nan], np.float16)], 0.0, 0.0) == ""

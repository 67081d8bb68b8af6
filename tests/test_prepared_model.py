"""A model saved prepared (``StaticModule.save(path, prepared=True)``): a load with the same input types and
backends runs no pass and imports no pass module, and gets the graph, generated code and outputs of a load
of the original model; any other load prepares it again."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest

import srcore
from srcore.runtime.prepared import KEY

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.srm"


@pytest.fixture(scope="module")
def digits():
    x = np.load(ROOT / "examples" / "digits" / "digits_test.npz")["x"][:3]
    return srcore.load(DIGITS), x


@pytest.fixture(scope="module")
def prepared(digits, tmp_path_factory):
    model, x = digits
    sm = srcore.StaticModule(model)
    path = tmp_path_factory.mktemp("prepared") / "digits.prepared.srm"
    sm.save(path, prepared=True)
    return path, sm


def _source(sm):
    """The generated code (None with the interpreter executor, the test suite's second pass)."""
    return sm.codegen.source if sm.codegen is not None else None


def test_a_prepared_model_loads_without_passes_and_runs_the_same(digits, prepared):
    model, x = digits
    path, sm = prepared
    again = srcore.StaticModule(srcore.load(path))
    assert again.prepared_before and not sm.prepared_before
    assert "passes" in sm.load_stages and "passes" not in again.load_stages
    assert srcore.print_graph(again.graph) == srcore.print_graph(sm.graph)
    assert _source(again) == _source(sm)
    np.testing.assert_array_equal(again(x[:1]), sm(x[:1]))


def test_any_other_load_prepares_it_again(digits, prepared):
    model, x = digits
    path, sm = prepared
    loaded = srcore.load(path)
    other_backends = srcore.StaticModule(loaded, backends=("cpu",))
    if tuple(sm.options.backends) != ("cpu",):
        assert not other_backends.prepared_before and "passes" in other_backends.load_stages
    assert not srcore.StaticModule(loaded, options=srcore.Options(optimize=False)).prepared_before
    older = attrs.evolve(loaded, metadata={**loaded.metadata, KEY: loaded.metadata[KEY].replace(
        f'"srcore":"{srcore.__version__}"', '"srcore":"0.0.1"')})
    redone = srcore.StaticModule(older)
    assert not redone.prepared_before and _source(redone) == _source(sm)  # the passes are idempotent
    np.testing.assert_array_equal(redone(x[:1]), sm(x[:1]))
    np.testing.assert_array_equal(other_backends(x[:1]), sm(x[:1]))


def test_only_a_prepared_load_can_be_saved_prepared(digits, tmp_path):
    model, _ = digits
    with pytest.raises(srcore.SrcoreError, match="optimize=False"):
        srcore.StaticModule(model, options=srcore.Options(optimize=False)).save(tmp_path / "x.srm", prepared=True)
    assert not (tmp_path / "x.srm").exists()


def test_a_fresh_process_loading_a_prepared_model_imports_no_pass(prepared):
    path, _ = prepared
    code = (f"import json, sys, numpy as np, srcore\nsm = srcore.StaticModule(srcore.load({str(path)!r}))\n"
            "sm(np.zeros((1, 1, 8, 8), np.float32))\n"
            "print(json.dumps([sm.prepared_before, sorted(n for n in sys.modules if n.startswith('srcore.passes'))]))")
    env = {k: v for k, v in os.environ.items() if k != "SRCORE_SELECTION"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == [True, []]

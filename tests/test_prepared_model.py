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
            "print(json.dumps([sm.prepared_before, sm.types_before, "
            "sorted(n for n in sys.modules if n.startswith('srcore.passes'))]))")
    env = {k: v for k, v in os.environ.items() if k != "SRCORE_SELECTION"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == [True, True, []]   # no pass, no propagation


def _types(sm):
    from srcore.runtime.process import enumerate_values

    return [v.type for v in enumerate_values(sm.graph)]


def test_the_saved_types_are_the_propagated_ones_and_skip_propagation(prepared):
    path, sm = prepared
    again = srcore.StaticModule(srcore.load(path))
    assert again.prepared_before and again.types_before and not sm.types_before
    assert _types(again) == _types(sm) and all(t is not None for t in _types(again))
    assert json.loads(srcore.load(path).metadata[KEY])["types"] is True


def test_a_load_under_other_options_or_registry_does_the_work_again(digits, prepared, tmp_path):
    """The record's fingerprint covers the options and the registry: another of either is a mismatch, and
    that load runs the passes and propagation as for any model, with the same result."""
    model, x = digits
    path, sm = prepared
    loaded = srcore.load(path)
    other = srcore.StaticModule(loaded, options=srcore.Options(warm_up=False))
    assert not other.prepared_before and not other.types_before and "passes" in other.load_stages
    from srcore.cli.main import main

    selection = tmp_path / "digits.yaml"
    assert main(["select", str(DIGITS), "-o", str(selection)]) == 0
    selective = srcore.StaticModule(loaded, options=srcore.Options(selection=str(selection)))
    assert not selective.prepared_before and "passes" in selective.load_stages
    tampered = attrs.evolve(loaded, metadata={**loaded.metadata, KEY: loaded.metadata[KEY].replace(
        '"fingerprint":"', '"fingerprint":"0')})
    redone = srcore.StaticModule(tampered)
    assert not redone.prepared_before and "passes" in redone.load_stages
    for m in (other, selective, redone):
        assert _source(m) == _source(sm) and _types(m) == _types(sm)
        np.testing.assert_array_equal(m(x[:1]), sm(x[:1]))
    # saved under the selection, it is a match for a load under that selection only
    selective.save(tmp_path / "sel.srm", prepared=True)
    again = srcore.StaticModule(srcore.load(tmp_path / "sel.srm"), options=srcore.Options(selection=str(selection)))
    assert again.prepared_before and again.types_before
    assert not srcore.StaticModule(srcore.load(tmp_path / "sel.srm")).prepared_before
    # the layouts of the signature it was called with (batch 1) are the ones propagation computes
    rt = selective.runtime()
    key, types = rt.signature_of([x[:1]])
    assert key in again._recorded
    assert again.signature_info(key, types) == selective._compute_signature(types, reuse=False)
    np.testing.assert_array_equal(again(x[:1]), sm(x[:1]))
    # and a fresh process of that selection imports neither the passes nor propagation (nor pluggy)
    saved = str(tmp_path / "sel.srm")
    code = (f"import json, sys, numpy as np, srcore\nsm = srcore.StaticModule(srcore.load({saved!r}))\n"
            "y = sm(np.zeros((1, 1, 8, 8), np.float32))\n"
            "print(json.dumps([sm.types_before, y.tolist(), sorted(n for n in sys.modules if n.startswith("
            "('srcore.passes', 'srcore.ops.shapes', 'pluggy')))]))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SRCORE_SELECTION": str(selection)},
                         capture_output=True, text=True, check=True)
    types_before, y, modules = json.loads(out.stdout.splitlines()[-1])
    assert types_before and modules == []
    np.testing.assert_array_equal(np.array(y, np.float32), sm(np.zeros((1, 1, 8, 8), np.float32)))


def test_a_graph_prepared_under_the_registry_a_selection_was_made_under_loads_as_saved(digits, tmp_path):
    """``srcore select`` records the full registry it loaded the models with; a graph saved prepared under
    that registry and the same options (backends cpu, as select loads) is the graph the selection was
    collected from: a load with the selection uses it as saved. Without that record, or with another
    registry in it, or under other options, the load prepares it again, with the same result."""
    from srcore.cli.main import main
    from srcore.plugin.selection import read_selection, write_selection
    from srcore.runtime.prepared import registry_plugins

    model, x = digits
    full = srcore.StaticModule(model, backends=("cpu",))
    full.save(tmp_path / "full.srm", prepared=True)
    selection = tmp_path / "digits.yaml"
    assert main(["select", str(DIGITS), "-o", str(selection)]) == 0
    sel = read_selection(selection)
    assert sel.made_under == registry_plugins(srcore.get_plugin_manager()) and len(sel.made_under) >= 2
    loaded = srcore.load(tmp_path / "full.srm")
    fast = srcore.StaticModule(loaded, options=srcore.Options(selection=str(selection)))
    assert fast.prepared_before and fast.types_before and "passes" not in fast.load_stages
    reference = srcore.StaticModule(model, options=srcore.Options(selection=str(selection)))
    assert not reference.prepared_before
    assert srcore.print_graph(fast.graph) == srcore.print_graph(reference.graph)
    assert _source(fast) == _source(reference) and _types(fast) == _types(reference)
    np.testing.assert_array_equal(fast(x), reference(x))
    # the fallbacks: no record of the registry, another plugin version in it, other options
    unrecorded, other = tmp_path / "unrecorded.yaml", tmp_path / "other.yaml"
    write_selection(attrs.evolve(sel, made_under=()), unrecorded)
    write_selection(attrs.evolve(sel, made_under=tuple((n, d, "9.9" if n == "cpu" else v, s)
                                                       for n, d, v, s in sel.made_under)), other)
    for opts in (srcore.Options(selection=str(unrecorded)), srcore.Options(selection=str(other)),
                 srcore.Options(selection=str(selection), warm_up=False)):
        slow = srcore.StaticModule(loaded, options=opts)
        assert not slow.prepared_before and not slow.types_before and "passes" in slow.load_stages
        assert _source(slow) == _source(reference) and _types(slow) == _types(reference)
        np.testing.assert_array_equal(slow(x), reference(x))
    # a selection made selectively records no registry
    assert read_selection(_select_under(selection, tmp_path)).made_under == ()


def _select_under(selection, tmp_path):
    """``srcore select`` run in a process whose registry is the selection's."""
    out = tmp_path / "again.yaml"
    subprocess.run([sys.executable, "-m", "srcore", "select", str(DIGITS), "-o", str(out)], check=True,
                   env={**os.environ, "SRCORE_SELECTION": str(selection)}, capture_output=True)
    return out

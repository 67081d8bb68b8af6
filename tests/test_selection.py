"""Selective build: ``srcore select`` records what models use; a registry built from that file alone runs
them, refuses anything else by name, and rejects malformed or stale files naming file, line and op."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import srcore
from srcore.cli.main import main
from srcore.plugin.selection import collect, read_selection, to_yaml, write_selection

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.srm"

#: the CLI and file checks are independent of the executor and the memory planner
pytestmark = pytest.mark.one_pass

def mlp_model():
    """linear -> sigmoid, and numpy's answer."""
    from srcore.ir import Graph, TensorType

    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    g = Graph()
    x = g.add_input(TensorType("float32", (4, 8)), "x")
    wv, bv = g.insert_constant(w), g.insert_constant(b)
    wv.node.attrs["param"], bv.node.attrs["param"] = "fc.weight", "fc.bias"  # saved as parameters
    h = g.insert("aten::linear", [x, wv, bv], [TensorType()]).output
    g.register_output(g.insert("aten::sigmoid", [h], [TensorType()]).output)
    return srcore.Model.from_graph(g), (lambda xv: 1 / (1 + np.exp(-(xv @ w.T + b))))


@pytest.fixture(scope="module")
def digits_selection(tmp_path_factory):
    path = tmp_path_factory.mktemp("sel") / "digits.yaml"
    assert main(["select", str(DIGITS), "-o", str(path)]) == 0
    return path


def test_a_selection_runs_its_models_with_only_their_ops_and_kernels(digits_selection):
    sel = read_selection(digits_selection)
    assert {"aten::conv2d", "aten::linear", "srcore::linear_relu"} <= set(sel.op_names())
    assert set(sel.plugins) == {"builtin", "cpu"}
    model = srcore.load(DIGITS)
    data = np.load(ROOT / "examples" / "digits" / "digits_test.npz")
    full = srcore.StaticModule(model)
    sm = srcore.StaticModule(model, options=srcore.Options(selection=digits_selection))
    assert len(sm.registry.declared) == len(sel.ops) < 20 < len(full.registry.declared)
    assert {k.impl for k in sm.registry.kernel_table} == {k.impl for o in sel.ops for k in o.kernels}
    np.testing.assert_array_equal(sm(data["x"]), full(data["x"]))


def test_a_model_that_needs_anything_else_fails_naming_it(digits_selection):
    model, _ = mlp_model()
    with pytest.raises(srcore.UnsupportedOpError, match=r"(?s)1 op\(s\) of this model are not in the selective "
                       r"build .*digits.yaml:\n  aten::sigmoid$") as err:
        srcore.StaticModule(model, options=srcore.Options(selection=digits_selection))
    assert "srcore select" in err.value.hint
    from srcore.ir import Graph, TensorType

    g = Graph()  # digits' flatten for int64: the selection dispatched it for float32 only
    x = g.add_input(TensorType("int64", (2, 3, 4)), "x")
    g.register_output(g.insert("aten::flatten", [x, g.insert_constant(1), g.insert_constant(-1)],
                               [TensorType()]).output)
    with pytest.raises(srcore.UnsupportedOpError, match=r"(?s)aten::flatten.using_ints.* with dtypes \(int64\).*"
                       r"selective build .*: aten::flatten.using_ints is not in it, or not for these dtypes"):
        srcore.StaticModule(g, options=srcore.Options(selection=digits_selection, optimize=False))


def test_select_on_the_command_line_writes_yaml_and_a_summary(tmp_path, capsys):
    model, reference = mlp_model()
    srcore.save(model, tmp_path / "mlp.srm")
    assert main(["select", str(tmp_path / "mlp.srm"), str(DIGITS), "-o", "-"]) == 0
    yaml_text, err = capsys.readouterr()   # the YAML on stdout, the summary line on stderr
    assert "op overloads" in err and "op overloads" not in yaml_text
    # -o - and --format json would both claim stdout
    assert main(["select", str(DIGITS), "-o", "-", "--format", "json"]) == 2
    capsys.readouterr()
    assert main(["select", str(tmp_path / "mlp.srm"), str(DIGITS), "-o", str(tmp_path / "both.yaml"),
                 "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["models"] == [str(tmp_path / "mlp.srm"), str(DIGITS)] and summary["plugins"] == ["builtin", "cpu"]
    assert (tmp_path / "both.yaml").read_text() == yaml_text
    sel = read_selection(tmp_path / "both.yaml")
    assert {"aten::sigmoid", "aten::conv2d"} <= set(sel.op_names()) and len(sel.ops) == summary["ops"]
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    sm = srcore.StaticModule(srcore.load(tmp_path / "mlp.srm"), options=srcore.Options(selection=tmp_path / "both.yaml"))
    np.testing.assert_allclose(sm(x), reference(x), rtol=1e-5)
    assert main(["select", str(tmp_path / "nope.srm"), "-o", str(tmp_path / "x.yaml")]) == 1


def test_the_file_round_trips(digits_selection, tmp_path):
    sel = read_selection(digits_selection)
    write_selection(sel, tmp_path / "again.yaml")
    again = read_selection(tmp_path / "again.yaml")
    assert again == sel and to_yaml(again) == to_yaml(sel)


def test_srcore_selection_in_the_environment_is_the_default_registry(digits_selection):
    code = ("import sys, numpy as np, srcore\n"
            f"m = srcore.load({str(DIGITS)!r})\n"
            "sm = srcore.StaticModule(m)\n"
            "y = sm(np.zeros((1, 1, 8, 8), np.float32))\n"
            "mods = sorted(n for n in sys.modules if n.startswith(('srcore_cpu.', 'srcore.ops.')))\n"
            "print(len(srcore.get_plugin_manager().registry.declared), ' '.join(mods))\n")

    def child(**env):
        env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        n, *mods = out.split()
        return int(n), set(mods)

    n, mods = child(SRCORE_SELECTION=str(digits_selection))
    full_n, full_mods = child(SRCORE_SELECTION=None)
    assert n == len(read_selection(digits_selection).ops) < full_n
    # no kernel declaration, decomposition or declaration file module is read; no kernel module the full
    # registry would not import for this model either
    assert not {m for m in mods if m.startswith(("srcore_cpu.decl", "srcore.ops.decompositions"))}, mods
    assert {m for m in mods if ".kernels" in m} <= {m for m in full_mods if ".kernels" in m}
    assert len(mods) < len(full_mods)
    # the core's shape rules: only the modules of the selected rules (the full registry imports them all,
    # or, from its rule index (srcore/plugin/rule_index.py), those the model's ops and the index's closures need)
    from srcore.ops.shapes import RULE_MODULES

    def rule_modules(ms):
        return {m for m in ms if m.startswith("srcore.ops.shapes.") and m.rsplit(".", 1)[1] in RULE_MODULES}
    every = {f"srcore.ops.shapes.{m}" for m in RULE_MODULES}
    assert rule_modules(mods) <= rule_modules(full_mods) <= every and rule_modules(mods) < every


def test_a_selective_load_never_builds_the_core_schema_registry(digits_selection, monkeypatch):
    """The passes (lower_out_overloads, propagation) read the load's registry: a selection's small one."""
    import srcore.ops.registry as registry

    model = srcore.load(str(DIGITS))

    def refuse():
        raise AssertionError("the core schema registry was built during a selective load")

    monkeypatch.setattr(registry, "_SHARED", [])
    monkeypatch.setattr(registry, "default_registry", refuse)
    sm = srcore.StaticModule(model, options=srcore.Options(selection=str(digits_selection)))
    assert sm(np.zeros((1, 1, 8, 8), np.float32)).shape == (1, 10)


# -- bad files ----------------------------------------------------------------------------------------------
def _edit(path: Path, tmp_path: Path, old: str, new: str) -> Path:
    text = path.read_text()
    assert old in text, old
    out = tmp_path / "bad.yaml"
    out.write_text(text.replace(old, new, 1))
    return out


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize("old, new, message", [
    ("srcore_selection: 1", "srcore_selection: 1\nextra: 2", r"bad.yaml:\d+: unknown key 'extra' in a selection"),
    ("  aten::linear:\n    schema:", "  aten::linear:\n    shcema: x\n    schema:", r"unknown key 'shcema' in op aten::linear"),
    ("aten::linear(Tensor input", "aten::linear(Tensor input Tensor", r"aten::linear: .*expected"),
    ("schema: aten::linear(", "schema: aten::lineer(", r"the schema of aten::linear declares aten::lineer"),
    ("      plugin: cpu\n", "      plugin: gpu\n", r"plugin 'gpu' is not listed under 'plugins'"),
    ("cpu: {dist: srcore-cpu, version: 0.1.0}", "cpu: {dist: srcore-cpu, version: 9.9}",
     r"selected from srcore-cpu 9.9, but srcore-cpu 0.1.0 is installed: run srcore select again"),
    ("ops:\n", "ops: [\n", r"bad.yaml:\d+: invalid YAML"),
    ("- [cpu, srcore-cpu, 0.1.0, loaded]", "- [cpu, srcore-cpu]", r"bad.yaml:\d+: an entry of made_under must be a list"),
    ("srcore_cpu.kernels.linalg:linear\n", "srcore_cpux.kernels.linalg:linear\n", r"kernel module "
                                                                                  r"'srcore_cpux.kernels.linalg' does not exist"),
])
def test_a_malformed_or_stale_selection_is_an_error_naming_file_line_and_op(digits_selection, tmp_path, old, new,
                                                                             message):
    bad = _edit(digits_selection, tmp_path, old, new)
    with pytest.raises(srcore.SelectionError, match=message) as err:
        srcore.StaticModule(srcore.load(DIGITS), options=srcore.Options(selection=bad))
    assert str(bad) in str(err.value)


def test_an_op_selected_from_a_plugin_that_is_not_installed_names_op_and_line(digits_selection, tmp_path):
    text = digits_selection.read_text().replace("  cpu: {dist: srcore-cpu,", "  cpux: {dist: srcore-cpux,")
    text = text.replace("plugin: cpu\n", "plugin: cpux\n").replace("plugin: cpu,", "plugin: cpux,")
    bad = tmp_path / "gone.yaml"
    bad.write_text(text)
    first = next(o for o in read_selection(bad).ops if any(k.plugin == "cpux" for k in o.kernels))
    with pytest.raises(srcore.SelectionError, match=rf"gone.yaml:{first.line}: {first.op}: selected from plugin cpux "
                       r"\(srcore-cpux 0.1.0\), which is not installed"):
        srcore.StaticModule(srcore.load(DIGITS), options=srcore.Options(selection=bad))
    assert _line_of(bad, f"  {first.op}:") == first.line


def test_a_manager_loaded_for_some_plugins_imports_the_others_when_a_selection_names_them(digits_selection):
    """``load(only=...)`` defers the other entry points; a selection naming one of them (digits': cpu) or
    ``reports`` imports them, and the selective registry is the same as a fully loaded manager's."""
    from srcore.plugin.manager import PluginManager

    pm = PluginManager().load(only=())
    assert [r.name for r in pm.loaded_reports()] == ["builtin"]
    reg = pm.registry_for(digits_selection)
    assert "cpu" in {r.name for r in pm.loaded_reports()}
    full = PluginManager().load().registry_for(digits_selection)
    assert sorted(reg.declared) == sorted(full.declared) and sorted(reg.backends) == sorted(full.backends)
    assert {k.impl for k in reg.kernel_table} == {k.impl for k in full.kernel_table}
    lazy = PluginManager().load(only=("cpu",))
    assert [r.name for r in lazy.reports] == [r.name for r in PluginManager().load().reports]


def test_a_selection_keeps_the_decompositions_its_models_used(tmp_path):
    """``aten::__and__.Tensor`` has no cpu kernel: it runs decomposed, with or without the selection (whose
    registry has a decomposition table only because of it: the digits selection has none)."""
    from srcore.ir import Graph, TensorType

    g = Graph()
    a, b = (g.add_input(TensorType("bool", (2, 3)), n) for n in "ab")
    g.register_output(g.insert("aten::__and__", [a, b], [TensorType()]).output)
    full = srcore.StaticModule(g)
    assert [d.op for d in full.load_report.decomposed] == ["aten::__and__.Tensor"]
    write_selection(collect([full]), tmp_path / "and.yaml")
    sm = srcore.StaticModule(g, options=srcore.Options(selection=tmp_path / "and.yaml"))
    assert [d.op for d in sm.load_report.decomposed] == ["aten::__and__.Tensor"]
    x = np.array([[True, False, True], [False, False, True]])
    y = np.array([[True, True, False], [False, True, True]])
    np.testing.assert_array_equal(sm(x, y), x & y)
    np.testing.assert_array_equal(full(x, y), x & y)
    with pytest.raises(srcore.SrcoreError, match="decomposed ops"):
        sm.save(tmp_path / "and.srm", prepared=True)

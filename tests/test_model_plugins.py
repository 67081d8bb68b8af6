"""Models name their plugins: a ``.srm`` records which distributions provide its op namespaces and
backends; a load without them says what to install; a failed plugin is named on every load that
touches its namespace and warned about once per process."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import srcore
from _example_plugin import import_example
from srcore.format.srm import load, read_metadata, save
from srcore.ir import Graph, TensorType
from srcore.plugin import manager as manager_mod
from srcore.plugin.manager import PluginManager
from srcore.plugin.requirements import Dist, RequiredPlugins

#: loads, saves and error messages: independent of the executor and the memory planner
pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[1]
srcore_example = import_example()


class FailingEntryPoint:
    """An installed plugin whose import fails."""

    group = "srcore.plugins"

    def __init__(self, name, dist, version, error):
        self.name, self.error = name, error
        self.dist = type("D", (), {"name": dist, "version": version})()

    def load(self):
        raise self.error


def with_entry_points(monkeypatch, *extra):
    original = manager_mod.importlib_metadata.entry_points
    monkeypatch.setattr(manager_mod.importlib_metadata, "entry_points",
                        lambda *, group: [*original(group=group), *extra])


@pytest.fixture
def example_pm(monkeypatch):
    """The process-wide manager with the example plugin registered (``save`` reads the process registry)."""
    pm = PluginManager().load()
    pm.register(srcore_example, "example", dist="srcore-plugin-example", version="0.1.0")
    monkeypatch.setattr(manager_mod, "_default", pm)
    return pm


def tanh_model():
    g = Graph()
    x = g.add_input(TensorType("float32", (2, 3)), "x")
    t = g.insert("example::scaled_tanh", [x, g.insert_constant(2.0)], [TensorType()]).output
    g.register_output(g.insert("aten::relu", [t], [TensorType()]).output)
    return srcore.Model.from_graph(g)


def test_a_saved_model_records_the_distributions_of_its_namespaces_and_backends(example_pm, tmp_path):
    save(tanh_model(), tmp_path / "m.srm")
    rec = json.loads(read_metadata(tmp_path / "m.srm")["plugins"])
    assert rec["namespaces"]["example"] == [{"dist": "srcore-plugin-example", "version": "0.1.0"}]
    assert rec["namespaces"]["aten"] == [{"dist": "srcore", "version": srcore.__version__}]
    assert rec["backends"]["cpu"] == {"dist": "srcore-cpu", "version": example_pm.report("cpu").version}
    model = load(tmp_path / "m.srm")
    assert model.plugins.for_namespace("example") == (Dist("srcore-plugin-example", "0.1.0"),)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(srcore.StaticModule(model, plugin_manager=example_pm)(x),
                               np.maximum(2 * np.tanh(x), 0), rtol=1e-6)

    save(model, tmp_path / "narrow.srm", backends=("cpu",))  # the backends the model was prepared with
    assert list(json.loads(read_metadata(tmp_path / "narrow.srm")["plugins"])["backends"]) == ["cpu"]


def test_loading_without_the_plugin_says_which_distribution_to_install(example_pm, tmp_path, monkeypatch):
    save(tanh_model(), tmp_path / "m.srm")
    without = PluginManager().load()  # the same installation minus the example plugin
    monkeypatch.setattr(manager_mod, "_default", without)
    model = load(tmp_path / "m.srm")
    with pytest.raises(srcore.UnsupportedOpError, match=r"the model's example:: ops come from "
                       r"srcore-plugin-example 0.1.0, which is not installed: pip install srcore-plugin-example"):
        srcore.StaticModule(model)
    save(model, tmp_path / "again.srm")  # re-saved where the plugin is missing: the record is kept
    assert load(tmp_path / "again.srm").plugins.for_namespace("example") == (Dist("srcore-plugin-example", "0.1.0"),)


def test_a_plugin_that_failed_to_import_is_named_on_every_load_of_its_namespace(example_pm, tmp_path,
                                                                                 monkeypatch):
    save(tanh_model(), tmp_path / "m.srm")
    with_entry_points(monkeypatch, FailingEntryPoint("example", "srcore-plugin-example", "0.1.0",
                                                     ModuleNotFoundError("No module named 'scipy'")))
    monkeypatch.setattr(manager_mod, "_warned", set())
    broken = PluginManager().load()
    with pytest.warns(srcore.SrcoreWarning, match=r"plugin example \(srcore-plugin-example 0.1.0\) failed to "
                      r"import: ModuleNotFoundError: No module named 'scipy'"):
        broken.registry
    with warnings.catch_warnings():
        warnings.simplefilter("error", srcore.SrcoreWarning)
        PluginManager().load().registry  # once per process: a second manager does not warn again
        other = Graph()
        x = other.add_input(TensorType("float32", (3,)), "x")
        other.register_output(other.insert("aten::relu", [x], [TensorType()]).output)
        srcore.StaticModule(other, plugin_manager=broken)  # does not touch example::: no word of it
    model = load(tmp_path / "m.srm")
    for _ in range(2):  # every load that touches the namespace names it
        with pytest.raises(srcore.UnsupportedOpError, match=r"plugin example \(srcore-plugin-example "
                           r"0.1.0\) failed to import: ModuleNotFoundError: No module named 'scipy'"):
            srcore.StaticModule(model, plugin_manager=broken)


def test_a_load_that_succeeds_despite_a_failed_plugin_of_its_namespace_warns_and_reports_it(monkeypatch):
    with_entry_points(monkeypatch, FailingEntryPoint("qextra", "srcore-qextra", "2.0", ImportError("bad build")))
    pm = PluginManager().load()
    g = Graph()
    x = g.add_input(TensorType("float32", (3,)), "x")
    g.register_output(g.insert("aten::relu", [x], [TensorType()]).output)
    model = srcore.Model.from_graph(g)
    model.plugins = RequiredPlugins({"aten": (Dist("srcore", "0.1.0"), Dist("srcore-qextra", "2.0"))})
    with pytest.warns(srcore.SrcoreWarning, match=r"plugin qextra \(srcore-qextra 2.0\) failed to import: "
                      r"ImportError: bad build"):
        sm = srcore.StaticModule(model, plugin_manager=pm)
    assert sm.load_report.failed_plugins == ["plugin qextra (srcore-qextra 2.0) failed to import: ImportError: "
                                             "bad build"]
    np.testing.assert_array_equal(sm(np.array([-1.0, 0.0, 2.0], np.float32)), [0.0, 0.0, 2.0])


def test_an_unknown_backend_the_model_was_prepared_with_names_its_distribution():
    g = Graph()
    x = g.add_input(TensorType("float32", (3,)), "x")
    g.register_output(g.insert("aten::relu", [x], [TensorType()]).output)
    model = srcore.Model.from_graph(g)
    model.plugins = RequiredPlugins(backends={"npu": Dist("srcore-npu", "2.0")})
    with pytest.raises(srcore.UnknownBackendError, match=r"unknown backend 'npu' \(the model was prepared with it "
                       r"from srcore-npu 2.0: pip install srcore-npu\)"):
        srcore.StaticModule(model, backends=("npu", "cpu"))


@pytest.mark.parametrize("bad", ['[1, 2]', '{"namespaces": {"aten": "srcore"}}',
                                 '{"namespaces": {}, "backends": {"cpu": {"dist": 3}}}', '{"extra": {}}', 'not json'])
def test_malformed_plugins_metadata_is_a_format_error(example_pm, tmp_path, monkeypatch, bad):
    monkeypatch.setattr(RequiredPlugins, "to_json", lambda self: bad)
    save(tanh_model(), tmp_path / "m.srm")
    with pytest.raises(srcore.SrcoreFormatError, match="bad plugins metadata"):
        load(tmp_path / "m.srm")


def test_files_written_before_plugins_were_recorded_still_load():
    model = load(ROOT / "examples" / "digits" / "digits.srm")
    assert "plugins" not in read_metadata(ROOT / "examples" / "digits" / "digits.srm")
    assert model.plugins is None
    srcore.StaticModule(model)


def test_required_plugins_round_trip_through_json():
    rec = RequiredPlugins({"aten": (Dist("srcore", "0.1.0"), Dist("srcore-quantized", None))},
                          {"cpu": Dist("srcore-cpu", "0.1.0")})
    assert RequiredPlugins.from_json(rec.to_json()) == rec

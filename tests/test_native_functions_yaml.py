"""RFC-0020's YAML: plugins declare ops and bind kernels in native_functions.yaml form.

Each test writes a plugin package (``ops.yaml`` + kernels in ``__init__``) to a temporary
directory and registers it in a fresh plugin manager; results are checked against numpy.
"""
from __future__ import annotations

import importlib
import sys
import textwrap
import types
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore.ir import Graph, TensorType
from srcore.ops.declarations import DispatchEntry, parse_declarations
from srcore.plugin import OpLibrary, ShapeRule, hookimpl
from srcore.plugin.manager import PluginManager

#: loads and declarations: independent of the executor and the memory planner
pytestmark = pytest.mark.one_pass

#: the RFC's own example, verbatim (seeds/rfc-0020-lightweight-dispatch.txt, "Let's take acosh as an example")
RFC_ACOSH = """\
- func: acosh(Tensor self) -> Tensor
  variants: function, method
  structured_delegate: acosh.out

- func: acosh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  structured_inherits: TensorIteratorBase
  dispatch:
    CPU, CUDA: acosh_out
"""

KERNELS = """\
import numpy as np


def acosh_out(self, *, out=None):
    return np.arccosh(self, out=out)


def twice(self):
    return self * 2
"""

_counter = [0]


def yaml_plugin(tmp_path, monkeypatch, yaml_text, namespace="rfc", kernels=KERNELS, rule_ops=("acosh",)):
    """A package ``srcore_yaml_N`` holding ``ops.yaml`` and kernels; returns (plugin module, package name)."""
    _counter[0] += 1
    pkg = f"srcore_yaml_{_counter[0]}"
    d = tmp_path / pkg
    d.mkdir()
    (d / "__init__.py").write_text(kernels)
    (d / "ops.yaml").write_text(yaml_text)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    plugin = types.ModuleType(f"{pkg}_plugin")
    plugin.srcore_op_libraries = hookimpl(lambda: iter([OpLibrary.from_resource(namespace, pkg, "ops.yaml")]),
                                          specname="srcore_op_libraries")
    if namespace != "aten":
        same = lambda ctx: [ctx.tensor(0, "self")]  # noqa: E731
        ops = tuple(f"{namespace}::{op}" for op in rule_ops)
        plugin.srcore_shape_rules = hookimpl(lambda: iter([ShapeRule(ops, same)]), specname="srcore_shape_rules")
    return plugin, pkg


def manager(plugin, name="yamlplug"):
    pm = PluginManager().load()
    pm.register(plugin, name, dist=f"srcore-{name}", version="1.0")
    pm.registry
    return pm


def run_op(pm, op, x, inputs=None):
    g = Graph()
    v = g.add_input(TensorType(str(x.dtype), x.shape), "x")
    g.register_output(g.insert(op, [v], [TensorType()]).output)
    with warnings.catch_warnings():
        warnings.simplefilter("error", srcore.SrcoreWarning)
        sm = srcore.StaticModule(g, plugin_manager=pm, options=srcore.Options(optimize=False))
    return sm, sm(x)


X = np.array([1.0, 1.5, 3.0, 10.0], np.float32)


def test_the_rfc_example_entries_load_and_bind_their_kernels(tmp_path, monkeypatch):
    plugin, pkg = yaml_plugin(tmp_path, monkeypatch, RFC_ACOSH)
    pm = manager(plugin)
    rep = pm.report("yamlplug")
    assert rep.status == "loaded" and not rep.errors, rep
    assert str(pm.registry.declared["rfc::acosh"][0]) == "rfc::acosh(Tensor self) -> Tensor"
    ks = {(k.op, k.backend, k.kind): k for k in pm.kernel_table}
    out = ks[("rfc::acosh.out", "cpu", "out")]
    assert out.impl == f"{pkg}:acosh_out" and out.dtypes == ("*",) and out.provider.dist == "srcore-yamlplug"
    assert out.source.endswith("ops.yaml:9")                 # the dispatch line
    assert ks[("rfc::acosh", "cpu", "out")].impl == f"{pkg}:acosh_out"   # via structured_delegate
    assert not any(k.backend == "CUDA" for k in pm.kernel_table)       # no CUDA here: skipped
    sm, y = run_op(pm, "rfc::acosh", X)
    np.testing.assert_allclose(y, np.arccosh(X), rtol=1e-6)
    (row,) = [pn for b in sm.blocks for pn in b.nodes if pn.fn is not None]
    assert row.fn.kind == "out"


def test_the_rfc_text_declares_aten_ops_in_an_aten_library(tmp_path, monkeypatch):
    plugin, _ = yaml_plugin(tmp_path, monkeypatch, RFC_ACOSH, namespace="aten")
    pm = manager(plugin)
    assert {"aten::acosh", "aten::acosh.out"} <= set(pm.registry.declared)
    _, y = run_op(pm, "aten::acosh", X)  # the core's rule for aten::acosh types it
    np.testing.assert_allclose(y, np.arccosh(X), rtol=1e-6)


def test_an_in_place_overload_runs_through_its_delegate_out_kernel(tmp_path, monkeypatch):
    text = RFC_ACOSH + textwrap.dedent("""
        - func: acosh_(Tensor(a!) self) -> Tensor(a!)
          variants: function, method
          structured_delegate: acosh.out
    """)
    plugin, _ = yaml_plugin(tmp_path, monkeypatch, text, rule_ops=("acosh", "acosh_"))
    pm = manager(plugin)
    assert not pm.report("yamlplug").errors
    (k,) = [k for k in pm.kernel_table if k.op == "rfc::acosh_"]
    assert k.kind == "native"
    x = X.copy()
    rk = srcore.dispatch.resolve_node(_node("rfc::acosh_", x), pm.kernel_table, ["cpu"])
    assert rk.fn(x) is x
    np.testing.assert_allclose(x, np.arccosh(X), rtol=1e-6)


def _node(op, x):
    g = Graph()
    v = g.add_input(TensorType(str(x.dtype), x.shape), "x")
    return g.insert(op, [v], [TensorType(str(x.dtype), x.shape)])


def test_dispatch_entries_may_list_dtypes_and_a_kernel_is_never_used_for_others(tmp_path, monkeypatch):
    text = textwrap.dedent("""\
        - func: twice(Tensor self) -> Tensor
          python_module: nn
          tags: [pointwise]
          dispatch:
            cpu: {kernel: twice, dtypes: [float64]}
    """)
    plugin, _ = yaml_plugin(tmp_path, monkeypatch, text)
    same = lambda ctx: [ctx.tensor(0, "self")]  # noqa: E731
    plugin.srcore_shape_rules = hookimpl(lambda: iter([ShapeRule(("rfc::twice",), same)]),
                                         specname="srcore_shape_rules")
    pm = manager(plugin)
    (k,) = [k for k in pm.kernel_table if k.op == "rfc::twice"]
    assert (k.kind, k.dtypes) == ("native", ("float64",))
    np.testing.assert_array_equal(run_op(pm, "rfc::twice", X.astype(np.float64))[1], X * 2)
    with pytest.raises(srcore.UnsupportedOpError, match=r"has a native kernel for dtypes \(float64\) on cpu"):
        run_op(pm, "rfc::twice", X)


# -- bad input: errors name the plugin, the op and the line; other plugins keep working -----------------------
@pytest.mark.parametrize("text, message", [
    ("- func: f(Tensor self) -> Tensor\n  dispach:\n    CPU: f\n", r"ops.yaml:2: unknown key 'dispach'"),
    ("- func: f(Tensor self) -> Tensor\n  structured_delegate: f.out\n",
     r"ops.yaml:1: structured_delegate 'f.out' of f is not declared in this file"),
    ("- func: f(Tensor self) -> Tensor\n  structured: maybe\n", r"ops.yaml:2: 'structured' must be True or False"),
    ("- func: f(Tensor self) -> Tensor\n  dispatch:\n    CPU: {kernel: f, dtype: [float32]}\n",
     r"ops.yaml:3: unknown key 'dtype' in a dispatch entry"),
    ("- func: f(Tensor self) -> Tensor\n  dispatch:\n    CPU: 'not a ref!'\n", r"ops.yaml:3:\d+: bad kernel reference"),
    ("- func: f(Tensor self) -> Tensor\n  structured: True\n", r"ops.yaml:2: structured: True on f, which is not "
                                                               r"an out overload"),
])
def test_a_malformed_entry_fails_its_plugin_naming_file_and_line(tmp_path, monkeypatch, text, message):
    good, _ = yaml_plugin(tmp_path, monkeypatch, RFC_ACOSH)
    bad, _ = yaml_plugin(tmp_path, monkeypatch, text, namespace="bad")
    pm = PluginManager().load()
    pm.register(good, "good", dist="srcore-good", version="1")
    pm.register(bad, "bad", dist="srcore-bad", version="2")
    pm.registry
    rep = pm.report("bad")
    assert rep.status == "failed" and rep.error.startswith("srcore_op_libraries: DeclarationError")
    assert __import__("re").search(message, rep.error), rep.error
    assert pm.report("good").status == "loaded"
    np.testing.assert_allclose(run_op(pm, "rfc::acosh", X)[1], np.arccosh(X), rtol=1e-6)


def test_a_dispatch_line_to_a_missing_module_is_rejected_naming_plugin_op_and_line(tmp_path, monkeypatch):
    text = RFC_ACOSH.replace("CPU, CUDA: acosh_out", "CPU: acosh_out\n    trt_like: srcore_no_such_module:acosh")
    plugin, _ = yaml_plugin(tmp_path, monkeypatch, text)
    pm = manager(plugin)
    rep = pm.report("yamlplug")
    assert rep.status == "loaded"
    assert any("ops.yaml:10: dispatch of rfc::acosh.out points at 'srcore_no_such_module:acosh', but module "
               "'srcore_no_such_module' does not exist" in e and "plugin yamlplug (srcore-yamlplug 1.0)" in e
               for e in rep.errors), rep.errors
    np.testing.assert_allclose(run_op(pm, "rfc::acosh", X)[1], np.arccosh(X), rtol=1e-6)  # the cpu line works


def test_a_dispatch_line_to_a_missing_attribute_fails_the_load_naming_the_line(tmp_path, monkeypatch):
    plugin, pkg = yaml_plugin(tmp_path, monkeypatch, RFC_ACOSH.replace("acosh_out", "acosh_outt"))
    pm = manager(plugin)
    with pytest.raises(srcore.PluginError, match=rf"plugin yamlplug \(srcore-yamlplug 1.0\): cannot import impl "
                       rf"'{pkg}:acosh_outt' of the kernel for rfc::acosh \(declared at .*ops.yaml:9\): AttributeError"):
        run_op(pm, "rfc::acosh", X)


def test_an_unknown_backend_name_is_rejected_on_its_own_with_its_line(tmp_path, monkeypatch):
    plugin, _ = yaml_plugin(tmp_path, monkeypatch, RFC_ACOSH.replace("CPU, CUDA", "CPU, cpuu"))
    pm = manager(plugin)
    errors = pm.report("yamlplug").errors
    assert any("ops.yaml:9: kernel for rfc::acosh.out names unknown backend 'cpuu'" in e for e in errors), errors


# -- the parser, property-based --------------------------------------------------------------------------------
NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(st.tuples(st.lists(st.sampled_from(["CPU", "CUDA", "QuantizedCPU", "cpu", "trt_like"]),
                                         min_size=1, max_size=3, unique=True),
                                NAME, st.one_of(st.none(), st.lists(st.sampled_from(["float32", "float64", "int64"]),
                                                                    min_size=1, max_size=3, unique=True))),
                      min_size=1, max_size=4))
def test_dispatch_entries_parse_back_to_what_was_written(lines):
    body = []
    for backends, kernel, dtypes in lines:
        value = kernel if dtypes is None else f"{{kernel: {kernel}, dtypes: [{', '.join(dtypes)}]}}"
        body.append(f"    {', '.join(backends)}: {value}")
    keys = [", ".join(b) for b, _, _ in lines]
    if len(set(keys)) != len(keys):
        return  # a YAML mapping with a repeated key: not what a file would say
    text = "- func: f.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  structured: True\n  dispatch:\n" + \
        "\n".join(body) + "\n"
    (decl,) = parse_declarations(text, "p.yaml")
    assert decl.structured and decl.schema.is_out
    assert decl.dispatch == tuple(DispatchEntry(tuple(b), k, tuple(d) if d else ("*",), f"p.yaml:{4 + i}")
                                  for i, (b, k, d) in enumerate(lines))


def test_dispatch_fields_survive_the_schema_cache(tmp_path, monkeypatch):
    from srcore.ops import cache

    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "ops.yaml"
    f.write_text(RFC_ACOSH)
    cache.clear_memory_cache()
    first = cache.load_schemas([f])
    cache.clear_memory_cache()
    again = cache.load_schemas([f])  # decoded from the file just written
    assert again == first == parse_declarations(RFC_ACOSH, str(f))
    assert again[1].dispatch[0].backends == ("CPU", "CUDA") and again[0].structured_delegate == "acosh.out"


def teardown_module():
    for name in [m for m in sys.modules if m.startswith("srcore_yaml_")]:
        del sys.modules[name]

"""The plugin manager: discovery, isolation of failing plugins, blocking, attribution, every hook.

Entry points are faked by monkeypatching ``importlib_metadata.entry_points``
(as pluggy's own tests fake distributions); each test gets a fresh manager.
"""
from __future__ import annotations

import inspect
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import srcore
from srcore.dispatch import resolve_node
from srcore.ir import Graph, TensorType
from srcore.plugin import (Backend, Decomposition, DType, EngineBuilder, Kernel, OpLibrary, PluginInfo, ShapeRule,
                           Subcommand, hookimpl)
from srcore.plugin import manager as manager_mod
from srcore.plugin.hookspecs import HOOK_RECORDS, SrcoreSpecs
from srcore.plugin.manager import PluginManager, get_plugin_manager

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[1]


class FakeDist:
    def __init__(self, name, version):
        self.name, self.version = name, version


class FakeEntryPoint:
    """What the manager uses of an ``importlib_metadata.EntryPoint``."""

    group = "srcore.plugins"

    def __init__(self, name, target, dist="srcore-fake", version="1.0"):
        self.name, self._target = name, target
        self.dist = FakeDist(dist, version)
        self.loaded = False

    def load(self):
        self.loaded = True
        if isinstance(self._target, BaseException):
            raise self._target
        return self._target


def plugin(name, **hooks):
    """A plugin module whose hooks return the given record lists (or raise, if given an exception)."""
    mod = types.ModuleType(name)
    for hook, value in hooks.items():
        def impl(value=value):
            if isinstance(value, BaseException):
                raise value
            yield from value
        impl.__name__ = hook
        setattr(mod, hook, hookimpl(impl, specname=hook))
    return mod


def fake_entry_points(monkeypatch, eps):
    calls = []

    def entry_points(*, group):
        calls.append(group)
        return [ep for ep in eps if ep.group == group]
    monkeypatch.setattr(manager_mod.importlib_metadata, "entry_points", entry_points)
    return calls


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("SRCORE_DISABLE_PLUGINS", raising=False)
    monkeypatch.delenv("SRCORE_STRICT_PLUGINS", raising=False)


TB = Backend("tb", "a test backend")
LIB = OpLibrary("t", schemas=("t::f(Tensor self) -> Tensor", "t::g.Tensor(Tensor self, Tensor other) -> Tensor"))


def good_kernel(op="t::f", **kw):
    kw.setdefault("impl", np.negative)
    return Kernel(op, kw.pop("backend", "tb"), kw.pop("kind", "out"), kw.pop("dtypes", ("float32",)), **kw)


# -- isolation ------------------------------------------------------------------------------------
def test_every_kind_of_failure_is_reported_and_the_others_still_load(monkeypatch):
    eps = [
        FakeEntryPoint("good", plugin("good", srcore_op_libraries=[LIB], srcore_backends=[TB],
                                      srcore_kernels=[good_kernel()]), "srcore-good", "2.1"),
        FakeEntryPoint("import_error", ImportError("No module named 'missing_dep'"), "srcore-broken", "0.3"),
        FakeEntryPoint("bad_schema", plugin("bad_schema", srcore_op_libraries=[
            OpLibrary("bs", schemas=("bs::ok(Tensor x) -> Tensor", "bs::bad(Tensor x -> Tensor"))]), "srcore-bs", "1.1"),
        FakeEntryPoint("raises", plugin("raises", srcore_kernels=RuntimeError("boom in hook")), "srcore-raises"),
        FakeEntryPoint("undeclared", plugin("undeclared", srcore_kernels=[good_kernel("t::nope")]), "srcore-u"),
        FakeEntryPoint("unknown_backend", plugin("unknown_backend", srcore_kernels=[good_kernel(backend="gpu")])),
        FakeEntryPoint("unknown_dtype", plugin("unknown_dtype", srcore_kernels=[good_kernel(dtypes=("qfoo",))])),
        FakeEntryPoint("wrong_record", plugin("wrong_record", srcore_backends=["not a Backend"])),
        FakeEntryPoint("outside_ns", plugin("outside_ns", srcore_op_libraries=[
            OpLibrary("mine", schemas=("aten::hijack(Tensor self) -> Tensor",))])),
    ]
    fake_entry_points(monkeypatch, eps)
    pm = PluginManager().load()
    reg = pm.registry
    rep = {r.name: r for r in pm.reports}
    assert rep["good"].status == "loaded" and not rep["good"].errors
    assert [k.op for k in reg.kernel_table.lookup("t::f", "tb", "out")] == ["t::f"]
    assert reg.kernel_table.lookup("t::f", "tb", "out")[0].provider == PluginInfo("good", "srcore-good", "2.1")

    assert rep["import_error"].status == "failed"
    assert (rep["import_error"].dist, rep["import_error"].version) == ("srcore-broken", "0.3")
    assert "import: ImportError: No module named 'missing_dep'" == rep["import_error"].error

    assert rep["bad_schema"].status == "failed" and rep["bad_schema"].error.startswith("srcore_op_libraries: ")
    assert "bs::ok" not in reg.declared  # a failed plugin contributes nothing

    assert rep["raises"].status == "failed" and rep["raises"].error == "srcore_kernels: RuntimeError: boom in hook"
    assert rep["wrong_record"].status == "failed"
    assert "expected Backend records" in rep["wrong_record"].error
    assert rep["outside_ns"].status == "failed" and "outside its namespace" in rep["outside_ns"].error

    for name, reason in [("undeclared", "undeclared op 't::nope'"), ("unknown_backend", "unknown backend 'gpu'"),
                         ("unknown_dtype", "unknown dtype(s) qfoo")]:
        r = rep[name]
        assert r.status == "loaded" and len(r.errors) == 1, (name, r)
        assert f"plugin {name} (" in r.errors[0] and reason in r.errors[0]
    assert "srcore-u 1.0" in rep["undeclared"].errors[0]


def test_entry_points_load_sorted_by_name_whatever_the_environment_order(monkeypatch):
    order = []
    eps = []
    for name in ["zeta", "alpha", "mid"]:
        mod = plugin(name, srcore_backends=[Backend(f"b_{name}")])
        eps.append(FakeEntryPoint(name, mod))
    real_register = PluginManager.register

    def spy(self, obj, name=None, **kw):
        order.append(name)
        return real_register(self, obj, name, **kw)
    monkeypatch.setattr(PluginManager, "register", spy)
    fake_entry_points(monkeypatch, eps)
    pm = PluginManager().load()
    assert order == ["builtin", "alpha", "mid", "zeta"]
    assert [r.name for r in pm.reports] == ["builtin", "alpha", "mid", "zeta"]


def test_disable_plugins_env_and_block(monkeypatch):
    a = FakeEntryPoint("a", plugin("a", srcore_backends=[Backend("ba")]))
    b = FakeEntryPoint("b", plugin("b", srcore_backends=[Backend("bb")]))
    c = FakeEntryPoint("c", plugin("c", srcore_backends=[Backend("bc")]))
    fake_entry_points(monkeypatch, [a, b, c])
    monkeypatch.setenv("SRCORE_DISABLE_PLUGINS", " a , builtin")  # builtin is essential: ignored
    pm = PluginManager()
    pm.block("c")
    pm.load()
    assert not a.loaded and not c.loaded and b.loaded  # a disabled plugin is not even imported
    assert {r.name: r.status for r in pm.reports} == {"builtin": "loaded", "a": "disabled", "b": "loaded",
                                                      "c": "disabled"}
    assert set(pm.registry.backends) == {"bb"}
    with pytest.raises(srcore.PluginError, match="builtin cannot be disabled"):
        pm.block("builtin")
    pm.block("b")  # blocking after load removes its records
    assert set(pm.registry.backends) == set()


def test_strict_mode_reraises_as_plugin_error(monkeypatch):
    fake_entry_points(monkeypatch, [FakeEntryPoint("broken", ImportError("nope"), "srcore-broken", "0.3")])
    monkeypatch.setenv("SRCORE_STRICT_PLUGINS", "1")
    with pytest.raises(srcore.PluginError, match=r"plugin broken \(srcore-broken 0.3\) failed in import: nope"):
        PluginManager().load()


def test_strict_mode_reraises_registration_errors():
    pm = PluginManager(strict=True).load(entry_points=False)
    pm.register(plugin("p", srcore_kernels=[good_kernel("t::nope")]), "p")
    with pytest.raises(srcore.RegistrationError, match="undeclared op 't::nope'"):
        pm.registry


def test_a_hookimpl_for_an_unknown_hook_or_with_arguments_fails_its_plugin():
    pm = PluginManager().load(entry_points=False)
    typo = types.SimpleNamespace(srcore_kernel=hookimpl(lambda: iter(())))
    assert pm.register(typo, "typo").status == "failed"
    assert "unknown hook(s) srcore_kernel" in pm.report("typo").error

    class WithArgs:
        @hookimpl
        def srcore_kernels(self, backend):
            yield from ()
    rep = pm.register(WithArgs(), "withargs")
    assert rep.status == "failed" and "backend" in rep.error


def test_conflicting_names_are_rejected_for_the_later_plugin_naming_the_first():
    pm = PluginManager().load(entry_points=False)
    pm.register(plugin("a", srcore_backends=[TB]), "a", dist="srcore-a", version="1")
    pm.register(plugin("b", srcore_backends=[TB], srcore_dtypes=[DType("float32", "float")]), "b")
    reg = pm.registry
    assert reg.backends["tb"].provider.name == "a"
    errs = pm.report("b").errors
    assert any("Backend 'tb' is already provided by a (srcore-a 1)" in e for e in errs)
    assert any("DType 'float32' is a standard dtype" in e for e in errs)


def test_a_redeclaration_must_be_identical():
    pm = PluginManager().load(entry_points=False)
    pm.register(plugin("a", srcore_op_libraries=[LIB]), "a")
    pm.register(plugin("b", srcore_op_libraries=[OpLibrary("t", schemas=("t::f(Tensor self) -> Tensor",))]), "b")
    pm.register(plugin("c", srcore_op_libraries=[OpLibrary("t", schemas=("t::f(Tensor self, int k) -> Tensor",))]),
                "c")
    pm.registry
    assert pm.report("b").status == "loaded"
    assert pm.report("c").status == "failed" and "t::f is already declared" in pm.report("c").error


def test_lazy_impl_is_imported_only_when_used_and_its_failure_names_plugin_version_op(monkeypatch):
    mod = types.ModuleType("srcore_test_lazy_kernels")
    mod.neg_out = lambda self, *, out=None: np.negative(self, out=out)
    monkeypatch.setitem(sys.modules, "srcore_test_lazy_kernels", mod)
    pm = PluginManager().load(entry_points=False)
    pm.register(plugin("lazy", srcore_op_libraries=[LIB], srcore_backends=[TB], srcore_kernels=[
        good_kernel("t::f", impl="srcore_test_lazy_kernels:neg_out"),
        good_kernel("t::g.Tensor", impl="srcore_test_missing_module:add_out")]), "lazy", dist="srcore-lazy",
        version="0.9")
    table = pm.kernel_table  # building the table imports nothing
    g = Graph()
    x = g.add_input(TensorType("float32", (3,)), "x")
    f = g.insert("t::f", [x], [TensorType("float32", (3,))])
    rk = resolve_node(f, table, ["tb"])
    np.testing.assert_array_equal(rk.fn(np.array([1.0, -2.0, 0.5], np.float32)), [-1.0, 2.0, -0.5])
    gnode = g.insert("t::g", [x, x], [TensorType("float32", (3,))])
    gnode.schema = srcore.FunctionSchema.parse("t::g.Tensor(Tensor self, Tensor other) -> Tensor")
    with pytest.raises(srcore.PluginError, match=r"plugin lazy \(srcore-lazy 0.9\): cannot import impl "
                       r"'srcore_test_missing_module:add_out' of the kernel for t::g.Tensor: ModuleNotFoundError"):
        resolve_node(gnode, table, ["tb"])


def test_get_plugin_manager_is_cached_and_loaded():
    pm = get_plugin_manager()
    assert pm is get_plugin_manager()
    assert pm.report("builtin").status == "loaded"
    assert PluginManager() is not pm


# -- one test per hook (a meta-test below checks each exists) ------------------------------------------
def _with(**hooks):
    pm = PluginManager().load(entry_points=False)
    pm.register(plugin("p", **hooks), "p", dist="srcore-p", version="3.0")
    return pm


def test_hook_srcore_op_libraries(tmp_path, monkeypatch):
    pkg = tmp_path / "srcore_test_oplib"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.yaml").write_text("- func: yl::twice(Tensor self, *, int k=2) -> Tensor\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = _with(srcore_op_libraries=[LIB, OpLibrary.from_resource("yl", "srcore_test_oplib", "ops.yaml")])
    declared = pm.registry.declared
    assert str(declared["yl::twice"][0]) == "yl::twice(Tensor self, *, int k=2) -> Tensor"
    assert str(declared["t::g.Tensor"][0]) == "t::g.Tensor(Tensor self, Tensor other) -> Tensor"
    assert declared["t::f"][1] == PluginInfo("p", "srcore-p", "3.0")
    mine = [lib for lib in pm.registry.op_libraries if lib.provider.name == "p"]
    assert [lib.namespace for lib in mine] == ["t", "yl"]


def test_hook_srcore_dtypes():
    pm = _with(srcore_dtypes=[DType("qfoo", storage="uint8", params={"qmax": 255})], srcore_op_libraries=[LIB],
               srcore_backends=[TB], srcore_kernels=[good_kernel(dtypes=("qfoo", "float32"))])
    d = pm.registry.dtypes["qfoo"]
    assert (d.kind, d.storage, dict(d.params), d.provider.name) == ("quantized", "uint8", {"qmax": 255}, "p")
    assert not pm.report("p").errors  # the kernel may now list qfoo


def test_hook_srcore_backends():
    pm = _with(srcore_backends=[TB, Backend("tb2")])
    assert sorted(pm.registry.backends) == ["tb", "tb2"]
    assert pm.registry.backends["tb"].description == "a test backend"


def test_hook_srcore_kernels():
    pm = _with(srcore_op_libraries=[LIB], srcore_backends=[TB], srcore_kernels=[
        good_kernel(), good_kernel(kind="native", dtypes=("*",), impl=np.abs)])
    t = pm.kernel_table
    assert [k.kind for k in t.kernels_for("t::f")] == ["out", "native"]
    assert all(k.provider == PluginInfo("p", "srcore-p", "3.0") for k in t)


def test_hook_srcore_shape_rules():
    def same(ctx):
        return [ctx.tensor(0, "self")]

    pm = _with(srcore_op_libraries=[LIB], srcore_shape_rules=[ShapeRule(("t::f", "t::g"), same)])
    rules = pm.registry.shape_rules
    assert rules.lookup("t::f").provider == PluginInfo("p", "srcore-p", "3.0")
    assert rules.lookup("t::g.Tensor").fn is same          # a base name serves every overload
    assert rules.lookup("aten::add.Tensor").provider.name == "builtin"  # the core's rules, same hook
    assert not pm.report("p").errors


def test_hook_srcore_decompositions():
    twice = "graph(%self : Tensor):\n  %r : Tensor = aten::add(%self, %self)\n  return (%r)\n"
    pm = _with(srcore_op_libraries=[LIB], srcore_decompositions=[Decomposition("t::f", twice),
                                                                  Decomposition("t::nope", twice)])
    table = pm.registry.decompositions
    assert table.lookup("t::f").provider == PluginInfo("p", "srcore-p", "3.0")
    assert table.lookup("aten::add.out").provider.name == "builtin"  # the core's, through the same hook
    assert ["decomposition of undeclared op 't::nope'" in e for e in pm.report("p").errors] == [True]


def test_hook_srcore_engine_builders():
    eb = EngineBuilder("tb", supports="m:supports", build="m:build")
    pm = _with(srcore_backends=[TB], srcore_engine_builders=[eb, EngineBuilder("nope", "m:s", "m:b")])
    assert pm.registry.engine_builders["tb"].provider.name == "p"
    assert "engine builder for unknown backend 'nope'" in pm.report("p").errors[0]


def test_hook_srcore_subcommands():
    sub = Subcommand("hello", "say hello", configure_parser=lambda p: None, run=lambda a: 0)
    pm = _with(srcore_subcommands=[sub])
    assert pm.registry.subcommands["hello"].provider.dist == "srcore-p"


# -- meta tests: every hook is documented (name and signature) and tested ----------------------------
HOOKS = sorted(n for n, _ in inspect.getmembers(SrcoreSpecs, inspect.isfunction) if n.startswith("srcore_"))


def test_hook_records_cover_every_hookspec():
    assert HOOKS == sorted(HOOK_RECORDS)


@pytest.mark.parametrize("hook", HOOKS)
def test_plugin_hooks_are_documented(hook):
    docs = (ROOT / "docs" / "plugin-hooks.md").read_text()
    sig = inspect.signature(getattr(SrcoreSpecs, hook))
    params = ", ".join(p for p in sig.parameters if p != "self")
    assert re.search(rf"^## `{hook}\({params}\)`", docs, re.M), f"docs/plugin-hooks.md lacks ## `{hook}({params})`"


@pytest.mark.parametrize("hook", HOOKS)
def test_plugin_hooks_have_tests(hook):
    assert f"test_hook_{hook}" in globals()


def test_two_distributions_with_one_entry_point_name_keep_the_first(monkeypatch):
    one = FakeEntryPoint("dup", plugin("dup1", srcore_backends=[Backend("b1")]), "srcore-aaa", "1")
    two = FakeEntryPoint("dup", plugin("dup2", srcore_backends=[Backend("b2")]), "srcore-bbb", "2")
    evil = FakeEntryPoint("builtin", plugin("evil"), "srcore-evil", "6")
    fake_entry_points(monkeypatch, [two, evil, one])
    pm = PluginManager().load()
    assert one.loaded and not two.loaded and not evil.loaded
    assert set(pm.registry.backends) == {"b1"}
    assert pm.report("dup").errors == ["plugin dup (srcore-aaa 1): entry point 'dup' of srcore-bbb 2 ignored: "
                                       "the name is taken"]
    with pytest.raises(srcore.PluginError, match="already registered"):
        pm.register(plugin("again"), "dup")


def test_rebuilding_the_registry_does_not_repeat_errors():
    pm = PluginManager().load(entry_points=False)
    pm.register(plugin("p", srcore_kernels=[good_kernel("t::nope")]), "p")
    assert len(pm.registry and pm.report("p").errors) == 1
    pm.register(plugin("q", srcore_backends=[TB]), "q")  # invalidates the registry
    pm.registry
    assert len(pm.report("p").errors) == 1


def test_the_registry_is_built_once_even_from_several_threads():
    import threading

    calls = []

    class Counting:
        @hookimpl
        def srcore_backends(self):
            calls.append(1)
            yield TB
    pm = PluginManager().load(entry_points=False)
    pm.register(Counting(), "counting")
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(pm.registry)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and all(r is seen[0] for r in seen)


# -- the plugin API is the only door ------------------------------------------------------------------------
def test_plugins_import_only_srcore_plugin():
    """A plugin package (the three shipped ones, the example) imports srcore only through ``srcore.plugin``
    (and the ``srcore`` facade): never ``srcore.ir``, ``srcore.memory``, ``srcore.ops``, ``srcore.cachedir``..."""
    import ast

    offenders = []
    packages = [p for p in (ROOT / "plugins").glob("*/srcore_*") if p.is_dir()]
    packages.append(ROOT / "examples" / "plugin-example" / "srcore_example")
    assert len(packages) >= 4
    for pkg in packages:
        for f in pkg.rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
                for name in names:
                    if name.startswith("srcore.") and name != "srcore.plugin":
                        offenders.append(f"{f.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not offenders, "\n".join(offenders)


#: (importing module, private module) pairs allowed across packages, with the reason
PRIVATE_IMPORTS_ALLOWED = {
    # the CLI's converter is the frontends' own command line: same torch import and the same error
    ("srcore/cli/convert.py", "srcore.frontends._torch_common"),
}


def test_no_package_imports_another_packages_private_modules():
    """``srcore.passes._util`` is the passes' own (constants live in ``srcore.ir.constants``, op names in
    ``srcore.ir.names``, alias facts in ``srcore.ir.alias``); no package of srcore reaches into another's
    private modules (``srcore.X._name``)."""
    import ast

    # only files that may import a private module need parsing: a dotted name with a private part,
    # a private name in an import list, or a parenthesized import list
    maybe = re.compile(r"^\s*(from|import)\s+([\w.]*\._|.*\bimport\s.*(\b_|\())", re.MULTILINE)
    offenders = []
    for f in sorted((ROOT / "srcore").rglob("*.py")):
        text = f.read_text()
        if not maybe.search(text):
            continue
        rel = f.relative_to(ROOT)
        package = list(rel.with_suffix("").parts[:-1])
        own = package[1] if len(package) > 1 else None
        for node in ast.walk(ast.parse(text, str(f))):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                mods = [mod] + [f"{mod}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            else:
                continue
            for m in mods:
                parts = m.split(".")
                if len(parts) >= 3 and parts[0] == "srcore" and parts[1] != own and parts[2].startswith("_") \
                        and not parts[2].startswith("__") \
                        and (str(rel), ".".join(parts[:3])) not in PRIVATE_IMPORTS_ALLOWED:
                    offenders.append(f"{rel}:{node.lineno}: {m}")
    assert not offenders, "\n".join(offenders)


def test_stamping_a_record_equals_evolving_it_with_the_provider():
    """``provided_by`` copies the record's slots without running validators again: the copy must be what
    ``attrs.evolve(record, provider=...)`` gives, field by field (eq=False fields included), for every
    record type, and leave the original unstamped."""
    import attrs

    info = PluginInfo("p", "srcore-p", "1.2")
    records = [
        Kernel("aten::relu", "cpu", "native", ("float32", "int64"), "m.k:relu", matcher="m.k:match", priority=3,
               source="ops.yaml:7"),
        Kernel("aten::*", "cpu", "fallback", "*", lambda *a: None),
        ShapeRule(("p::f", "p::g.out"), "m.r:rule"),
        OpLibrary("p", schemas=("p::f(Tensor self) -> Tensor",)),
        DType("qp8", "quantized", "uint8", {"scale": 1.0}),
        Backend("pback", "a backend"),
        EngineBuilder("pback", "m.e:supports", "m.e:build", ops="m.e:ops"),  # provider before another field
        Decomposition("p::f", "m.d:decomp"),
        Subcommand("psub", "a subcommand", lambda parser: None, lambda args: 0),
    ]
    for r in records:
        stamped = r.provided_by(info)
        ref = attrs.evolve(r, provider=info)
        assert type(stamped) is type(r) and stamped.provider is info and r.provider is None
        for a in attrs.fields(type(r)):  # the record's own values (evolve re-runs converters: equal values)
            if a.name != "provider":
                assert getattr(stamped, a.name) is getattr(r, a.name), (type(r).__name__, a.name)
            assert getattr(stamped, a.name) == getattr(ref, a.name), (type(r).__name__, a.name)
        assert stamped == ref and repr(stamped) == repr(ref)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            stamped.provider = None


# -- pluggy deferred (a selective start) --------------------------------------------------------------
def test_srcore_hookimpl_marks_a_function_as_pluggys_marker_does():
    import pluggy

    theirs = pluggy.HookimplMarker("srcore")
    for opts in ({}, {"tryfirst": True}, {"specname": "srcore_kernels", "trylast": True}, {"wrapper": True}):
        def mine():
            yield from ()

        def ref():
            yield from ()
        hookimpl(**opts)(mine) if opts else hookimpl(mine)
        theirs(**opts)(ref) if opts else theirs(ref)
        assert mine.srcore_impl == ref.srcore_impl


def _plain(name, **hooks):
    """A plugin module as real plugins are written: ``@hookimpl`` on functions named after the hooks."""
    mod = types.ModuleType(name)
    for hook, value in hooks.items():
        def impl(value=value):
            yield from value
        setattr(mod, hook, hookimpl(impl))
    return mod


def _summary(pm):
    reg = pm.registry
    return ([(r.name, r.status, r.hooks, r.error) for r in pm.reports], sorted(reg.backends), sorted(reg.declared),
            sorted((k.op, k.backend, k.kind, k.provider.name) for k in reg.kernel_table))


def test_a_manager_deferring_pluggy_calls_plain_hooks_itself_and_builds_the_same_registry():
    hooks = dict(srcore_op_libraries=[LIB], srcore_backends=[TB], srcore_kernels=[good_kernel()])

    class WithArgs:   # pluggy rejects it (an argument its spec does not have): the deferred manager asks pluggy
        @hookimpl
        def srcore_backends(self, backend):
            yield from ()
    ordered = _plain("ordered", srcore_backends=[Backend("tb3")])
    ordered.srcore_backends.srcore_impl["tryfirst"] = True   # pluggy's ordering: only pluggy honours it

    summaries = []
    for defer in (False, True):
        pm = PluginManager(defer_pluggy=defer).load(entry_points=False)
        pm.register(_plain("p", **hooks), "p", dist="srcore-p", version="3.0")
        pm.register(_plain("q", srcore_backends=[Backend("tb2")]), "q")
        if defer:
            assert pm._pluggy is None and sorted(pm.registry.backends) == ["tb", "tb2"]   # no pluggy so far
        assert pm.register(WithArgs(), "withargs").status == "failed"
        assert pm._pluggy is not None   # asked for the plugin it could not call itself
        pm.register(ordered, "ordered")
        summaries.append(_summary(pm))
    assert summaries[0] == summaries[1]
    assert summaries[0][1] == ["tb", "tb2", "tb3"] and summaries[0][3] == [("t::f", "tb", "out", "p")]

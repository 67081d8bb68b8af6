"""Shape rules through the ``srcore_shape_rules`` hook, and dispatch that never picks a kernel for a dtype
it does not list.

The example plugin (examples/plugin-example, registered from the checkout) ships a rule for
``example::scaled_tanh``; with it, a model that puts the op between linear layers is planned
and partitioned like one made of core ops only; without it (the same plugin minus its rule)
the load warns and loses both. References are numpy written by hand.
"""
from __future__ import annotations

import re
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from _example_plugin import import_example
from srcore.dispatch import resolve_node
from srcore.ir import Graph, TensorType
from srcore.plugin import Kernel, OpLibrary, PluginInfo, ShapeRule, hookimpl
from srcore.plugin.manager import PluginManager

ROOT = Path(__file__).resolve().parents[1]
srcore_example = import_example()

RNG = np.random.default_rng(7)


def W(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def example_manager(with_rule: bool = True) -> PluginManager:
    pm = PluginManager().load()
    if with_rule:
        plugin = srcore_example
    else:  # the same plugin without its shape rule
        plugin = types.SimpleNamespace(srcore_op_libraries=srcore_example.srcore_op_libraries,
                                       srcore_kernels=srcore_example.srcore_kernels)
    rep = pm.register(plugin, "example", dist="srcore-plugin-example", version="dev")
    assert rep.status == "loaded" and not rep.errors, rep
    return pm


def mlp_around_scaled_tanh():
    """linear -> relu -> linear -> example::scaled_tanh(scale=2) -> linear -> relu -> linear, and numpy's answer."""
    g = Graph()
    x = g.add_input(TensorType("float32", (4, 8)), "x")
    weights = []

    def linear(v, n_in, n_out):
        w, b = W(n_out, n_in), W(n_out)
        weights.append((w, b))
        return g.insert("aten::linear", [v, g.insert_constant(w), g.insert_constant(b)], [TensorType()]).output

    def relu(v):
        return g.insert("aten::relu", [v], [TensorType()]).output

    h = linear(relu(linear(x, 8, 16)), 16, 8)
    t = g.insert("example::scaled_tanh", [h, g.insert_constant(2.0)], [TensorType()]).output
    g.register_output(linear(relu(linear(t, 8, 16)), 16, 8))

    def reference(xv):
        (w1, b1), (w2, b2), (w3, b3), (w4, b4) = weights
        h = np.maximum(xv @ w1.T + b1, 0) @ w2.T + b2
        t = 2.0 * np.tanh(h)
        return np.maximum(t @ w3.T + b3, 0) @ w4.T + b4

    return srcore.Model.from_graph(g), reference


# -- the example's rule: arena and engines around a plugin op --------------------------------------------
def test_plugin_op_between_linear_layers_is_planned_and_its_neighbours_run_in_engines():
    model, reference = mlp_around_scaled_tanh()
    pm = example_manager()
    x = W(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", srcore.SrcoreWarning)  # a complete load warns about nothing
        sm = srcore.StaticModule(model, backends=("cpu",), plugin_manager=pm)
    assert not sm.load_report
    np.testing.assert_allclose(sm(x), reference(x), rtol=1e-5, atol=1e-5)
    (row,) = sm.memory_report(x)
    # every intermediate (all but the returned tensor) is an out variant's output, managed in the arena
    intermediates = [n for n in sm.graph.nodes if n.kind != "prim::Constant" and n.outputs[0] not in sm.graph.outputs]
    assert row["managed_tensors"] == len(intermediates) >= 4
    assert row["arena_bytes"] > 0

    sm = srcore.StaticModule(model, backends=("trt_like", "cpu"), plugin_manager=pm,
                             options=srcore.Options(engine_min_block_size=2, engine_options={"timing": False, "fusion": False}))
    engines = sm.partition.engines
    assert len(engines) == 2, sm.partition  # one engine before the plugin op, one after
    assert [e.ops for e in engines] == [("srcore::linear_relu", "aten::linear")] * 2
    assert [r.node.split(" = ")[1] for r in sm.partition.refused] == ["example::scaled_tanh"]
    np.testing.assert_allclose(sm(x), reference(x), rtol=1e-4, atol=1e-4)


def test_without_the_rule_the_load_warns_and_loses_the_arena_and_the_engines():
    model, reference = mlp_around_scaled_tanh()
    pm = example_manager(with_rule=False)
    x = W(4, 8)
    with pytest.warns(srcore.SrcoreWarning, match=r"no shape rule for example::scaled_tanh \(declared by "
                      r"srcore-plugin-example dev\)"):
        sm = srcore.StaticModule(model, backends=("trt_like", "cpu"), plugin_manager=pm,
                                 options=srcore.Options(engine_min_block_size=2, engine_options={"timing": False, "fusion": False}))
    (missing,) = sm.load_report.missing_shape_rules
    assert missing.op == "example::scaled_tanh" and missing.unknown_shapes == 3  # its output, then linear_relu, linear
    assert len(sm.partition.engines) == 1, sm.partition  # nothing after the op compiles
    after = [r for r in sm.partition.refused if "linear" in r.node]
    # trt_like names the argument it cannot type: the op's output (their input) lost its rank
    assert after and all(re.search(r"argument 'input' (has no known rank|is of unknown dtype)", r.reason)
                         for r in after), after
    np.testing.assert_allclose(sm(x), reference(x), rtol=1e-4, atol=1e-4)
    planned = example_manager()
    full = srcore.StaticModule(model, backends=("cpu",), plugin_manager=planned).memory_report(x)[0]
    with pytest.warns(srcore.SrcoreWarning):
        lost = srcore.StaticModule(model, backends=("cpu",), plugin_manager=pm).memory_report(x)[0]
    assert lost["managed_tensors"] < full["managed_tensors"]


# -- bad rules: an error naming the plugin and the op; other plugins keep working -----------------------
LIB = OpLibrary("t", schemas=("t::f(Tensor self) -> Tensor",))


def bad_plugin(rule, ops=("t::f",)):
    mod = types.ModuleType("srcore_bad_rules")
    mod.srcore_op_libraries = hookimpl(lambda: iter([LIB]), specname="srcore_op_libraries")
    mod.srcore_kernels = hookimpl(lambda: iter([Kernel("t::f", "cpu", "out", ("float32",), np.negative)]),
                                  specname="srcore_kernels")
    mod.srcore_shape_rules = hookimpl(lambda: iter([ShapeRule(ops, rule)]), specname="srcore_shape_rules")
    return mod


def load_t_f(pm):
    g = Graph()
    x = g.add_input(TensorType("float32", (2, 3)), "x")
    g.register_output(g.insert("t::f", [x], [TensorType()]).output)
    return srcore.StaticModule(g, plugin_manager=pm)


def manager_with(rule, ops=("t::f",)):
    pm = example_manager()
    pm.register(bad_plugin(rule, ops), "bad", dist="srcore-bad", version="0.1")
    return pm


@pytest.mark.one_pass
@pytest.mark.parametrize("rule, message", [
    (lambda ctx: 1 / 0, r"the shape rule for 't::f' of plugin bad \(srcore-bad 0.1\) failed: ZeroDivisionError"),
    (lambda ctx: [ctx.tensor(0), ctx.tensor(0)], r"plugin bad \(srcore-bad 0.1\) gives 2 outputs, the node has 1"),
    (lambda ctx: None, r"plugin bad \(srcore-bad 0.1\) returned None; a rule returns a list"),
    ("srcore_no_such_module:rule", r"plugin bad \(srcore-bad 0.1\): cannot import the shape rule "
                                   r"'srcore_no_such_module:rule' of t::f: ModuleNotFoundError"),
])
def test_a_broken_rule_fails_the_load_naming_plugin_and_op_and_other_plugins_keep_working(rule, message):
    pm = manager_with(rule)
    with pytest.raises(srcore.SrcoreError, match=message) as err:
        load_t_f(pm)
    assert "t::f" in str(err.value)
    model, reference = mlp_around_scaled_tanh()  # the example plugin, in the same manager, is unaffected
    x = W(4, 8)
    np.testing.assert_allclose(srcore.StaticModule(model, plugin_manager=pm)(x), reference(x), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.one_pass
def test_a_rule_may_raise_a_shape_error_for_inputs_that_contradict_each_other():
    def rank2(ctx):
        t = ctx.tensor(0, "self")
        if t.shape is not None and len(t.shape) != 2:
            raise ctx.fail(f"t::f wants a matrix, got rank {len(t.shape)}")
        return [t]

    pm = manager_with(rank2)
    g = Graph()
    x = g.add_input(TensorType("float32", (2, 3, 4)), "x")
    g.register_output(g.insert("t::f", [x], [TensorType()]).output)
    with pytest.raises(srcore.ShapeError, match="t::f wants a matrix, got rank 3"):
        srcore.StaticModule(g, plugin_manager=pm)
    assert load_t_f(pm).graph.outputs[0].type == TensorType("float32", (2, 3))


@pytest.mark.one_pass
def test_rules_for_undeclared_or_already_covered_ops_are_rejected_one_by_one():
    same = lambda ctx: [ctx.tensor(0)]  # noqa: E731
    # "aten::add" names no overload but is the base name of declared ones; "zz::*" is a namespace nobody declares
    pm = manager_with(same, ops=("t::f", "t::nope", "aten::relu", "t::f", "aten::add", "zz::*"))
    rules = pm.registry.shape_rules  # records are checked when the registry is built
    errors = pm.report("bad").errors
    assert pm.report("bad").status == "loaded"
    assert any("shape rule for undeclared op 't::nope'" in e for e in errors), errors
    assert any("shape rule for undeclared op 'zz::*'" in e for e in errors), errors
    assert not any("undeclared op 'aten::add'" in e for e in errors), errors
    assert any("shape rule for aten::relu ignored: builtin (srcore" in e for e in errors), errors
    assert any("shape rule for t::f ignored: bad (srcore-bad 0.1) already gives one" in e for e in errors), errors
    assert rules.lookup("t::f").fn is same
    assert rules.lookup("aten::relu").provider.name == "builtin"


@pytest.mark.one_pass
def test_a_shape_rule_record_that_names_no_op_fails_its_plugin_only():
    pm = example_manager()
    mod = types.ModuleType("srcore_empty_rule")
    mod.srcore_shape_rules = hookimpl(lambda: iter([ShapeRule((), lambda ctx: [])]), specname="srcore_shape_rules")
    pm.register(mod, "empty", dist="srcore-empty", version="1")
    assert pm.registry.shape_rules.lookup("example::scaled_tanh") is not None
    rep = pm.report("empty")
    assert rep.status == "failed" and "srcore_shape_rules: ValueError: a ShapeRule names no op" in rep.error


@pytest.mark.one_pass
def test_the_core_rules_come_through_the_same_hook():
    from srcore.ops.shapes import RULES

    pm = PluginManager().load(entry_points=False)
    rules = pm.registry.shape_rules
    assert "srcore_shape_rules" in pm.report("builtin").hooks
    assert set(rules.names()) == set(RULES)
    assert all(rules.get(op).fn is fn and rules.get(op).provider.name == "builtin" for op, fn in RULES.items())


@pytest.mark.one_pass
def test_every_module_with_core_rules_is_loaded_with_them():
    """The core's rule modules load on first use of ``RULES`` (a selective build imports only those its
    rules name): ``RULE_MODULES`` must list every module of srcore/ops/shapes that defines a ``@rule``."""
    import ast

    import srcore.ops.shapes as shapes

    folder = Path(shapes.__file__).parent
    with_rules = set()
    for f in folder.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Call) and getattr(d.func, "id", None) == "rule" for d in node.decorator_list):
                with_rules.add(f.stem)
    assert with_rules and with_rules <= set(shapes.RULE_MODULES), sorted(with_rules - set(shapes.RULE_MODULES))
    rules = shapes.load_rules()
    assert {fn.__module__.rsplit(".", 1)[1] for fn in rules.values()} == with_rules


# -- dispatch never picks a kernel for a dtype it does not list ----------------------------------------------
F64_ONLY = Kernel("aten::relu", "cpu", "out", ("float64",), lambda self, *, out=None: np.maximum(self, 0, out=out),
                  priority=10).provided_by(PluginInfo("example", "srcore-plugin-example", "dev"))


@pytest.mark.one_pass
def test_the_example_float64_relu_is_used_for_float64_only():
    pm = example_manager()
    for dtype, dist in (("float64", "srcore-plugin-example"), ("float32", "srcore-cpu")):
        g = Graph()
        x = g.add_input(TensorType(dtype, (3,)), "x")
        # the declared output dtype is left unknown: propagation (aten::relu's rule) fills it in
        g.register_output(g.insert("aten::relu", [x], [TensorType()]).output)
        sm = srcore.StaticModule(g, plugin_manager=pm, options=srcore.Options(optimize=False))
        (pn,) = [pn for b in sm.blocks for pn in b.nodes if pn.fn is not None]
        assert pn.fn.plugin == dist, (dtype, pn.fn)
        np.testing.assert_array_equal(sm(np.array([-1.0, 0.5, 2.0], dtype)), [0.0, 0.5, 2.0])


@pytest.mark.one_pass
def test_with_unknown_dtypes_the_most_general_kernel_is_chosen_and_checks_dtypes():
    pm = example_manager()
    g = Graph()
    x = g.add_input(TensorType(None, (3,)), "x")
    relu = g.insert("aten::relu", [x], [TensorType()])
    rk = resolve_node(relu, pm.kernel_table, ["cpu"])
    assert rk.kernel.provider.name == "cpu" and rk.checks_dtypes  # not the float64-only example kernel
    np.testing.assert_array_equal(rk.fn(np.array([-1.0, 2.0], np.float32)), [0.0, 2.0])

    from srcore.dispatch import KernelTable

    only = KernelTable()
    only.add(F64_ONLY)
    rk = resolve_node(relu, only, ["cpu"])
    assert rk.checks_dtypes
    np.testing.assert_array_equal(rk.fn(np.array([-1.0, 2.0])), [0.0, 2.0])
    with pytest.raises(srcore.KernelError, match=r"aten::relu: the out kernel of srcore-plugin-example dev on cpu "
                       r"lists dtypes \(float64\) but got a float32 array"):
        rk.fn(np.array([-1.0, 2.0], np.float32))


DTYPES = ("float32", "float64", "int64", "int32", "bool")


@pytest.mark.one_pass
@settings(max_examples=60, deadline=None)
@given(kernels=st.lists(st.tuples(st.sets(st.sampled_from(DTYPES + ("*",)), min_size=1), st.integers(-2, 2)),
                        min_size=1, max_size=5),
       dtype=st.sampled_from(DTYPES), known=st.booleans())
def test_dispatch_never_runs_a_kernel_on_a_dtype_it_does_not_list(kernels, dtype, known):
    from srcore.dispatch import KernelTable

    table = KernelTable()
    for i, (dts, prio) in enumerate(kernels):
        table.add(Kernel("t::f", "cpu", "native", tuple(sorted(dts)), lambda self: self, priority=prio)
                  .provided_by(PluginInfo(f"p{i}", f"srcore-p{i}", "1")))
    g = Graph()
    x = g.add_input(TensorType(dtype if known else None, (2,)), "x")
    node = g.insert("t::f", [x], [TensorType(dtype if known else None, (2,))])
    rk = resolve_node(node, table, ["cpu"])
    listing = [set(d) for d, _ in kernels]
    if rk is None:
        assert known and not any(dtype in d or "*" in d for d in listing)
        return
    accepts = dtype in rk.kernel.dtypes or "*" in rk.kernel.dtypes
    if known:
        assert accepts and not rk.checks_dtypes
    else:
        assert rk.checks_dtypes   # a "*" kernel too: it refuses a quantized array at run time
        data = np.zeros(2, dtype)
        if accepts:
            assert rk.fn(data) is data
        else:
            with pytest.raises(srcore.KernelError, match=f"got a {dtype} array"):
                rk.fn(data)


def test_a_model_whose_dtypes_are_unknown_runs_and_reports_the_checked_nodes():
    g = Graph()
    x = g.add_input(TensorType(None, (3,)), "x")
    g.register_output(g.insert("aten::relu", [x], [TensorType()]).output)
    sm = srcore.StaticModule(g, plugin_manager=example_manager(), options=srcore.Options(optimize=False))
    (guard,) = sm.load_report.dtype_guards
    assert guard.op == "aten::relu" and "srcore-cpu" in guard.kernel
    np.testing.assert_array_equal(sm(np.array([-1.0, 3.0, 0.0])), [0.0, 3.0, 0.0])


"""The kernel table and static dispatch: order of backends, kinds, priorities, dtypes, matchers, errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import srcore
from srcore.dispatch import (STRUCTURAL_KINDS, KernelTable, dispatch_dtypes, node_info, resolve_graph,
                             resolve_node)
from srcore.ir import INT, Graph, ListType, SourceLocation, TensorType
from srcore.plugin import Kernel, NodeInfo, PluginInfo, Specialized

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

F32 = TensorType("float32", (2, 3))
F64 = TensorType("float64", (2, 3))
I64 = TensorType("int64", (2, 3))


def K(op, backend="cpu", kind="out", dtypes=("float32",), impl=np.negative, plugin="p", version="1.0", **kw):
    return Kernel(op, backend, kind, dtypes, impl, **kw).provided_by(PluginInfo(plugin, f"srcore-{plugin}", version))


def unary_graph(op="t::f", t_in=F32, t_out=F32, source=None):
    g = Graph()
    x = g.add_input(t_in, "x")
    n = g.insert(op, [x], [t_out], source=source)
    g.register_output(n.output)
    return g, n


def table(*kernels):
    t = KernelTable()
    t.add(kernels)
    return t


# -- the table ---------------------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(-3, 3), st.sampled_from("abcde")), min_size=1, max_size=8, unique=True))
def test_buckets_are_sorted_by_priority_then_plugin_name(entries):
    t = table(*(K("t::f", priority=p, plugin=name) for p, name in entries))
    got = [(k.priority, k.provider.name) for k in t.lookup("t::f", "cpu", "out")]
    assert got == sorted(entries, key=lambda e: (-e[0], e[1]))


def test_lookup_normalises_the_empty_overload_and_lists_every_provider():
    t = table(K("t::f"), K("t::f", backend="gpu", plugin="q"), K("t::f", kind="fallback", plugin="r"))
    assert len(t.lookup("t::f.", "cpu", "out")) == 1
    assert [(k.backend, k.kind) for k in t.kernels_for("t::f")] == [("cpu", "out"), ("cpu", "fallback"),
                                                                   ("gpu", "out")]
    assert t.ops() == ["t::f"] and len(t) == 3 and "t::f." in t


# -- dispatch dtypes -------------------------------------------------------------------------------
def test_dispatch_dtypes_are_tensor_inputs_and_outputs_including_lists():
    g = Graph()
    a = g.add_input(F32, "a")
    lst = g.add_input(ListType(TensorType("int64")), "lst")
    n = g.insert("t::h", [a, lst, g.add_input(INT, "k")], [TensorType("float16"), INT])
    assert dispatch_dtypes(n) == ("float16", "float32", "int64")
    m = g.insert("t::size", [g.inputs[2]], [INT])
    assert dispatch_dtypes(m) == ()


# -- resolve_node ----------------------------------------------------------------------------------
def test_kinds_are_tried_out_native_fallback_within_a_backend():
    _, n = unary_graph()
    fb, nat, out = K("t::f", kind="fallback"), K("t::f", kind="native"), K("t::f", kind="out")
    assert resolve_node(n, table(fb, nat, out), ["cpu"]).kernel is out
    assert resolve_node(n, table(fb, nat), ["cpu"]).kind == "native"
    assert resolve_node(n, table(fb), ["cpu"]).kind == "fallback"


def test_backends_are_tried_in_the_callers_order_before_kinds():
    _, n = unary_graph()
    t = table(K("t::f", backend="cpu", kind="out"), K("t::f", backend="fast", kind="fallback"))
    assert resolve_node(n, t, ["fast", "cpu"]).backend == "fast"
    assert resolve_node(n, t, ["cpu", "fast"]).backend == "cpu"
    assert resolve_node(n, t, ["other"]) is None


def test_every_dispatch_dtype_must_be_accepted():
    _, n = unary_graph(t_in=F32, t_out=F64)
    t = table(K("t::f", dtypes=("float32",)), K("t::f", kind="native", dtypes=("float32", "float64")))
    assert resolve_node(n, t, ["cpu"]).kind == "native"
    assert resolve_node(n, table(K("t::f", dtypes=("*",))), ["cpu"]) is not None
    assert resolve_node(n, table(K("t::f", dtypes=("float64",))), ["cpu"]) is None


def test_priority_wins_then_plugin_name_and_the_result_runs():
    _, n = unary_graph()
    t = table(K("t::f", plugin="b", impl=np.negative), K("t::f", plugin="a", impl=np.abs),
              K("t::f", plugin="z", impl=np.square, priority=5))
    x = np.array([-2.0, 3.0], np.float32)
    np.testing.assert_array_equal(resolve_node(n, t, ["cpu"]).fn(x), np.square(x))
    t2 = table(K("t::f", plugin="b", impl=np.negative), K("t::f", plugin="a", impl=np.abs))
    np.testing.assert_array_equal(resolve_node(n, t2, ["cpu"]).fn(x), np.abs(x))


def test_matchers_may_decline_return_a_callable_or_a_specialization():
    g = Graph()
    x = g.add_input(F32, "x")
    alpha = g.insert_constant(1)
    n = g.insert("t::add", [x, x, alpha], [F32])
    n.schema = srcore.FunctionSchema.parse("t::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    seen: list[NodeInfo] = []

    def decline(info):
        seen.append(info)
        return None

    def specialize(info):
        return Specialized(np.add, args=(0, 1)) if info.const("alpha") == 1 else None

    t = table(K("t::add.Tensor", matcher=decline, plugin="a"), K("t::add.Tensor", matcher=specialize, plugin="b"),
              K("t::add.Tensor", kind="native", matcher=lambda info: np.subtract))
    rk = resolve_node(n, t, ["cpu"])
    assert rk.specialized == Specialized(np.add, args=(0, 1)) and rk.fn is np.add and rk.kernel.provider.name == "b"
    info = seen[0]
    assert info.op == "t::add.Tensor" and [a.name for a in info.args] == ["self", "other", "alpha"]
    assert info.is_const("alpha") and not info.is_const("self") and info.output_types == (F32,)
    t2 = table(K("t::add.Tensor", matcher=decline), K("t::add.Tensor", kind="native", matcher=lambda i: np.subtract))
    rk2 = resolve_node(n, t2, ["cpu"])
    assert rk2.fn is np.subtract and rk2.specialized is None and rk2.kind == "native"


def test_a_matcher_returning_garbage_is_a_plugin_error():
    _, n = unary_graph()
    with pytest.raises(srcore.PluginError, match=r"plugin p \(srcore-p 1.0\): matcher of the out kernel for t::f"):
        resolve_node(n, table(K("t::f", matcher=lambda info: 42)), ["cpu"])


# -- resolve_graph -----------------------------------------------------------------------------------
def test_resolve_graph_recurses_into_blocks_and_skips_structural_nodes():
    g = Graph()
    x = g.add_input(F32, "x")
    c = g.add_input(TensorType("bool", ()), "c")
    cond = g.insert("t::to_bool", [c], [srcore.ir.BOOL])
    if_node = g.insert("prim::If", [cond.output], [F32])
    for blk, op in zip((if_node.add_block(), if_node.add_block()), ("t::f", "t::g")):
        inner = g.create(op, [x], [F32])
        blk.append(inner)
        blk.register_output(inner.output)
    g.register_output(if_node.output)
    t = table(K("t::f"), K("t::g"), K("t::to_bool", dtypes=("bool",)))
    resolved = resolve_graph(g, t, ["cpu"])
    assert sorted(n.kind for n in resolved) == ["t::f", "t::g", "t::to_bool"]
    assert {"prim::If", "prim::Loop", "prim::Constant"} <= STRUCTURAL_KINDS


def test_unsupported_ops_are_all_listed_once_with_alternatives():
    g = Graph()
    x = g.add_input(F32, "x")
    a = g.insert("t::f", [x], [F32], source=SourceLocation("model.py", 3, 5))
    b = g.insert("t::quant_only", [a.output], [F32], source=SourceLocation("model.py", 4))
    c = g.insert("t::nobody", [b.output], [F32])
    ok = g.insert("t::ok", [c.output], [F32])
    g.register_output(ok.output)
    t = table(K("t::f", dtypes=("float64",), plugin="cpu"), K("t::quant_only", backend="quantized_cpu",
              plugin="quantized", version="0.2"), K("t::ok"))
    with pytest.raises(srcore.UnsupportedOpError) as ei:
        resolve_graph(g, t, ["cpu"])
    err = ei.value
    assert [m.op for m in err.missing] == ["t::f", "t::quant_only", "t::nobody"]
    text = str(err)
    assert text.startswith("3 node(s) have no kernel on backend(s) cpu:")
    assert "t::f with dtypes (float32)  # model.py:3:5" in text
    assert "srcore-cpu 1.0 has an out kernel for dtypes (float64) on cpu" in text
    assert "srcore-quantized 0.2 has an out kernel for backend quantized_cpu" in text
    assert "t::nobody with dtypes (float32)\n" in text


def test_node_info_reports_constant_values():
    g = Graph()
    x = g.add_input(F32, "x")
    k = g.insert_constant(3)
    n = g.insert("t::topk", [x, k], [F32, I64])
    info = node_info(n)
    assert info.op == "t::topk" and info.const("arg1") == 3 and not info.is_const("arg0")
    assert info.output_types == (F32, I64)


def test_kinds_can_leave_out_out_variants():
    g, n = unary_graph()
    t = table(K("t::f", kind="out"), K("t::f", kind="fallback"))
    assert resolve_node(n, t, ["cpu"], kinds=("native", "fallback")).kind == "fallback"
    assert resolve_graph(g, t, ["cpu"], kinds=("fallback",))[n].kind == "fallback"
    with pytest.raises(srcore.UnsupportedOpError):
        resolve_graph(g, table(K("t::f")), ["cpu"], kinds=("native",))


KERNEL_SPECS = st.tuples(st.sampled_from(["cpu", "fast", "quant"]), st.sampled_from(["out", "native", "fallback"]),
                         st.sampled_from([("float32",), ("float64",), ("float32", "float64"), ("*",)]),
                         st.integers(-2, 2), st.sampled_from("abc"))


@given(specs=st.lists(KERNEL_SPECS, max_size=12, unique=True),
       backends=st.permutations(["cpu", "fast", "quant"]).map(lambda p: p[:2]),
       dtype=st.sampled_from(["float32", "float64"]))
def test_resolve_node_agrees_with_the_definition(specs, backends, dtype):
    kernels = [K("t::f", b, kind, dt, plugin=p, priority=prio) for b, kind, dt, prio, p in specs]
    _, n = unary_graph(t_in=TensorType(dtype, (2,)), t_out=TensorType(dtype, (2,)))
    candidates = [k for k in kernels if k.backend in backends and ("*" in k.dtypes or dtype in k.dtypes)]
    # the documented rule: backend order, then kind order, then priority, then plugin name
    expected = min(candidates, default=None, key=lambda k: (backends.index(k.backend),
                   ("out", "native", "fallback").index(k.kind), -k.priority, k.provider.name))
    got = resolve_node(n, table(*kernels), backends)
    if expected is None:
        assert got is None
    else:
        assert got.kernel == expected and got.kernel.provider.name == expected.provider.name

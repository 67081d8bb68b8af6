"""Static dispatch against hand-built tables: which kernel a node gets, and what the errors say.

Every expectation here is derived by hand from the rules in docs/static-dispatch.md (backend order,
then out/native/fallback, then priority and plugin name; a kernel never runs a dtype it does not
list; unknown dtypes take the most general kernel and check at run time), not from the resolver.
The kernels record what ran, so a wrong choice shows as the wrong record, not as a plausible number.
Written for the mutation run (docs/testing.md#mutation-testing).
"""
from __future__ import annotations

import logging
import types

import numpy as np
import pytest

import srcore
from srcore.dispatch import KernelTable, dispatch_dtypes, node_info, resolve_graph, resolve_node
from srcore.dispatch import lazy
from srcore.dispatch import resolve as R
from srcore.dispatch.guard import dtype_guard
from srcore.dispatch.table import kernel_sort_key, op_key, wildcard_of
from srcore.ir import BOOL, INT, Graph, ListType, SourceLocation, TensorType
from srcore.ir.types import OptionalType, TupleType
from srcore.ops.registry import SchemaRegistry
from srcore.plugin import Kernel, PluginInfo, Specialized

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

F32 = TensorType("float32", (2,))
F64 = TensorType("float64", (2,))
UNK = TensorType(None, (2,))
Q8 = TensorType("quint8", (2,))

RAN: list[str] = []


def recorder(name):
    """A kernel that records that it ran and returns its name."""
    def fn(*args, **kwargs):
        RAN.append(name)
        return name
    fn.__name__ = name
    return fn


def K(op="t::f", backend="cpu", kind="out", dtypes=("float32",), name=None, plugin="p", version="1.0", dist=None,
      **kw):
    impl = kw.pop("impl", None) or recorder(name or f"{plugin}:{backend}:{kind}:{','.join(dtypes)}")
    return Kernel(op, backend, kind, tuple(dtypes), impl, **kw).provided_by(
        PluginInfo(plugin, f"srcore-{plugin}" if dist is None else dist or None, version))


def table(*kernels, schemas=None):
    t = KernelTable(schemas=schemas)
    t.add(kernels)
    return t


def unary(op="t::f", t_in=F32, t_out=F32, source=None, schema=None):
    g = Graph()
    x = g.add_input(t_in, "x")
    n = g.insert(op, [x], [t_out], source=source)
    if schema is not None:
        n.schema = srcore.FunctionSchema.parse(schema)
    g.register_output(n.output)
    return g, n


def chosen(n, t, backends=("cpu",), **kw):
    rk = resolve_node(n, t, list(backends), **kw)
    return None if rk is None else rk.fn.__wrapped__.__name__ if hasattr(rk.fn, "__wrapped__") else rk.fn.__name__


def registry(*schemas):
    reg = SchemaRegistry()
    for s in schemas:
        reg.add(s, "test")
    return reg


# -- the table ---------------------------------------------------------------------------------------------
def test_table_keys_wildcards_and_sort_order():
    assert op_key("aten::relu.") == "aten::relu" and op_key("aten::relu") == "aten::relu"
    assert op_key("aten::add.Tensor") == "aten::add.Tensor"
    assert wildcard_of("aten::add.Tensor") == "aten::*" and wildcard_of("q::x") == "q::*"
    assert kernel_sort_key(K(priority=3, plugin="b")) == (-3, "b")
    assert kernel_sort_key(Kernel("t::f", "cpu", "out", ("float32",), np.negative)) == (0, "")
    generic = K("t::*", kind="fallback", dtypes=("*",), name="generic", plugin="g")
    own = K("t::f.x", kind="fallback", dtypes=("*",), name="own", plugin="z")
    other = K("t::f.x", backend="acc", name="acc", plugin="a")
    t = table(generic, own, other)
    # the op's own kernels first, then its namespace's generic ones
    assert [k.impl.__name__ for k in t.lookup("t::f.x", "cpu", "fallback")] == ["own", "generic"]
    assert t.lookup("t::f.x", "cpu", "out") == [] and t.lookup("u::f", "cpu", "fallback") == []
    # every backend and kind, the generic kernels included: by backend, kind, own before generic
    assert [k.impl.__name__ for k in t.kernels_for("t::f.x")] == ["acc", "own", "generic"]
    assert [k.impl.__name__ for k in t.kernels_for("t::*")] == ["generic"]   # not listed twice
    assert t.ops() == ["t::*", "t::f.x"] and t.backends() == ["acc", "cpu"] and len(t) == 3
    assert "t::f.x" in t and "t::f" not in t
    assert [k.impl.__name__ for k in t] == ["generic", "acc", "own", "generic"]


def test_adding_one_kernel_or_many_keeps_buckets_sorted():
    t = KernelTable()
    t.add(K(priority=0, plugin="b", name="b0"))
    t.add([K(priority=0, plugin="a", name="a0"), K(priority=1, plugin="c", name="c1")])
    t.add(K(priority=-1, plugin="a", name="a-1"))
    assert [k.impl.__name__ for k in t.lookup("t::f", "cpu", "out")] == ["c1", "a0", "b0", "a-1"]
    assert [k.impl.__name__ for k in t.kernels_for("t::f.")] == ["c1", "a0", "b0", "a-1"]


# -- dtypes ------------------------------------------------------------------------------------------------
def test_dispatch_dtypes_look_into_optionals_tuples_and_lists():
    g = Graph()
    a = g.add_input(OptionalType(TensorType("float16")), "a")
    b = g.add_input(TupleType((TensorType("int8"), ListType(TensorType("bool")), INT)), "b")
    c = g.add_input(UNK, "c")
    n = g.insert("t::h", [a, b, c], [TupleType((TensorType("float16"), TensorType("uint8")))])
    assert dispatch_dtypes(n) == ("bool", "float16", "int8", "uint8")
    assert R.has_unknown_dtypes(n)


@pytest.mark.parametrize("t, unknown", [
    (F32, False), (UNK, True), (INT, False), (ListType(UNK), True), (ListType(F32), False),
    (OptionalType(UNK), True), (OptionalType(F32), False), (TupleType((F32, INT)), False),
    (TupleType((F32, UNK)), True), (TupleType((UNK, F32)), True), (ListType(INT), False),
])
def test_an_unknown_dtype_is_found_wherever_it_hides(t, unknown):
    g = Graph()
    x = g.add_input(t, "x")
    n_in = g.insert("t::f", [x], [F32])
    y = g.add_input(F32, "y")
    n_out = g.insert("t::g", [y], [t])
    assert R.has_unknown_dtypes(n_in) is unknown and R.has_unknown_dtypes(n_out) is unknown


def test_accepts_dtypes():
    assert R.accepts_dtypes(K(dtypes=("*",)), ["uint8", "float32", "bfloat16"])
    # "*" is every dtype whose stored numbers are its values: a quantized one must be listed, or "quantized"
    assert not R.accepts_dtypes(K(dtypes=("*",)), ["quint8", "float32"])
    assert not R.accepts_dtypes(K(dtypes=("*",)), ["qint32"])
    assert R.accepts_dtypes(K(dtypes=("*", "quint8")), ["quint8", "float32"])
    assert not R.accepts_dtypes(K(dtypes=("*", "quint8")), ["qint8"])
    assert R.accepts_dtypes(K(dtypes=("*", "quantized")), ["quint8", "qint8", "qint32", "int64"])
    assert R.accepts_dtypes(K(dtypes=("quantized", "float32")), ["qint8", "float32"])
    assert not R.accepts_dtypes(K(dtypes=("quantized", "float32")), ["qint8", "int64"])
    assert R.accepts_dtypes(K(dtypes=("float32", "int64")), ["int64", "float32"])
    assert not R.accepts_dtypes(K(dtypes=("float32", "int64")), ["int64", "float64"])
    assert R.accepts_dtypes(K(dtypes=("float32",)), [])


def test_generality_orders_star_then_numpy_dtypes_then_length():
    star = K(dtypes=("*",))
    two_std = K(dtypes=("float32", "float64"))
    one_std_two_plugin = K(dtypes=("float32", "quint8", "qint8"))
    plugin_only = K(dtypes=("quint8", "qint8", "qint32", "quint4x2"))
    one_std = K(dtypes=("int64",))
    star_q = K(dtypes=("*", "quantized"))
    assert R._generality(star) == (False, True, 0, -1)
    assert R._generality(star_q) == (False, False, 0, -2)
    assert R._generality(one_std_two_plugin) == (True, True, -1, -3)
    ks = [one_std, plugin_only, one_std_two_plugin, two_std, star, star_q]
    assert sorted(ks, key=R._generality) == [star_q, star, two_std, one_std_two_plugin, one_std, plugin_only]


# -- schemas and node info ---------------------------------------------------------------------------------
class _Raises:
    def resolve(self, node):
        raise ValueError("no")


def test_node_schema_and_op():
    _, n = unary("t::f")
    assert R.node_schema(n) is None and R.node_schema(n, table()) is None
    assert R.node_schema(n, table(schemas=_Raises())) is None
    assert R.node_schema(n, table(schemas=object())) is None
    reg = registry("t::f.one(Tensor self) -> Tensor")
    s = R.node_schema(n, table(schemas=reg))
    assert s is reg.get("t::f.one") and R.node_op(n, s) == "t::f.one"
    n.schema = srcore.FunctionSchema.parse("t::f(Tensor self) -> Tensor")
    assert R.node_schema(n, table(schemas=reg)) is n.schema and R.node_op(n, n.schema) == "t::f"
    assert R.node_op(n) == "t::f"
    assert R.node_op(n, types.SimpleNamespace(qualified_name="t::g.")) == "t::g"
    assert R.node_op(n, types.SimpleNamespace(qualified_name="")) == "t::f"
    assert R.node_op(n, types.SimpleNamespace()) == "t::f"


def test_node_info_names_values_lists_and_source():
    g = Graph()
    x = g.add_input(F32, "x")
    k = g.insert_constant(2)
    parts = [g.insert_constant(1), g.insert_constant(3)]
    fixed = g.insert("prim::ListConstruct", parts, [ListType(INT)]).output
    grown = g.insert("prim::ListConstruct", parts, [ListType(INT)]).output
    g.insert("aten::append", [grown, k], [ListType(INT)])
    mixed = g.insert("prim::ListConstruct", [k, g.insert("t::n", [x], [INT]).output], [ListType(INT)]).output
    attr = g.insert("t::attr", [], [F32], attrs={"value": 5}).output   # an attribute named value: not a constant
    n = g.insert("t::f", [x, k, fixed, grown, mixed, attr], [F32, INT], source=SourceLocation("m.py", 7, 2))
    schema = srcore.FunctionSchema.parse("t::f.ov(Tensor self, int k, int[] a, int[] b, int[] c) -> (Tensor, int)")
    info = node_info(n, schema)
    assert info.op == "t::f.ov" and info.schema is schema and info.source == "m.py:7:2"
    assert [a.type for a in info.args] == [F32, INT, ListType(INT), ListType(INT), ListType(INT), F32]
    assert [a.name for a in info.args] == ["self", "k", "a", "b", "c", "arg5"]
    assert [a.is_constant for a in info.args] == [False, True, True, False, False, False]
    assert [a.value for a in info.args] == [None, 2, [1, 3], None, None, None]
    assert info.args[2].elements == (INT, INT) and info.args[4].elements == (INT, INT)
    assert info.args[0].elements is None and info.args[1].elements is None
    assert info.output_types == (F32, INT)
    bare = node_info(n, None, op="t::other")
    assert bare.op == "t::other" and [a.name for a in bare.args] == [f"arg{i}" for i in range(6)]
    assert node_info(n).op == "t::f" and node_info(unary()[1]).source is None
    assert node_info(n, schema, op="given").op == "given"


# -- matchers ----------------------------------------------------------------------------------------------
def test_a_string_impl_is_imported_and_a_matcher_answer_taken_as_is(monkeypatch):
    mod = types.ModuleType("srcore_test_dispatch_kernels")
    mod.neg = recorder("lazy-neg")
    mod.match = lambda info: mod.neg if info.op == "t::f" else None
    monkeypatch.setitem(__import__("sys").modules, "srcore_test_dispatch_kernels", mod)
    monkeypatch.setattr(lazy, "_cache", {})   # a name imported before (another run of this test) is cached
    _, n = unary()
    rk = resolve_node(n, table(K(impl="srcore_test_dispatch_kernels:neg")), ["cpu"])
    assert rk.fn is mod.neg and rk.specialized is None and rk.kind == "out" and rk.backend == "cpu"
    assert not rk.checks_dtypes and rk.reason is None
    k = K(backend="acc", kind="native", matcher="srcore_test_dispatch_kernels:match")
    rk = resolve_node(n, table(k), ["acc"])
    assert rk.fn is mod.neg and rk.specialized is None and rk.kind == "native" and rk.backend == "acc"
    assert rk.kernel is k
    spec = Specialized(recorder("spec"), args=(0,))
    rk = resolve_node(n, table(K(backend="acc", kind="fallback", dtypes=("*",), matcher=lambda i: spec)), ["acc"])
    assert rk.specialized is spec and rk.fn is spec.fn and rk.kind == "fallback" and rk.backend == "acc"


def test_a_matcher_sees_its_node_once_and_only_when_asked():
    _, n = unary()
    seen = []

    def m(info):
        seen.append(info)
        return None

    assert resolve_node(n, table(K(name="plain")), ["cpu"]).fn.__name__ == "plain"
    assert resolve_node(n, table(K(matcher=m, plugin="a"), K(matcher=m, plugin="b")), ["cpu"]) is None
    assert len(seen) == 2 and seen[0] is seen[1] and seen[0].op == "t::f"


def test_garbage_from_a_matcher_names_the_plugin():
    _, n = unary()
    bad = Kernel("t::f", "cpu", "native", ("float32",), np.negative, matcher=lambda i: 42)
    with pytest.raises(srcore.PluginError, match=r"^plugin \? \(None\): matcher of the native kernel for t::f "
                       r"returned 42; expected a callable, a Specialized or None$"):
        resolve_node(n, table(bad), ["cpu"])


# -- choices -----------------------------------------------------------------------------------------------
def test_kinds_keep_their_order_whatever_order_the_caller_gives():
    _, n = unary()
    t = table(K(kind="fallback", dtypes=("*",), name="fb"), K(kind="out", name="out"), K(kind="native", name="nat"))
    assert chosen(n, t, kinds=("fallback", "native", "out")) == "out"
    assert chosen(n, t, kinds=("fallback", "native")) == "nat"
    assert chosen(n, t, kinds=("fallback",)) == "fb"
    assert chosen(n, t, kinds=()) is None


def test_explicit_dtypes_replace_the_nodes():
    _, n = unary()
    t = table(K(dtypes=("float64",), name="f64"), K(kind="native", name="f32"))
    assert chosen(n, t) == "f32"
    assert chosen(n, t, dtypes=("float64",)) == "f64"
    rk = resolve_node(n, t, ["cpu"], dtypes=("float64",))
    assert not rk.checks_dtypes and rk.fn.__name__ == "f64"   # given dtypes are known dtypes: no guard


def test_a_node_whose_inputs_fit_no_declared_overload_gets_no_kernel_by_name():
    reg = registry("t::f.a(Tensor self, int k) -> Tensor")
    _, n = unary()    # one input: fits no overload of t::f
    t = table(K("t::f", name="by-name"), schemas=reg)
    assert resolve_node(n, t, ["cpu"]) is None
    assert resolve_node(n, table(K("t::f", name="by-name"), schemas=registry()), ["cpu"]).fn.__name__ == "by-name"
    assert R._declared_overloads(n, table(schemas=object())) == ()
    assert R._declared_overloads(n, t) == (reg.get("t::f.a"),)


def test_unknown_numpy_dtypes_take_the_most_general_kernel_over_all_backends_and_check_at_run_time():
    _, n = unary(t_in=UNK, t_out=F32)
    narrow = K(backend="quant", dtypes=("float32",), name="narrow")
    wide = K(backend="cpu", kind="native", dtypes=("float32", "float64", "int64"), name="wide")
    wider_plugin = K(backend="cpu", dtypes=("float32", "quint8", "qint8", "qint32"), name="plugin-wide")
    fb = K(backend="quant", kind="fallback", dtypes=("*",), name="fb")
    t = table(narrow, wide, wider_plugin, fb)
    rk = resolve_node(n, t, ["quant", "cpu"])
    assert rk.fn.__wrapped__.__name__ == "wide" and rk.checks_dtypes and rk.kind == "native" and rk.reason is None
    assert rk.fn(np.zeros(2, np.float64)) == "wide"
    with pytest.raises(srcore.KernelError, match=r"^t::f: the native kernel of srcore-p 1.0 on cpu lists dtypes "
                       r"\(float32, float64, int64\) but got a int32 array"):
        rk.fn(np.zeros(2, np.int32))
    # a "*" kernel is the most general; it checks only that no array is quantized ("*" leaves those
    # out), and with "quantized" too nothing; a fallback only after every out and native
    star = K(backend="quant", kind="native", dtypes=("*",), name="star")
    rk = resolve_node(n, table(narrow, wide, star, fb), ["cpu", "quant"])
    assert rk.fn.__wrapped__.__name__ == "star" and rk.checks_dtypes
    assert rk.fn(np.zeros(2, np.int32)) == "star"
    q = srcore.QuantizedArray(np.zeros(2, np.uint8), "quint8", srcore.QParams(0.5, 0))
    with pytest.raises(srcore.KernelError, match=r"lists dtypes \(\*\) but got a quint8 array"):
        rk.fn(q)
    with pytest.raises(srcore.KernelError, match="got a quint8 array"):
        rk.fn([np.zeros(2), q])                 # in a list
    with pytest.raises(srcore.KernelError, match="got a quint8 array"):
        rk.fn(np.zeros(2), other=q)             # by keyword
    assert rk.fn(np.zeros(2), [np.zeros(1, np.int8)], out=q) == "star"   # not ``out``: a planned buffer
    star_q = K(backend="quant", kind="native", dtypes=("*", "quantized"), name="star-q")
    rk = resolve_node(n, table(narrow, wide, star, star_q, fb), ["cpu", "quant"])
    assert rk.fn.__name__ == "star-q" and not rk.checks_dtypes and rk.fn(q) == "star-q"
    rk = resolve_node(n, table(narrow, fb), ["quant"])
    assert rk.fn.__wrapped__.__name__ == "narrow"
    rk = resolve_node(n, table(fb, K(dtypes=("float64",))), ["quant", "cpu"])
    assert rk.fn.__wrapped__.__name__ == "fb" and rk.kind == "fallback" and rk.checks_dtypes and rk.reason


def test_an_unknown_dtype_beside_a_plugins_keeps_the_backend_order():
    _, n = unary(t_in=UNK, t_out=Q8)
    first = K(backend="quant", dtypes=("quint8",), name="quant-narrow")
    first_wide = K(backend="quant", dtypes=("quint8", "uint8"), name="quant-wide", plugin="z")
    later = K(backend="cpu", dtypes=("*",), name="cpu-star")
    rk = resolve_node(n, table(first, first_wide, later), ["quant", "cpu"])
    assert rk.fn.__wrapped__.__name__ == "quant-wide" and rk.checks_dtypes
    assert rk.fn(np.zeros(2, np.uint8)) == "quant-wide"
    arr = np.zeros(2, np.uint8).view(type("QuantizedArray", (np.ndarray,), {}))
    arr.qdtype = "qint8"
    with pytest.raises(srcore.KernelError, match="got a qint8 array"):
        rk.fn(arr)
    # cpu first: its "*" kernel does not take the known quint8 output ("*" leaves quantized dtypes out)
    assert chosen(n, table(first, first_wide, later), ["cpu", "quant"]) == "quant-wide"
    later_q = K(backend="cpu", dtypes=("*", "quantized"), name="cpu-star-q")
    assert chosen(n, table(first, first_wide, later_q), ["cpu", "quant"]) == "cpu-star-q"
    # known dtypes: table order, not generality
    _, m = unary(t_in=Q8, t_out=Q8)
    rk = resolve_node(m, table(first, first_wide, later), ["quant", "cpu"])
    assert rk.fn.__name__ == "quant-narrow" and not rk.checks_dtypes


def test_the_dtype_guard_checks_lists_and_keywords_but_not_out():
    k = K(dtypes=("float32",), kind="native")
    fn = dtype_guard(recorder("g"), k, "t::f")
    f32, i64 = np.zeros(2, np.float32), np.zeros(2, np.int64)
    assert fn(f32, [f32, 3], (f32,), alpha=2, other=f32, out=i64) == "g"
    for bad in ([f32, i64], (i64,)):
        with pytest.raises(srcore.KernelError, match="got a int64 array"):
            fn(f32, bad)
    with pytest.raises(srcore.KernelError, match="got a int64 array"):
        fn(f32, other=i64)
    assert fn.__name__ == "g" and fn.__wrapped__.__name__ == "g"
    # plain arrays are matched by dtype object, anything else by name: a byte-swapped float32 is a
    # float32, a uint8 subclass claiming a quantized dtype is not a uint8
    assert fn(np.zeros(2, ">f4"), [np.zeros(2, ">f4")]) == "g"
    q = np.zeros(2, np.uint8).view(type("QuantizedArray", (np.ndarray,), {}))
    q.qdtype = "quint8"
    with pytest.raises(srcore.KernelError, match="got a quint8 array"):
        dtype_guard(recorder("u"), K(dtypes=("uint8",), kind="native"), "t::f")(q)
    anon = dtype_guard(lambda *a: "x", Kernel(
        "t::f", "cpu", "out", ("float32",), np.negative), "t::f")
    assert anon.__name__ == "<lambda>"
    with pytest.raises(srcore.KernelError, match=r"^t::f: the out kernel of an unregistered plugin on cpu lists "
                       r"dtypes \(float32\) but got a int64 array \(its dtype was unknown when the model was "
                       r"loaded; give the inputs' dtypes\)$"):
        anon(i64)
    plain = dtype_guard(np.negative, K(dtypes=("float32",), plugin="q", dist=False, version=None), "t::f")
    with pytest.raises(srcore.KernelError, match=r"of q on cpu"):
        plain(i64)
    assert plain.__name__ == "negative"
    nameless = dtype_guard(types.SimpleNamespace(), K(), "t::f")
    assert nameless.__name__ == "kernel"


# -- why a fallback ----------------------------------------------------------------------------------------
def test_the_fallback_reason_says_what_was_missing():
    reg = registry("t::f(Tensor self) -> Tensor")
    _, n = unary(schema="t::f(Tensor self) -> Tensor")
    fb = K(kind="fallback", dtypes=("*",), name="fb", plugin="torch", version="2.0")
    rk = resolve_node(n, table(fb, schemas=reg), ["cpu"])
    assert rk.reason == "no out or native kernel for t::f on cpu"
    rk = resolve_node(n, table(fb, schemas=registry()), ["cpu"])
    assert rk.reason == ("no out or native kernel for t::f on cpu (an op srcore does not declare; "
                         "its schema came with the model)")
    others = (K(dtypes=("float64",)), K(dtypes=("float64",), plugin="p"), K(kind="native", dtypes=("int8", "int16"),
              plugin="q", dist=False, version=None), K(backend="gpu", dtypes=("float32",)))
    rk = resolve_node(n, table(fb, *others, schemas=reg), ["cpu", "acc"])
    assert rk.reason == ("no out or native kernel for t::f takes dtypes (float32): out kernel of srcore-p 1.0 on "
                         "cpu takes (float64); native kernel of q on cpu takes (int8, int16)")
    # the gpu kernel is not on the requested backends: it does not count
    rk = resolve_node(n, table(fb, K(backend="gpu"), schemas=reg), ["cpu"])
    assert rk.reason == "no out or native kernel for t::f on cpu"
    g = Graph()
    c = g.insert("t::c", [], [INT])
    assert R.fallback_reason(c, "t::c", (), table(K("t::c", dtypes=("int8",)), schemas=reg), ["cpu", "x"]) == (
        "no out or native kernel for t::c takes dtypes (none): out kernel of srcore-p 1.0 on cpu takes (int8)")
    assert R.fallback_reason(c, "t::c", (), table(fb, schemas=reg), ["cpu", "x"]) == (
        "no out or native kernel for t::c on cpu, x (an op srcore does not declare; its schema came with the model)")


def test_who():
    assert R._who(K(plugin="a", dist="srcore-a", version="2")) == "srcore-a 2"
    assert R._who(K(plugin="a", dist=False, version=None)) == "a"
    assert R._who(Kernel("t::f", "cpu", "out", ("float32",), np.negative)) == "?"


# -- what an unsupported node's error says -----------------------------------------------------------------
def test_alternatives_say_why_each_kernel_was_not_taken():
    g = Graph()
    x = g.add_input(F32, "x")
    n = g.insert("t::f", [x], [F32], source=SourceLocation("m.py", 3))
    declined = K(plugin="d", matcher=lambda info: None)
    t = table(K(backend="gpu", plugin="g"), K(kind="native", dtypes=("float64",)), K(kind="fallback",
              dtypes=("*",), plugin="fb"), declined, K(kind="native", dtypes=("float64", "int8"), plugin="p"))
    with pytest.raises(srcore.UnsupportedOpError) as ei:
        resolve_graph(g, t, ["cpu"], kinds=("native", "out"))
    err = ei.value
    (m,) = err.missing
    assert m.node is n and m.op == "t::f" and m.schema == "t::f" and m.dtypes == ("float32",)
    assert m.source == "m.py:3"
    assert m.alternatives == (
        "no schema is known for this op",
        "srcore-d 1.0 has an out kernel on cpu, but its matcher declined this node",
        "srcore-p 1.0 has a native kernel for dtypes (float64) on cpu",
        "srcore-p 1.0 has a native kernel for dtypes (float64, int8) on cpu",
        "srcore-fb 1.0 has a fallback kernel on cpu, but fallback kernels are off (Options(allow_fallback=False), "
        "--no-fallback)",
        "srcore-g 1.0 has an out kernel for backend gpu")
    assert str(err) == "\n".join([
        "1 node(s) have no kernel on backend(s) cpu:",
        "  t::f with dtypes (float32)  # m.py:3",
        *(f"      {a}" for a in m.alternatives)])
    assert err.hint == "install or enable a plugin that provides them ('srcore list-ops' shows what is installed)"
    off = R._alternatives("t::f", ("float32",), table(K()), ("cpu",), ("native", "fallback"))
    assert off == ("srcore-p 1.0 has an out kernel on cpu, but out kernels are off for this load",)
    assert R._alternatives("t::f", ("float32",), table(K(), K(plugin="p", priority=1)), ("cpu",)) == (
        "srcore-p 1.0 has an out kernel on cpu, but its matcher declined this node",)


def test_describe_an_unsupported_node():
    u = R.Unsupported(None, "t::f", "t::f(Tensor self) -> Tensor", (), None, ("a", "b"))
    assert u.describe() == "  t::f(Tensor self) -> Tensor with dtypes (no tensors)\n      a\n      b"
    u = R.Unsupported(None, "t::f", "t::f", ("float32", "int64"), "m.py:1", ())
    assert u.describe() == "  t::f with dtypes (float32, int64)  # m.py:1"


def test_a_node_that_fits_no_overload_lists_the_overloads():
    reg = registry("t::f.a(Tensor self, int k) -> Tensor", "t::f.b(Tensor self, Tensor other) -> Tensor")
    g, n = unary(source=SourceLocation("m.py", 9, 1))
    t = table(K("t::f", name="by-name"), schemas=reg)
    with pytest.raises(srcore.UnsupportedOpError) as ei:
        resolve_graph(g, t, ["cpu"])
    (m,) = ei.value.missing
    assert m.alternatives == ("no overload of t::f takes these 1 input(s) and 1 output(s); the declared overloads "
                              "take:\n        t::f.a(Tensor self, int k) -> Tensor\n"
                              "        t::f.b(Tensor self, Tensor other) -> Tensor",)
    assert ei.value.hint == ("the nodes' arguments fit no overload: 'srcore list-ops --op NAME' lists each op's "
                             "overloads")


def test_an_undeclared_op_suggests_close_names():
    reg = registry("t::fo(Tensor self) -> Tensor", "t::foo.x(Tensor self) -> Tensor", "u::bar(Tensor self) -> Tensor")
    g, n = unary("t::fooo")
    t = table(K("t::fooo", dtypes=("int8",), plugin="k"), schemas=reg)
    with pytest.raises(srcore.UnsupportedOpError) as ei:
        resolve_graph(g, t, ["cpu"])
    (m,) = ei.value.missing
    assert m.alternatives == ("no op 't::fooo' is declared by srcore or any installed plugin (did you mean t::foo, "
                              "t::fo?)", "srcore-k 1.0 has an out kernel for dtypes (int8) on cpu")
    assert ei.value.hint.startswith("install or enable a plugin")
    assert R._schema_problem(n, table(schemas=object())) == "no schema is known for this op"
    assert R._schema_problem(n, table(schemas=registry("z::q(Tensor self) -> Tensor"))) == (
        "no op 't::fooo' is declared by srcore or any installed plugin")


def test_an_out_form_nobody_implements_is_no_overload():
    reg = registry("t::r(Tensor self) -> Tensor", "t::r.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
                   "t::r.k(Tensor self, int k, int j) -> Tensor")
    g = Graph()
    x = g.add_input(F32, "x")
    n = g.insert("t::r", [x, x], [F32])
    g.register_output(n.output)
    t = table(K("t::r", name="plain"), schemas=reg)
    with pytest.raises(srcore.UnsupportedOpError) as ei:
        resolve_graph(g, t, ["cpu"])
    (m,) = ei.value.missing
    assert m.schema == f"t::r({F32}, {F32})"
    assert m.alternatives == (
        f"no overload of t::r takes these 2 input(s) ({F32}, {F32}): they fit only the out= form t::r.out, which no "
        "installed plugin implements; the other overloads take:\n        t::r(Tensor self) -> Tensor"
        "\n        t::r.k(Tensor self, int k, int j) -> Tensor",)
    assert ei.value.hint.startswith("the nodes' arguments fit no overload")
    schema = reg.get("t::r.out")
    assert R._out_form_only(n, schema, table(K("t::r.out"), schemas=reg)) is None
    assert R._out_form_only(n, reg.get("t::r"), t) is None and R._out_form_only(n, None, t) is None
    alone = registry("t::r.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")
    assert R._out_form_only(n, alone.get("t::r.out"), table(schemas=alone)).endswith("which no installed plugin "
                                                                                     "implements")
    assert R._out_form_only(n, schema, table()).endswith("implements")


def test_resolve_graph_walks_nested_blocks_takes_fixed_kernels_and_logs_fallbacks(caplog):
    g = Graph()
    x = g.add_input(F32, "x")
    c = g.add_input(BOOL, "c")
    outer = g.insert("prim::If", [c], [F32])
    then, other = outer.add_block(), outer.add_block()
    loop = g.create("prim::Loop", [], [])
    then.append(loop)
    body = loop.add_block()
    deep = g.create("t::deep", [x], [F32], source=SourceLocation("m.py", 5))
    body.append(deep)
    then.register_output(x)
    fixed_node = g.create("t::engine", [x], [F32])
    other.append(fixed_node)
    other.register_output(fixed_node.output)
    top = g.insert("t::top", [outer.output], [F32])
    g.register_output(top.output)
    engine = R.ResolvedKernel(K("t::engine", backend="eng"), recorder("engine"), None, "native", "eng")
    t = table(K("t::deep", kind="fallback", dtypes=("*",), name="deep-fb", plugin="torch", dist=False, version=None),
              K("t::top", name="top"))
    with caplog.at_level(logging.INFO, logger="srcore.dispatch"):
        got = resolve_graph(g, t, ["cpu"], fixed={fixed_node: engine})
    assert set(got) == {deep, fixed_node, top} and got[fixed_node] is engine
    assert got[deep].fn.__name__ == "deep-fb" and got[top].fn.__name__ == "top"
    assert [r.getMessage() for r in caplog.records] == [
        "t::deep runs on the fallback kernel of torch on cpu (no out or native kernel accepts it)  # m.py:5"]
    assert caplog.records[0].levelno == logging.INFO
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="srcore.dispatch"):
        resolve_graph(g, t, iter(["cpu"]), fixed={fixed_node: engine})
    assert [r.getMessage() for r in caplog.records] == [
        "t::deep runs on the fallback kernel of torch on cpu (no out or native kernel accepts it)  # m.py:5",
        "t::top -> t::top out kernel on cpu (srcore-p)"]
    with pytest.raises(srcore.UnsupportedOpError, match="t::engine"):
        resolve_graph(g, t, ["cpu"])
    R._log_choice(top, R.ResolvedKernel(Kernel("t::top", "cpu", "fallback", ("*",), np.negative), np.negative,
                                        None, "fallback", "cpu"))


def test_every_missing_node_is_listed_with_a_mixed_hint():
    reg = registry("t::f.a(Tensor self, int k) -> Tensor")
    g = Graph()
    x = g.add_input(F32, "x")
    a = g.insert("t::f", [x], [F32])
    b = g.insert("t::g", [a.output], [F32])
    g.register_output(b.output)
    with pytest.raises(srcore.UnsupportedOpError) as ei:
        resolve_graph(g, table(schemas=reg), ("cpu", "acc"))
    assert [m.node for m in ei.value.missing] == [a, b]
    assert str(ei.value).startswith("2 node(s) have no kernel on backend(s) cpu, acc:\n  t::f with dtypes (float32)")
    assert ei.value.hint.startswith("install or enable")


# -- the plugin hook API: a test plugin whose kernels record what ran --------------------------------------
def test_a_plugins_kernels_are_chosen_by_dtype_and_run_through_a_static_module():
    from srcore.plugin import Backend, OpLibrary, ShapeRule, hookimpl
    from srcore.plugin.manager import PluginManager

    def rec(name):
        def fn(x, *, out=None):
            RAN.append(name)
            res = np.negative(x) if name.endswith("neg") else np.abs(x)
            if out is not None:
                out[...] = res
                return out
            return res
        return fn

    class Plugin:
        @hookimpl
        def srcore_op_libraries(self):
            yield OpLibrary("tdisp", schemas=("tdisp::f(Tensor self) -> Tensor",))

        @hookimpl
        def srcore_backends(self):
            yield Backend("tdb", "a test backend")

        @hookimpl
        def srcore_shape_rules(self):
            yield ShapeRule(("tdisp::f",), lambda ctx: [ctx.tensor(0, "self")])

        @hookimpl
        def srcore_kernels(self):
            yield Kernel("tdisp::f", "tdb", "native", ("float32",), rec("f32-neg"))
            yield Kernel("tdisp::f", "tdb", "out", ("float64",), rec("f64-abs"))
            yield Kernel("tdisp::f", "tdb", "fallback", ("*",), rec("any-abs"))

    pm = PluginManager().load(entry_points=False)
    pm.register(Plugin(), "tdisp", dist="srcore-tdisp", version="0.1")
    for dtype, text, name in (("float32", "Float", "f32-neg"), ("float64", "Double", "f64-abs"),
                              ("int64", "Long", "any-abs")):
        g = srcore.parse_graph(f"graph(%x : {text}(3)):\n  %y : Tensor = tdisp::f(%x)\n  return (%y)\n")
        sm = srcore.StaticModule(g, options=srcore.Options(backends=("tdb",)), plugin_manager=pm)
        (rk,) = sm.resolved_kernels.values()
        assert not rk.checks_dtypes and rk.kind == {"f32-neg": "native", "f64-abs": "out"}.get(name, "fallback")
        RAN.clear()
        x = np.array([-1, 2, -3], dtype)
        got = sm(x)
        assert RAN == [name]
        np.testing.assert_array_equal(got, -x if name.endswith("neg") else np.abs(x))


# -- kernels named by "module:attribute" -------------------------------------------------------------------
def test_import_ref_follows_dotted_attributes_and_caches(monkeypatch):
    mod = types.ModuleType("srcore_test_lazy_refs")
    mod.ns = types.SimpleNamespace(inner=types.SimpleNamespace(fn=recorder("deep")))
    monkeypatch.setitem(__import__("sys").modules, "srcore_test_lazy_refs", mod)
    monkeypatch.setattr(lazy, "_cache", {})
    assert lazy.import_ref("srcore_test_lazy_refs:ns.inner.fn") is mod.ns.inner.fn
    assert lazy._cache == {"srcore_test_lazy_refs:ns.inner.fn": mod.ns.inner.fn}
    mod.ns.inner.fn = None   # cached: not looked up again
    assert lazy.import_ref("srcore_test_lazy_refs:ns.inner.fn").__name__ == "deep"
    assert lazy.import_ref("srcore_test_lazy_refs:ns") is mod.ns


def test_resolve_ref_passes_callables_imports_strings_and_names_every_failure(monkeypatch):
    from srcore.dispatch.lazy import resolve_ref

    mod = types.ModuleType("srcore_test_lazy_refs2")
    mod.fn = recorder("fn")
    mod.data = 3
    monkeypatch.setitem(__import__("sys").modules, "srcore_test_lazy_refs2", mod)
    monkeypatch.setattr(lazy, "_cache", {})
    who = PluginInfo("lz", "srcore-lz", "0.3")
    assert resolve_ref(np.negative, provider=None, op="t::f") is np.negative
    assert resolve_ref("srcore_test_lazy_refs2:fn", provider=who, op="t::f") is mod.fn

    class AtLoad:
        ref = "pkg:thing"

        def __init__(self, result):
            self.result = result

        def resolve_at_load(self):
            if isinstance(self.result, Exception):
                raise self.result
            return self.result

    assert resolve_ref(AtLoad(np.abs), provider=who, op="t::f") is np.abs
    with pytest.raises(srcore.PluginError, match=r"^plugin lz \(srcore-lz 0.3\): cannot import impl 'pkg:thing' of "
                       r"the kernel for t::g: KeyError: 'x'$") as ei:
        resolve_ref(AtLoad(KeyError("x")), provider=who, op="t::g")
    assert isinstance(ei.value.__cause__, KeyError)
    with pytest.raises(srcore.PluginError, match=r"^an unregistered kernel: cannot import matcher "
                       r"'srcore_test_lazy_refs2:nope' of the kernel for t::f \(declared at k.yaml:3\): "
                       r"AttributeError: "):
        resolve_ref("srcore_test_lazy_refs2:nope", provider=None, op="t::f", what="matcher", source="k.yaml:3")
    with pytest.raises(srcore.PluginError, match=r"^plugin lz \(srcore-lz 0.3\): impl 'srcore_test_lazy_refs2:data' "
                       r"of the kernel for t::f is not callable$"):
        resolve_ref("srcore_test_lazy_refs2:data", provider=who, op="t::f")
    with pytest.raises(srcore.PluginError, match=r"^an unregistered kernel: matcher 'pkg:thing' of the kernel for "
                       r"t::f \(declared at here\) is not callable$"):
        resolve_ref(AtLoad(5), provider=None, op="t::f", what="matcher", source="here")
    no_ref = AtLoad(7)
    del AtLoad.ref
    with pytest.raises(srcore.PluginError, match=r"impl <.*AtLoad object at .*> of the kernel"):
        resolve_ref(no_ref, provider=None, op="t::f")


# -- written for the survivors of the mutation run -----------------------------------------------------------
def test_an_impl_or_matcher_that_fails_to_import_names_plugin_op_and_declaration(monkeypatch):
    monkeypatch.setattr(lazy, "_cache", {})
    _, n = unary()
    impl = K(impl="srcore_test_no_such_module:f", plugin="imp", version="0.4", source="kernels.yaml:12")
    with pytest.raises(srcore.PluginError, match=r"^plugin imp \(srcore-imp 0.4\): cannot import impl "
                       r"'srcore_test_no_such_module:f' of the kernel for t::f \(declared at kernels.yaml:12\): "
                       r"ModuleNotFoundError"):
        resolve_node(n, table(impl), ["cpu"])
    matcher = K(matcher="srcore_test_no_such_module:m", plugin="mat", version="0.5", source="kernels.yaml:13")
    with pytest.raises(srcore.PluginError, match=r"^plugin mat \(srcore-mat 0.5\): cannot import matcher "
                       r"'srcore_test_no_such_module:m' of the kernel for t::f \(declared at kernels.yaml:13\): "
                       r"ModuleNotFoundError"):
        resolve_node(n, table(matcher), ["cpu"])


def test_a_node_without_a_schema_dispatches_on_the_overload_its_registry_resolves():
    reg = registry("t::f.one(Tensor self) -> Tensor", "t::f.two(Tensor self, Tensor other) -> Tensor")
    _, n = unary()
    t = table(K("t::f.one", name="one"), K("t::f", name="by-name"), K("t::f.two", name="two"), schemas=reg)
    assert chosen(n, t) == "one"
    seen = []
    resolve_node(n, table(K("t::f.one", matcher=lambda info: seen.append(info)), schemas=reg), ["cpu"])
    assert seen[0].op == "t::f.one" and seen[0].schema is reg.get("t::f.one")
    assert [a.name for a in seen[0].args] == ["self"]


def test_an_unsupported_node_with_a_schema_is_shown_with_it_and_its_overload():
    reg = registry("t::f.one(Tensor self) -> Tensor")
    g, n = unary()
    t = table(K("t::f.one", backend="gpu", plugin="g"), K("t::f", backend="gpu", plugin="h"), schemas=reg)
    with pytest.raises(srcore.UnsupportedOpError) as ei:
        resolve_graph(g, t, ["cpu"])
    (m,) = ei.value.missing
    assert m.op == "t::f.one" and m.schema == "t::f.one(Tensor self) -> Tensor"
    assert m.alternatives == ("srcore-g 1.0 has an out kernel for backend gpu",)


def test_fallback_reason_counts_an_op_unknown_to_a_table_without_registry_as_undeclared():
    g = Graph()
    x = g.add_input(F32, "x")
    n = g.insert("t::f", [x], [TensorType("int64", (2,))])
    fb = K(kind="fallback", dtypes=("*",))
    assert resolve_node(n, table(fb), ["cpu"]).reason == (
        "no out or native kernel for t::f on cpu (an op srcore does not declare; its schema came with the model)")
    assert resolve_node(n, table(fb, K(kind="native")), ["cpu"]).reason == (
        "no out or native kernel for t::f takes dtypes (float32, int64): native kernel of srcore-p 1.0 on cpu "
        "takes (float32)")


def test_at_most_three_close_names_are_suggested_and_the_fallback_log_names_an_unknown_plugin(caplog):
    reg = registry(*(f"t::{name}(Tensor self) -> Tensor" for name in ("abcd", "abce", "abcf", "abcg")))
    g, n = unary("t::abc")
    text = R._schema_problem(n, table(schemas=reg))
    # equally close: difflib lists the names that sort last first
    assert text.endswith("(did you mean t::abcg, t::abcf, t::abce?)"), text
    with caplog.at_level(logging.INFO, logger="srcore.dispatch"):
        R._log_choice(n, R.ResolvedKernel(Kernel("t::abc", "cpu", "fallback", ("*",), np.negative), np.negative,
                                          None, "fallback", "cpu"))
    assert [r.getMessage() for r in caplog.records] == [
        "t::abc runs on the fallback kernel of ? on cpu (no out or native kernel accepts it)"]


def test_a_plugin_named_its_gets_the_install_hint():
    """The overload hint was also given when the first alternative began with "its ", which nothing
    writes but a plugin named ``its`` ("its 1.0 has an out kernel for backend gpu")."""
    g, n = unary(schema="t::f(Tensor self) -> Tensor")
    for dist in ("its", False):
        t = table(K(backend="gpu", plugin="its", dist=dist))
        with pytest.raises(srcore.UnsupportedOpError) as ei:
            resolve_graph(g, t, ["cpu"])
        assert ei.value.missing[0].alternatives == ("its 1.0 has an out kernel for backend gpu",)
        assert ei.value.hint.startswith("install or enable a plugin")


def test_the_dtype_guard_passes_every_argument_on():
    fn = dtype_guard(lambda *args, **kwargs: (args, kwargs), K(dtypes=("float32",)), "t::f")
    f32 = np.zeros(2, np.float32)
    args, kwargs = fn(f32, 2, alpha=3, out=f32)
    assert args[0] is f32 and args[1] == 2 and kwargs == {"alpha": 3, "out": f32}

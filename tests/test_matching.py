"""Overload resolution and matching against torch's own choice (``node.schema()``)."""
from __future__ import annotations

import warnings
from typing import List, Optional

import pytest

import srcore
from srcore.ir import types as T
from srcore.ir.graph import Graph
from srcore.ops import matching
from srcore.ops.registry import default_registry
from srcore.ops.schema import FunctionSchema

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

@pytest.fixture(scope="module")
def reg(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("SRCORE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))  # never the user's cache
    yield default_registry()
    mp.undo()


def node(kind, in_types, out_types=(T.TENSOR,)):
    g = Graph()
    return g.create(kind, [g.add_input(t) for t in in_types], list(out_types))


@pytest.mark.parametrize("kind,ins,outs,want", [
    ("aten::add", [T.TENSOR, T.TENSOR, T.INT], [T.TENSOR], "aten::add.Tensor"),
    ("aten::add", [T.TENSOR, T.TENSOR], [T.TENSOR], "aten::add.Tensor"),  # alpha defaulted
    ("aten::add", [T.INT, T.INT], [T.INT], "aten::add.int"),
    ("aten::add", [T.FLOAT, T.INT], [T.FLOAT], "aten::add.float_int"),
    ("aten::add", [T.TENSOR, T.FLOAT, T.INT], [T.TENSOR], "aten::add.Scalar"),
    ("aten::mul", [T.TENSOR, T.FLOAT], [T.TENSOR], "aten::mul.Scalar"),
    ("aten::mul", [T.NUMBER, T.NUMBER], [T.NUMBER], "aten::mul"),
    ("aten::Float", [T.INT], [T.FLOAT], "aten::Float.Scalar"),  # torch: first match in order
    ("aten::div", [T.FLOAT, T.INT], [T.FLOAT], "aten::div"),
    ("aten::tensor", [T.ListType(T.INT), T.NONE, T.NONE, T.BOOL], [T.TENSOR], "aten::tensor"),
    ("aten::sum", [T.TENSOR, T.NONE], [T.TENSOR], "aten::sum"),  # fills it completely
    ("aten::size", [T.TENSOR, T.INT], [T.INT], "aten::size.int"),
    ("aten::size", [T.TENSOR], [T.ListType(T.INT)], "aten::size"),
    ("aten::max", [T.TENSOR, T.INT, T.BOOL], [T.TENSOR, T.TENSOR], "aten::max.dim"),
    ("aten::max", [T.TENSOR, T.TENSOR], [T.TENSOR], "aten::max.other"),
    ("aten::conv2d", [T.TENSOR, T.TENSOR, T.NONE, T.ListType(T.INT), T.ListType(T.INT),
                      T.ListType(T.INT), T.INT], [T.TENSOR], "aten::conv2d"),
    ("aten::conv2d", [T.TENSOR, T.TENSOR, T.NONE, T.INT], [T.TENSOR], "aten::conv2d"),  # int[2] <- int
    ("aten::to", [T.TENSOR, T.INT, T.BOOL, T.BOOL, T.NONE], [T.TENSOR], "aten::to.dtype"),
    ("aten::to", [T.TENSOR, T.DEVICE, T.INT, T.BOOL, T.BOOL, T.NONE], [T.TENSOR], "aten::to.device"),
    ("aten::index", [T.TENSOR, T.ListType(T.OptionalType(T.TENSOR))], [T.TENSOR], "aten::index.Tensor"),
    ("aten::index", [T.TENSOR, T.ListType(T.TENSOR)], [T.TENSOR], "aten::index.Tensor"),
    ("aten::len", [T.ListType(T.TENSOR)], [T.INT], "aten::len.t"),
    ("aten::len", [T.TENSOR], [T.INT], "aten::len.Tensor"),
    ("aten::__getitem__", [T.ListType(T.INT), T.INT], [T.INT], "aten::__getitem__.t"),
    ("aten::format", [T.STR, T.INT, T.TENSOR], [T.STR], "aten::format"),  # varargs
    ("prim::ListConstruct", [T.INT, T.INT], [T.ListType(T.INT)], "prim::ListConstruct"),
    ("prim::TupleUnpack", [T.TupleType((T.INT, T.TENSOR))], [T.INT, T.TENSOR], "prim::TupleUnpack"),
    ("prim::max", [T.INT, T.FLOAT], [T.FLOAT], "prim::max.int_float"),
    ("srcore::linear_relu", [T.TENSOR, T.TENSOR], [T.TENSOR], "srcore::linear_relu"),
    ("aten::relu", [T.ANY], [T.TENSOR], "aten::relu"),  # unknown type: accepted
])
def test_resolution(reg, kind, ins, outs, want):
    assert reg.resolve(node(kind, ins, outs)).qualified_name == want


def test_no_match_names_node_types_and_candidates(reg):
    n = node("aten::relu", [T.STR])
    with pytest.raises(srcore.VerificationError) as ei:
        reg.resolve(n)
    msg = str(ei.value)
    assert "aten::relu(str)" in msg and "aten::relu(Tensor self) -> Tensor" in msg
    with pytest.raises(srcore.VerificationError, match="no op 'foo::bar' is declared"):
        reg.resolve(node("foo::bar", [T.TENSOR]))
    # float does not implicitly take an int (TorchScript has no int -> float conversion)
    assert not matching.matches(node("x::f", [T.INT], [T.FLOAT]), FunctionSchema.parse("x::f(float a) -> float"))
    # too many inputs, missing required argument, wrong output count
    s = FunctionSchema.parse("x::g(Tensor a, int b, int c=1) -> Tensor")
    assert not matching.matches(node("x::g", [T.TENSOR] * 4), s)
    assert not matching.matches(node("x::g", [T.TENSOR]), s)
    assert not matching.matches(node("x::g", [T.TENSOR, T.INT], [T.TENSOR, T.TENSOR]), s)
    assert matching.matches(node("x::g", [T.TENSOR, T.INT]), s)


def test_type_rules():
    P = FunctionSchema.parse
    s = P("x::f(Scalar a, Device d, ScalarType? st, MemoryFormat m, Tensor?[] ix, int[2] k, t any, "
          "Dict(str, Tensor) dd, (int, float) tup) -> ()")
    ts = [a.type for a in s.arguments]
    ok = [(0, T.INT), (0, T.FLOAT), (0, T.BOOL), (0, T.NUMBER), (1, T.DEVICE), (1, T.STR), (2, T.NONE),
          (2, T.INT), (2, T.SCALAR_TYPE), (3, T.INT), (4, T.ListType(T.TENSOR)),
          (4, T.ListType(T.OptionalType(T.TENSOR))), (5, T.INT), (5, T.ListType(T.INT)), (6, T.TENSOR),
          (6, T.ListType(T.STR)), (7, T.DictType(T.STR, T.TENSOR)), (8, T.TupleType((T.INT, T.FLOAT)))]
    bad = [(0, T.TENSOR), (0, T.STR), (1, T.INT), (2, T.FLOAT), (3, T.NONE), (4, T.TENSOR),
           (5, T.FLOAT), (5, T.ListType(T.FLOAT)), (7, T.DictType(T.INT, T.TENSOR)),
           (8, T.TupleType((T.INT, T.INT))), (8, T.TupleType((T.INT,)))]
    for i, t in ok:
        assert matching.type_score(ts[i], t) is not None, (str(ts[i]), str(t))
    for i, t in bad:
        assert matching.type_score(ts[i], t) is None, (str(ts[i]), str(t))
    # TorchScript subtyping is free, conversions cost: int is a Scalar, a str only converts to Device
    assert matching.type_score(ts[0], T.NUMBER) == matching.type_score(ts[0], T.INT) == 0
    assert matching.type_score(ts[1], T.DEVICE) < matching.type_score(ts[1], T.STR)
    assert matching.type_score(ts[5], T.ListType(T.INT)) < matching.type_score(ts[5], T.INT)
    assert matching.type_score(ts[0], T.INT) < matching.type_score(ts[0], T.ANY)


def test_bind_defaults(reg):
    s = reg.get("aten::conv2d")
    n = node("aten::conv2d", [T.TENSOR, T.TENSOR])
    assert matching.bind_defaults(n, s) == [None, [1, 1], [0, 0], [1, 1], 1]
    ln = reg.get("aten::layer_norm")
    got = matching.bind_defaults(node("aten::layer_norm", [T.TENSOR, T.ListType(T.INT)]), ln)
    assert got == [None, None, 1e-05, True]
    assert matching.bind_defaults(node("aten::conv2d", [T.TENSOR] * 7), s) == []
    with pytest.raises(srcore.VerificationError, match="no default for argument 'weight'"):
        matching.bind_defaults(node("aten::conv2d", [T.TENSOR]), s)


# -- against torch ------------------------------------------------------------------------------
def _ir_type(t):
    k = t.kind()
    simple = {"TensorType": T.TENSOR, "IntType": T.INT, "FloatType": T.FLOAT, "BoolType": T.BOOL,
              "StringType": T.STR, "NoneType": T.NONE, "DeviceObjType": T.DEVICE, "NumberType": T.NUMBER}
    if k in simple:
        return simple[k]
    if k == "ListType":
        return T.ListType(_ir_type(t.getElementType()))
    if k == "OptionalType":
        return T.OptionalType(_ir_type(t.getElementType()))
    if k == "TupleType":
        return T.TupleType(tuple(_ir_type(e) for e in t.elements()))
    return T.ANY


def _walk(nodes):
    for n in nodes:
        yield n
        for b in n.blocks():
            yield from _walk(b.nodes())


def _compare(reg, graph):
    """(nodes checked, mismatches) of srcore's resolution vs torch's node.schema()."""
    checked, wrong = 0, []
    for tn in _walk(graph.nodes()):
        text = tn.schema()
        if text == "(no schema)":
            continue
        want = FunctionSchema.parse(text).qualified_name
        n = node(tn.kind(), [_ir_type(v.type()) for v in tn.inputs()], [_ir_type(v.type()) for v in tn.outputs()])
        try:
            got = reg.resolve(n).qualified_name
        except srcore.VerificationError as e:
            got = f"error: {str(e).splitlines()[0]}"
        checked += 1
        if got != want:
            wrong.append((want, got))
    return checked, wrong


def _scripted_functions(torch):
    Tensor = torch.Tensor

    def ops(x: Tensor, y: Tensor, n: int, s: float):
        a = x + y
        b = a * 2.0
        c = b - 1
        d = torch.relu(c).to(torch.float64)
        k = x.size(0) + n
        m = k * 2 // 3
        z = torch.zeros([k, 2])
        w = torch.cat([x, y], dim=1)
        q = torch.softmax(w, -1)
        r = q.view(-1).sum(0, keepdim=True)
        t = torch.tensor([n, k])
        u = x.max(dim=1)[0]
        v = torch.clamp(x, min=0.0)
        e = torch.where(x > 0, x, y).flatten(1).unsqueeze(0)
        f = x.transpose(0, 1).contiguous().reshape([-1]).mean()
        g = torch.nn.functional.layer_norm(x, [x.size(1)])
        h = torch.nn.functional.gelu(x, approximate="tanh") / s
        i = x.new_zeros([2]) if n > 2 else x.new_ones([2])
        lst: List[int] = []
        for j in range(n):
            lst.append(j * 2)
        o: Optional[Tensor] = None
        if len(lst) > 1:
            o = x.mean(dim=[0, 1])
        return d, z, r, u, v, t, float(m) * s, e, f, g, h, i, lst[0], o, x.shape[-1], int(x.sum())

    def ints(a: int, b: int, fl: float) -> float:
        c = max(a, b) + min(a, 3) - a % b
        d = float(c) + fl ** 2
        return d / 2 + abs(fl) - a // b

    return [ops, ints]


def test_resolution_agrees_with_torch_on_scripted_functions(reg):
    torch = pytest.importorskip("torch")
    total = 0
    for fn in _scripted_functions(torch):
        checked, wrong = _compare(reg, torch.jit.script(fn).graph)
        assert wrong == [], fn.__name__
        total += checked
    assert total > 50


@pytest.mark.slow
def test_resolution_agrees_with_torch_on_bench_models(reg):
    torch = pytest.importorskip("torch")
    from benchmarks import models as mod  # the project's copy of the public bench set
    total = 0
    for name in ("mlp_tiny", "elementwise_chain", "resnet_small", "control_flow",
                 "transformer_block", "transformer_block_explicit"):
        model, inputs = mod.MODELS[name][0]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graphs = [torch.jit.freeze(torch.jit.script(model).eval()).graph]
            if name != "transformer_block":  # its trace fails torch's own sanity check
                graphs.append(torch.jit.freeze(torch.jit.trace(model, inputs).eval()).graph)
        for g in graphs:
            checked, wrong = _compare(reg, g)
            assert wrong == [], name
            total += checked
    assert total > 500


# -- the registry ---------------------------------------------------------------------------------
def test_registry_add_get_and_conflicts():
    from srcore.ops.registry import SchemaRegistry

    r = SchemaRegistry()
    relu = r.add("ex::relu(Tensor self) -> Tensor", provider="p1", source="a.yaml:1")
    r.add(relu, provider="p1", source="a.yaml:1")  # the same schema twice is fine
    add_t = r.add(FunctionSchema.parse("ex::add.Tensor(Tensor self, Tensor other) -> Tensor"), "p1")
    add_i = r.add(FunctionSchema.parse("ex::add.int(int a, int b) -> int"), "p1")
    assert r.get("ex::relu") is relu and "ex::relu" in r and "ex::add.Tensor" in r and "ex::add" not in r
    assert r.overloads("ex::add") == [add_t, add_i] and r.overloads("ex::nope") == []
    assert r.names() == ["ex::relu", "ex::add.Tensor", "ex::add.int"] and len(r) == 3
    assert r.provider("ex::relu") == "p1" and r.source("ex::relu") == "a.yaml:1"
    with pytest.raises(KeyError):
        r.get("ex::missing")
    assert r.find("ex::missing") is None
    with pytest.raises(srcore.RegistrationError, match=r"ex::relu is declared by p2 \(b.yaml:4\) and already by "
                                                        r"p1 \(a.yaml:1\)"):
        r.add(relu, provider="p2", source="b.yaml:4")
    with pytest.raises(srcore.RegistrationError, match="ex::relu"):
        r.add("ex::relu(Tensor self, int x) -> Tensor", provider="p1")


def test_default_registry_holds_the_core_files(reg):
    for q in ("aten::add.Tensor", "aten::add.out", "aten::conv2d", "aten::relu_", "prim::ListConstruct",
              "prim::If", "aten::__range_length", "srcore::linear_relu", "srcore::conv2d_add_relu"):
        assert q in reg, q
    assert reg.provider("aten::relu") == "srcore"
    assert reg.source("aten::relu").endswith(".yaml:" + reg.source("aten::relu").rsplit(":", 1)[1])
    fresh = default_registry()
    fresh.add("plug::f(Tensor x) -> Tensor", provider="plug")
    assert "plug::f" not in default_registry()  # each call is a new registry

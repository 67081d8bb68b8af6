"""GraphBuilder: ops, constants, params, multiple outputs, if/loop blocks, sources, effects."""
from __future__ import annotations

import numpy as np
import pytest

from srcore.ir.builder import GraphBuilder
from srcore.ir.alias import mutated_inputs
from srcore.ir.effects import has_side_effects
from srcore.ir.graph import SourceLocation
from srcore.ir.parser import parse_graph
from srcore.ir.printer import print_graph
from srcore.ir.types import BOOL, FLOAT, INT, NONE, STR, TENSOR, ListType, TensorType
from srcore.ir.verify import verify

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass


def test_mlp_like_graph_text():
    w = np.ones((64, 64), np.float32)
    b = GraphBuilder()
    x = b.input("x", TensorType("float32", ("batch", 64)))
    wv = b.param("fc1.weight", w)
    y = b.op("aten::linear", x, wv, None)
    z = b.op("aten::relu", y)
    b.output(z)
    g = b.graph
    verify(g)
    assert print_graph(g) == (
        "graph(%x : Float(batch, 64)):\n"
        '  %fc1.weight : Float(64, 64) = prim::Constant[param="fc1.weight"]()\n'
        "  %0 : NoneType = prim::Constant()\n"
        "  %1 : Tensor = aten::linear(%x, %fc1.weight, %0)\n"
        "  %2 : Tensor = aten::relu(%1)\n"
        "  return (%2)\n")
    assert wv.node.attrs["value"] is not None and wv.node.attrs["value"].shape == (64, 64)
    assert y.node.inputs[2].type == NONE


def test_constants_get_types():
    b = GraphBuilder()
    vals = [b.constant(v) for v in (1, 2.5, True, "s", None, [1, 2])]
    assert [v.type for v in vals] == [INT, FLOAT, BOOL, STR, NONE, ListType(INT)]
    assert vals[2].node.attrs["value"] is True


def test_multiple_outputs_and_names():
    b = GraphBuilder()
    t = b.input("t")
    a, c = b.op("prim::TupleUnpack", t, outputs=2, names=["a", "c"])
    assert (a.name, c.name) == ("a", "c") and a.node is c.node
    n = b.node("prim::Foo", a, output_types=[INT, TENSOR], attr=3)
    assert [o.type for o in n.outputs] == [INT, TENSOR] and n.attrs == {"attr": 3}
    assert b.op("prim::Sink", a, outputs=0) == ()
    with pytest.raises(ValueError):
        b.op("x::y", a, outputs=1, output_types=[INT, INT])


def test_if_and_loop_blocks():
    b = GraphBuilder()
    x = b.input("x")
    c = b.input("c", BOOL)
    with b.if_(c) as (then_, else_):
        with then_:
            then_.output(b.op("aten::relu", x))
        else_.output(x)
    r = then_.outputs[0]
    with b.loop(4, carried=[r]) as body:
        with body:
            y = b.op("aten::add", body.carried[0], body.index, 1)
        body.output(True, y)
    b.output(b.last.outputs[0])
    g = b.graph
    verify(g)
    if_, loop = [n for n in g.nodes if n.kind in ("prim::If", "prim::Loop")]
    assert if_.blocks[0].nodes.first.kind == "aten::relu" and if_.blocks[1].outputs == [x]
    assert loop.inputs[2] is r and loop.blocks[0].inputs[0].type == INT
    assert [n.kind for n in loop.blocks[0].nodes] == ["prim::Constant", "aten::add", "prim::Constant"]
    assert print_graph(parse_graph(print_graph(g))) == print_graph(g)


def test_if_block_output_count_checked():
    b = GraphBuilder()
    c = b.input("c", BOOL)
    with pytest.raises(ValueError, match="prim::If block returns 0"):
        with b.if_(c) as (t, e):
            t.output(c)


def test_source_locations():
    b = GraphBuilder()
    x = b.input("x")
    with b.at("m.py:3:7"):
        y = b.op("aten::relu", x)
    z = b.op("aten::neg", y, source=SourceLocation("n.py", 1))
    assert y.node.source == SourceLocation("m.py", 3, 7)
    assert z.node.source == SourceLocation("n.py", 1, None)
    assert b.op("aten::neg", z).node.source is None


def test_effects():
    g = parse_graph("""graph(%x : Tensor, %s : str):
  %n : NoneType = prim::Constant()
  = prim::RaiseException(%s, %n)
  %t : Tensor = aten::relu(%x)
  %u : Tensor = aten::add_(%t, %x)
  %v : Tensor = aten::relu(%x)
  %w : Tensor = aten::mul_(%v, %x)
  %k : Tensor = aten::mul(%v, %x)
  %m : Tensor = aten::mul_(%x, %x)
  %l : Tensor[] = prim::ListConstruct()
  %a : Tensor[] = aten::append(%l, %x)
  %z : Tensor = aten::relu(%t)
  return (%z, %l)
""")
    eff = {n.outputs[0].name if n.outputs else n.kind: has_side_effects(n) for n in g.nodes}
    assert eff["prim::RaiseException"] is True
    assert eff["u"] is True     # writes %t, which %z reads later
    assert eff["w"] is True     # writes %v, read later by %k
    assert eff["m"] is True     # writes the graph input
    assert eff["a"] is True     # appends to a list that is returned
    assert eff["t"] is False and eff["k"] is False and eff["z"] is False
    g2 = parse_graph("graph(%x : Tensor):\n  %t : Tensor = aten::relu(%x)\n"
                     "  %u : Tensor = aten::add_(%t, %x)\n  return (%x)\n")
    assert not has_side_effects(list(g2.nodes)[1])  # a dead temporary written in place
    assert mutated_inputs(list(g2.nodes)[1]) == [0]
    assert mutated_inputs(list(g2.nodes)[0]) == []


def test_effects_follow_the_schema():
    from srcore.ops.schema import FunctionSchema
    g = parse_graph("graph(%x : Tensor):\n  %t : Tensor = aten::relu(%x)\n"
                    "  %u : Tensor = my::fill(%x, %t)\n  return (%t)\n")
    fill = list(g.nodes)[1]
    fill.schema = FunctionSchema.parse("my::fill(Tensor self, Tensor(a!) out) -> Tensor(a!)")
    assert mutated_inputs(fill) == [1] and has_side_effects(fill)  # %t is returned
    fill.schema = FunctionSchema.parse("my::fill(Tensor self, Tensor out) -> Tensor")
    assert mutated_inputs(fill) == [] and not has_side_effects(fill)


def test_source_strings_with_colons():
    b = GraphBuilder()
    x = b.input("x")
    with b.at("C:/m.py:7"):
        y = b.op("aten::relu", x)
    with b.at("<stdin>"):
        z = b.op("aten::relu", y)
    assert y.node.source == SourceLocation("C:/m.py", 7, None)
    assert z.node.source == SourceLocation("<stdin>")


def test_lists_of_values_become_list_construct():
    b = GraphBuilder()
    x, y = b.input("x"), b.input("y")
    cat = b.op("aten::cat", [x, y], 1)
    lst = cat.node.inputs[0]
    assert lst.node.kind == "prim::ListConstruct" and lst.node.inputs == [x, y]
    assert lst.type == ListType(TENSOR)
    t = b.value((x, 2))
    assert t.node.kind == "prim::TupleConstruct" and t.node.inputs[1].constant_value() == 2
    assert str(t.type) == "(Tensor, int)"
    assert b.value([1, 2]).node.kind == "prim::Constant"  # plain Python lists stay constants
    b.output(cat)
    verify(b.graph)

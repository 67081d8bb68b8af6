"""IR core editing operations: insert, replace uses, destroy, move, copy, is_before."""
from __future__ import annotations

import pytest

from srcore.ir.graph import Graph
from srcore.ir.parser import parse_graph
from srcore.ir.printer import print_graph
from srcore.ir.types import INT, TENSOR
from srcore.ir.verify import verify

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

TEXT = """graph(%x : Tensor, %c : bool):
  %a : Tensor = aten::relu(%x)
  %r : Tensor = prim::If(%c)
    block0():
      %b : Tensor = aten::neg(%a)
      %r.1 : Tensor = prim::If(%c)
        block0():
          %d : Tensor = aten::tanh(%b)
          -> (%d)
        block1():
          -> (%b)
      -> (%r.1)
    block1():
      %e : Tensor = aten::exp(%a)
      -> (%e)
  %f : Tensor = aten::add(%r, %a)
  return (%f)
"""


def nodes_by_output(g):
    return {n.outputs[0].name: n for n in g.all_nodes() if n.outputs}


def test_insert_before_after_and_insert_point():
    g = parse_graph(TEXT)
    n = nodes_by_output(g)
    new = g.create("aten::sigmoid", [n["a"].output], [TENSOR], output_names=["s"])
    new.insert_after(n["a"])
    assert n["a"].next is new and new.next is n["r"]
    with g.inserting_before(n["f"]):
        k = g.insert("aten::cos", [new.output], [TENSOR])
    assert k.next is n["f"] and k.prev is n["r"]
    c = g.insert_constant(3, before=n["f"])
    assert c.type == INT and c.node.next is n["f"]
    verify(g)
    with pytest.raises(ValueError):
        new.insert_before(n["f"])  # already placed


def test_replace_all_uses_and_uses_after():
    g = parse_graph(TEXT)
    n = nodes_by_output(g)
    a, x = n["a"].output, g.inputs[0]
    a.replace_all_uses_with(x)
    assert a.uses == [] and n["b"].inputs[0] is x and n["f"].inputs[1] is x
    verify(g)
    g = parse_graph(TEXT)
    n = nodes_by_output(g)
    a = n["a"].output
    a.replace_uses_after(g.inputs[0], n["e"])  # only %f (after the If) is after %e
    assert n["f"].inputs[1] is g.inputs[0] and n["b"].inputs[0] is a and n["e"].inputs[0] is a
    verify(g)


def test_destroy():
    g = parse_graph(TEXT)
    n = nodes_by_output(g)
    with pytest.raises(ValueError, match="still used"):
        n["a"].destroy()
    f = n["f"]
    f.output.replace_all_uses_with(n["r"].output)
    f.destroy()
    assert n["r"].output.uses and all(u.user is not f for u in n["a"].output.uses)
    # destroying the If removes its nested blocks' uses of %a and %c
    n["r"].output.replace_all_uses_with(n["a"].output)
    n["r"].destroy()
    assert [u.user.kind for u in n["a"].output.uses] == ["prim::Return"]
    assert [u.user.kind for u in g.inputs[1].uses] == []
    verify(g)
    assert "prim::If" not in print_graph(g)


def test_move_and_is_before_nested():
    g = parse_graph(TEXT)
    n = nodes_by_output(g)
    assert n["a"].is_before(n["b"]) and n["b"].is_before(n["d"]) and n["d"].is_before(n["e"])
    assert n["e"].is_before(n["f"]) and not n["f"].is_before(n["d"])
    assert n["r"].is_before(n["d"])  # a node is before the nodes in its blocks
    assert not n["d"].is_before(n["r"]) and n["d"].is_after(n["b"])
    n["a"].move_after(n["f"])
    assert n["f"].is_before(n["a"]) and list(g.nodes)[-1] is n["a"]
    n["a"].move_before(n["r"])
    verify(g)
    other = Graph()
    o = other.create("aten::x")
    other.block.append(o)
    with pytest.raises(ValueError):
        o.is_before(n["a"])


def test_copy_is_deep_and_equal():
    g = parse_graph(TEXT)
    before = print_graph(g)
    c = g.copy()
    assert print_graph(c) == print_graph(g)
    verify(c)
    for a, b in zip(g.all_nodes(), c.all_nodes()):
        assert a is not b and a.kind == b.kind
        assert all(v.graph is c for v in b.inputs)
    c.nodes[0].output.replace_all_uses_with(c.inputs[0])
    assert print_graph(g) == before  # the original is untouched
    assert print_graph(c) != print_graph(g)


def test_inputs_outputs_editing():
    g = parse_graph(TEXT)
    n = nodes_by_output(g)
    f = n["f"]
    f.insert_input(0, g.inputs[0])
    assert [v.name for v in f.inputs] == ["x", "r", "a"]
    f.remove_input(1)
    assert [v.name for v in f.inputs] == ["x", "a"]
    assert all(u.user.inputs[u.offset] is v for v in f.inputs for u in v.uses)
    verify(g)
    extra = n["a"].add_output(TENSOR, "a2")
    n["a"].erase_output(1)
    assert extra not in n["a"].outputs
    g.register_output(n["a"].output)
    g.block.erase_output(1)
    verify(g)

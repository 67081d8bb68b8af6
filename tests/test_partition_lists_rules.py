"""``freeze_appended_lists`` on hand-built graphs: where the frozen lists go, what they keep (type,
source), how many lists it counts, and the lists it must leave (appends in another block, a list
returned by a sub-block or appended to with extra arguments). Each expectation is the graph text
written out by hand."""
from __future__ import annotations

import pytest

import srcore
from srcore.ir.printer import print_graph
from srcore.partition.lists import freeze_appended_lists

pytestmark = pytest.mark.one_pass


def _name(v):
    return v.name or "_"   # (the frozen list is a new, unnamed value)


def body(g):
    """The graph's nodes as ``outputs = kind(inputs)`` lines (constants with their value)."""
    lines = []
    for n in g.nodes:
        outs = ", ".join(_name(o) for o in n.outputs)
        if n.kind == "prim::Constant":
            lines.append(f"{outs} : {n.outputs[0].type} = {n.attrs.get('value')!r}")
        else:
            lines.append(f"{outs} = {n.kind}({', '.join(_name(v) for v in n.inputs)})")
    return lines


def test_two_lists_frozen_in_place_keeping_type_and_source():
    g = srcore.parse_graph("""graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %s : int[] = prim::ListConstruct()
  %a : Tensor = aten::relu(%x)
  %s1 : int[] = aten::append(%s, %two)
  %l1 : Tensor[] = aten::append(%l, %a)
  %s2 : int[] = aten::append(%s, %one)
  %b : Tensor = aten::tanh(%a)
  %l2 : Tensor[] = aten::append(%l, %b)
  %e : Tensor = aten::exp(%b)
  %c : Tensor = aten::cat(%l, %one)
  %r : Tensor = aten::reshape(%c, %s)
  return (%r, %e)
""")
    source = next(n for n in g.nodes if n.kind == "prim::ListConstruct").source
    assert freeze_appended_lists(g) == 2
    assert body(g) == [
        "one : int = 1", "two : int = 2",
        "_ : int[] = [2, 1]",                  # a constant where the empty list was, in append order
        "a = aten::relu(x)", "b = aten::tanh(a)",
        "_ = prim::ListConstruct(x, a, b)",     # right after the last append
        "e = aten::exp(b)", "c = aten::cat(_, one)", "r = aten::reshape(c, _)"]
    lst = next(n for n in g.nodes if n.kind == "prim::ListConstruct")
    const = next(n for n in g.nodes if n.attrs.get("value") == [2, 1])
    cat, reshape = (next(n for n in g.nodes if n.kind == k) for k in ("aten::cat", "aten::reshape"))
    assert cat.inputs[0] is lst.outputs[0] and reshape.inputs[1] is const.outputs[0]
    assert lst.source == source and str(lst.outputs[0].type) == "Tensor[]"
    srcore.parse_graph(print_graph(g))   # still a valid graph


def test_a_list_the_graph_returns_is_frozen_one_a_sub_block_returns_is_not():
    returned = """graph(%x : Float(2, 3)):
  %l : Tensor[] = prim::ListConstruct()
  %l1 : Tensor[] = aten::append(%l, %x)
  return (%l)
"""
    g = srcore.parse_graph(returned)
    assert freeze_appended_lists(g) == 1
    assert body(g) == ["_ = prim::ListConstruct(x)"] and g.outputs[0].node.kind == "prim::ListConstruct"
    from_if = """graph(%x : Float(2, 3), %c : bool):
  %l : Tensor[] = prim::ListConstruct()
  %l1 : Tensor[] = aten::append(%l, %x)
  %m : Tensor[] = prim::If(%c)
    block0():
      -> (%l)
    block1():
      %k : Tensor[] = prim::ListConstruct(%x, %x)
      -> (%k)
  return (%m)
"""
    g = srcore.parse_graph(from_if)
    before = body(g)
    assert freeze_appended_lists(g) == 0 and body(g) == before


def test_appends_in_another_block_leave_the_list():
    g = srcore.parse_graph("""graph(%x : Float(2, 3), %n : int):
  %true : bool = prim::Constant[value=1]()
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct()
  %l1 : Tensor[] = aten::append(%l, %x)
   = prim::Loop(%n, %true)
    block0(%i : int):
      %l2 : Tensor[] = aten::append(%l, %x)
      -> (%true)
  %c : Tensor = aten::cat(%l, %one)
  return (%c)
""")
    before = body(g)
    assert freeze_appended_lists(g) == 0 and body(g) == before


def test_a_list_in_a_sub_block_is_frozen_there():
    g = srcore.parse_graph("""graph(%x : Float(2, 3), %c : bool):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = prim::If(%c)
    block0():
      %l : Tensor[] = prim::ListConstruct()
      %l1 : Tensor[] = aten::append(%l, %x)
      %l2 : Tensor[] = aten::append(%l, %x)
      %k : Tensor = aten::cat(%l, %one)
      -> (%k)
    block1():
      -> (%x)
  return (%y)
""")
    assert freeze_appended_lists(g) == 1
    (b0, _) = next(n for n in g.nodes if n.kind == "prim::If").blocks
    assert [(n.kind, [v.name for v in n.inputs]) for n in b0.nodes] == [
        ("prim::ListConstruct", ["x", "x"]), ("aten::cat", [None, "one"])]
    assert b0.nodes[1].inputs[0] is b0.nodes[0].outputs[0]


def test_the_frozen_constant_keeps_the_lists_declared_type():
    g = srcore.parse_graph("""graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %half : float = prim::Constant[value=0.5]()
  %s : Scalar[] = prim::ListConstruct()
  %s1 : Scalar[] = aten::append(%s, %one)
  %s2 : Scalar[] = aten::append(%s, %half)
  return (%s)
""")
    assert freeze_appended_lists(g) == 1
    (c,) = [n for n in g.nodes if n.attrs.get("value") == [1, 0.5]]
    assert str(c.outputs[0].type) == "Scalar[]" and g.outputs[0] is c.outputs[0]


def test_every_reader_is_placed_by_where_it_runs_not_by_the_order_of_its_uses():
    # a reader made after the return (as a pass would insert one) that runs before the last append
    # still sees the list with one element; the return sees both
    g = srcore.parse_graph("""graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct()
  %l1 : Tensor[] = aten::append(%l, %x)
  %l2 : Tensor[] = aten::append(%l, %x)
  return (%l)
""")
    lst = g.outputs[0]
    last = [n for n in g.nodes if n.kind == "aten::append"][-1]
    reader = g.create("aten::cat", (lst, next(n for n in g.nodes if n.kind == "prim::Constant").outputs[0]),
                      (srcore.ir.types.TensorType(None, None),))
    reader.insert_before(last)
    assert freeze_appended_lists(g) == 1
    assert body(g) == ["one : int = 1", "_ = prim::ListConstruct(x)", "_ = aten::cat(_, one)",
                       "_ = prim::ListConstruct(x, x)"]
    assert reader.inputs[0] is g.nodes[1].outputs[0] and g.outputs[0] is g.nodes[3].outputs[0]


def test_a_reader_that_writes_the_list_leaves_it():
    g = srcore.parse_graph("""graph(%x : Float(2, 3)):
  %zero : int = prim::Constant[value=0]()
  %l : Tensor[] = prim::ListConstruct()
  %l1 : Tensor[] = aten::append(%l, %x)
  %p : Tensor = aten::pop(%l, %zero)
  %l2 : Tensor[] = aten::append(%l, %p)
  return (%l)
""")
    before = body(g)
    assert freeze_appended_lists(g) == 0 and body(g) == before

"""Liveness on its own: which tensors are managed, how long each lives, which escape.

Hand-derived facts for ``srcore.memory.liveness.analyze``, then the same rules on real graphs
through the graph processor (views, lists, sub-blocks, outputs). A tensor's lifetime must
cover every read of anything that may alias it, or its buffer is reused while a view still
reads it: a silent wrong answer that elementwise-only runtime tests cannot see.
"""
from __future__ import annotations

import pytest

import srcore
from srcore.ir.parser import parse_graph
from srcore.memory.liveness import NodeFacts, analyze
from srcore.model import Model

pytestmark = pytest.mark.one_pass


def fresh(pos, out, *reads):
    return NodeFacts(pos, tuple(reads), (out,), ())


def alias(pos, outs, *reads):
    return NodeFacts(pos, tuple(reads), (), tuple(outs))


def use(pos, *reads):
    return NodeFacts(pos, tuple(reads), (), ())


def test_a_fresh_tensor_lives_from_its_node_to_its_last_reader():
    # slot 0 is the block input; 1 = f(0) at 1; 2 = g(1) at 2; 3 = h(1, 2) at 4
    live = analyze([fresh(1, 1, 0), fresh(2, 2, 1), use(3, 0), fresh(4, 3, 1, 2)], [0], 5)
    assert live.lifetimes == {1: (1, 4), 2: (2, 4), 3: (4, 4)}
    assert live.escaping == frozenset()


def test_an_unread_fresh_tensor_lives_one_position():
    assert analyze([fresh(3, 7)], [], 4).lifetimes == {7: (3, 3)}


def test_a_view_extends_its_base_and_views_of_views_too():
    # 1 = fresh at 1; 2 = view(1) at 2; 3 = view(2) at 3; 4 = fresh(0) at 4; read 3 at 6
    nodes = [fresh(1, 1, 0), alias(2, [2], 1), alias(3, [3], 2), fresh(4, 4, 0), use(5, 0), fresh(6, 5, 3)]
    live = analyze(nodes, [5], 7)
    assert live.lifetimes[1] == (1, 6)        # read through the view of the view at 6
    assert live.lifetimes[4] == (4, 4)
    assert 5 in live.escaping and 5 not in live.lifetimes


def test_an_alias_of_several_inputs_extends_all_of_them():
    # 3 = alias(1, 2) (e.g. a prim::If choosing one of two tensors), read at 5
    nodes = [fresh(1, 1, 0), fresh(2, 2, 0), alias(3, [3], 1, 2), use(4, 0), use(5, 3)]
    live = analyze(nodes, [], 6)
    assert live.lifetimes == {1: (1, 5), 2: (2, 5)}


def test_a_container_holds_its_elements_until_its_last_use():
    # 3 = ListConstruct(1, 2) at 3; 4 = getitem(3) at 5 (aliases the list's elements); 4 read at 7
    nodes = [fresh(1, 1, 0), fresh(2, 2, 0), alias(3, [3], 1, 2), use(4, 0), alias(5, [4], 3), use(6, 0), use(7, 4)]
    live = analyze(nodes, [], 8)
    assert live.lifetimes == {1: (1, 7), 2: (2, 7)}


def test_sub_block_reads_count_at_the_owning_node():
    # the owning node at 3 reads slot 1 inside its sub-block (the processor lists it in reads)
    live = analyze([fresh(1, 1, 0), use(2, 0), use(3, 0, 1), use(4, 0)], [], 5)
    assert live.lifetimes == {1: (1, 3)}


def test_tensors_reaching_the_outputs_through_views_or_containers_escape():
    nodes = [fresh(1, 1, 0), alias(2, [2], 1),              # 2 views 1; 2 is returned
             fresh(3, 3, 0), fresh(4, 4, 0), alias(5, [5], 3, 4),   # 5 = list of 3, 4; returned
             fresh(6, 6, 0)]                                # 6 returned directly
    live = analyze(nodes, [2, 5, 6], 7)
    assert live.escaping == frozenset({1, 3, 4, 6})
    assert live.lifetimes == {}


def test_rebinding_a_slot_forgets_the_old_aliases():
    # slot 2 first views 1, then (in a later node) is a fresh tensor of its own: returning it
    # makes only the new tensor escape
    nodes = [fresh(1, 1, 0), alias(2, [2], 1), use(3, 2), fresh(4, 2, 0)]
    live = analyze(nodes, [2], 5)
    assert live.escaping == frozenset({2})
    assert live.lifetimes == {1: (1, 3)}


# -- the same rules on graphs, through the graph processor ----------------------------------
def _lifetimes(text):
    sm = srcore.StaticModule(Model.from_graph(parse_graph(text)))
    out = []
    for b in sm.blocks:
        position = {}
        for pn in b.nodes:
            for v in pn.node.outputs:
                position[v.name] = pn.position
        managed = {sm.values[m.slot].name: (m.start, m.end) for m in b.managed}
        out.append((managed, position))
    return out


def test_graph_view_of_a_managed_tensor_extends_it_to_the_views_reader():
    (managed, pos), = _lifetimes("""graph(%x : Float(4, 6), %w : Float(6, 3)):
  %a : Float(4, 6) = aten::sigmoid(%x)
  %v : Float(6, 4) = aten::t(%a)
  %c : Float(4, 6) = aten::tanh(%x)
  %d : Float(4, 6) = aten::neg(%c)
  %e : Float(6, 4) = aten::exp(%v)
  %f : Float(4, 6) = aten::mul(%d, %x)
  return (%e, %f)
""")
    assert "a" in managed and managed["a"][1] >= pos["e"]
    assert "c" in managed and "d" in managed


def test_graph_list_of_managed_tensors_keeps_them_until_the_list_is_read():
    (managed, pos), = _lifetimes("""graph(%x : Float(2, 3)):
  %a : Float(2, 3) = aten::sigmoid(%x)
  %b : Float(2, 3) = aten::tanh(%x)
  %l : Tensor[] = prim::ListConstruct(%a, %b)
  %c : Float(2, 3) = aten::neg(%x)
  %d : Float(2, 3) = aten::exp(%c)
  %zero : int = prim::Constant[value=0]()
  %s : Float(4, 3) = aten::cat(%l, %zero)
  %e : Float(4, 3) = aten::relu(%s)
  return (%e, %d)
""")
    assert managed["a"][1] >= pos["s"] and managed["b"][1] >= pos["s"]


def test_graph_sub_block_reading_an_outer_tensor_keeps_it_alive_to_the_if():
    (managed, pos), *_ = _lifetimes("""graph(%x : Float(2, 3), %flag : bool):
  %a : Float(2, 3) = aten::sigmoid(%x)
  %c : Float(2, 3) = aten::tanh(%x)
  %r : Float(2, 3) = prim::If(%flag)
    block0():
      %p : Float(2, 3) = aten::exp(%a)
      -> (%p)
    block1():
      %q : Float(2, 3) = aten::neg(%c)
      -> (%q)
  %z : Float(2, 3) = aten::relu(%r)
  return (%z)
""")
    assert managed["a"][1] >= pos["r"] and managed["c"][1] >= pos["r"]


def test_graph_tensor_returned_through_a_view_or_a_list_is_not_managed():
    (managed, _), = _lifetimes("""graph(%x : Float(2, 3)):
  %a : Float(2, 3) = aten::sigmoid(%x)
  %v : Float(3, 2) = aten::t(%a)
  %b : Float(2, 3) = aten::tanh(%x)
  %l : Tensor[] = prim::ListConstruct(%b)
  %c : Float(2, 3) = aten::exp(%x)
  %d : Float(2, 3) = aten::neg(%c)
  return (%v, %l, %d)
""")
    assert "a" not in managed and "b" not in managed and "d" not in managed
    assert "c" in managed

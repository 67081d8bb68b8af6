"""fold_constants: what it folds (against hand-derived values and numpy), what it must leave alone, and the
types of the constants it makes. Written against the mutants that survived the older tests
(docs/testing.md#mutation-testing)."""
from __future__ import annotations

import numpy as np
import pytest

from srcore.ir import parse_graph
from srcore.passes import fold_constants

pytestmark = pytest.mark.one_pass


def kinds(g):
    return [n.kind for n in g.all_nodes() if n.kind != "prim::Constant"]


def out_values(g):
    return [o.node.attrs.get("value") if o.node.kind == "prim::Constant" else o.node.kind for o in g.outputs]


def test_scalar_results_of_tensor_constants_fold_through_the_kernels():
    """``numel``/``is_floating_point`` of a constant tensor: not in the scalar table, no tensor output, but a
    tensor argument: the kernels evaluate them."""
    w = np.zeros((3, 4), np.float32)
    g = parse_graph("""graph():
  %w : Float(3, 4) = prim::Constant[param="w"]()
  %n : int = aten::numel(%w)
  %f : bool = aten::is_floating_point(%w)
  return (%n, %f)
""", {"w": w})
    assert fold_constants(g)
    assert kinds(g) == []
    n, f = out_values(g)
    assert n == 12 and type(n) is int
    assert f is True


def test_ops_whose_kernel_binds_a_scalar_at_load_fold():
    """``aten::gt``/``aten::div`` with a Python scalar: the cpu kernel is specialized with the scalar as a
    bound constant (``Const``); T5's relative position buckets are a chain of them on ``arange``."""
    rp = np.arange(-3, 4, dtype=np.int64).reshape(1, 7) - np.arange(2, dtype=np.int64).reshape(2, 1)
    g = parse_graph("""graph():
  %rp : Long(2, 7) = prim::Constant[param="rp"]()
  %z : int = prim::Constant[value=0]()
  %gt : Bool(2, 7) = aten::gt(%rp, %z)
  %f : Float(2, 7) = prim::Constant[param="f"]()
  %four : int = prim::Constant[value=4]()
  %d : Float(2, 7) = aten::div(%f, %four)
  return (%gt, %d)
""", {"rp": rp, "f": rp.astype(np.float32)})
    assert fold_constants(g)
    assert kinds(g) == []
    gt, d = out_values(g)
    np.testing.assert_array_equal(gt, rp > 0)
    np.testing.assert_array_equal(d, rp.astype(np.float32) / 4)


@pytest.mark.parametrize("answer", [2.5, True])
def test_an_answer_of_the_wrong_type_for_an_int_output_is_not_folded(answer):
    g = parse_graph("""graph():
  %a : int = prim::Constant[value=4]()
  %b : int = aten::neg(%a)
  return (%b)
""")
    assert not fold_constants(g, evaluator=lambda n, a: [answer])
    assert kinds(g) == ["aten::neg"]


def test_a_list_of_tensors_stays_a_list_built_at_run_time_and_a_cat_of_it_folds():
    w = np.arange(3, dtype=np.float32)
    g = parse_graph("""graph():
  %w : Float(3) = prim::Constant[param="w"]()
  %l : Tensor[] = prim::ListConstruct(%w, %w)
  %n : NoneType = prim::Constant()
  %a : int = prim::Constant[value=0]()
  %c : Float(6) = aten::cat(%l, %a)
  return (%l, %c)
""", {"w": w})
    assert fold_constants(g)
    assert kinds(g) == ["prim::ListConstruct"]
    assert g.outputs[1].node.kind == "prim::Constant" and g.outputs[1].name == "c"
    np.testing.assert_array_equal(out_values(g)[1], np.concatenate([w, w]))


def test_an_anchor_grid_of_constant_aranges_folds_through_meshgrid_and_its_unpack():
    """YOLO's grid: ``stack(meshgrid(arange(h), arange(w)))``; the unpacked tensors become constants,
    then the stack of them."""
    h, w = np.arange(3, dtype=np.float32), np.arange(4, dtype=np.float32)
    g = parse_graph("""graph(%x : Float(3, 4, 2)):
  %h : Float(3) = prim::Constant[param="h"]()
  %w : Float(4) = prim::Constant[param="w"]()
  %ij : str = prim::Constant[value="ij"]()
  %l : Tensor[] = prim::ListConstruct(%h, %w)
  %m : Tensor[] = aten::meshgrid(%l, %ij)
  %gy : Float(3, 4), %gx : Float(3, 4) = prim::ListUnpack(%m)
  %l2 : Tensor[] = prim::ListConstruct(%gx, %gy)
  %d : int = prim::Constant[value=-1]()
  %grid : Float(3, 4, 2) = aten::stack(%l2, %d)
  %one : int = prim::Constant[value=1]()
  %y : Float(3, 4, 2) = aten::add(%x, %grid, %one)
  return (%y, %gx)
""", {"h": h, "w": w})
    assert fold_constants(g)
    assert [k for k in kinds(g) if k != "prim::ListConstruct"] == ["aten::add"]
    gy, gx = np.meshgrid(h, w, indexing="ij")
    add = next(n for n in g.all_nodes() if n.kind == "aten::add")
    np.testing.assert_array_equal(add.inputs[1].node.attrs["value"], np.stack([gx, gy], -1))
    np.testing.assert_array_equal(out_values(g)[1], gx)
    assert g.outputs[1].name == "gx"


def test_a_list_result_read_by_anything_but_an_unpack_is_not_folded():
    h = np.arange(3, dtype=np.float32)
    g = parse_graph("""graph():
  %h : Float(3) = prim::Constant[param="h"]()
  %ij : str = prim::Constant[value="ij"]()
  %l : Tensor[] = prim::ListConstruct(%h, %h)
  %m : Tensor[] = aten::meshgrid(%l, %ij)
  return (%m)
""", {"h": h})
    assert not fold_constants(g)
    assert kinds(g) == ["prim::ListConstruct", "aten::meshgrid"]


def test_a_list_of_tensors_the_program_mutates_is_not_read_as_constant():
    w = np.arange(3, dtype=np.float32)
    g = parse_graph("""graph(%x : Float(3)):
  %w : Float(3) = prim::Constant[param="w"]()
  %l : Tensor[] = prim::ListConstruct(%w, %w)
  %l2 : Tensor[] = aten::append(%l, %x)
  %a : int = prim::Constant[value=0]()
  %c : Float(9) = aten::cat(%l, %a)
  return (%c)
""", {"w": w})
    fold_constants(g)
    assert "aten::cat" in kinds(g)


@pytest.mark.parametrize("n, folded", [(4, True), (5, False)])
def test_lists_longer_than_max_elements_are_not_folded(n, folded):
    items = "".join(f"  %i{k} : int = prim::Constant[value={k}]()\n" for k in range(n))
    args = ", ".join(f"%i{k}" for k in range(n))
    g = parse_graph(f"graph():\n{items}  %l : int[] = prim::ListConstruct({args})\n  return (%l)\n")
    assert fold_constants(g, max_elements=4) is folded
    assert out_values(g) == ([list(range(n))] if folded else ["prim::ListConstruct"])


@pytest.mark.parametrize("n, folded", [(4, True), (5, False)])
def test_the_size_limit_applies_inside_nested_lists(n, folded):
    g = parse_graph(f"graph():\n  %inner : int[] = prim::Constant[value={list(range(n))}]()\n"
                    "  %outer : int[][] = prim::ListConstruct(%inner)\n  return (%outer)\n")
    fold_constants(g, max_elements=4)
    assert out_values(g) == ([[list(range(n))]] if folded else ["prim::ListConstruct"])


def test_folded_constants_carry_the_type_of_their_value():
    """A tensor result is typed by its array (dtype and shape), whatever the declared type; a ``Scalar``
    result by its Python type; an ``int`` result keeps its declared type."""
    from srcore.ir.types import FLOAT, INT, TensorType

    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = parse_graph("""graph():
  %w : Float(2, 3) = prim::Constant[param="w"]()
  %one : int = prim::Constant[value=1]()
  %s : Tensor = aten::add(%w, %w, %one)
  %r : Tensor = aten::select(%w, %one, %one)
  %zero : int = prim::Constant[value=0]()
  %t : Tensor = aten::select(%r, %zero, %one)
  %e : Scalar = aten::ScalarImplicit(%t)
  %d : int = aten::dim(%w)
  return (%s, %e, %d)
""", {"w": w})
    assert fold_constants(g)
    s, e, d = g.outputs
    assert kinds(g) == []
    assert s.type == TensorType("float32", (2, 3))
    np.testing.assert_array_equal(s.node.attrs["value"], w + w)
    assert e.type == FLOAT and e.node.attrs["value"] == 4.0
    assert d.type == INT and d.node.attrs["value"] == 2


def test_a_none_folded_into_an_optional_tensor_slot_is_typed_none():
    from srcore.ir.types import NONE

    g = parse_graph("""graph():
  %n : NoneType = prim::Constant()
  %t : (Tensor?, Tensor?) = prim::TupleConstruct(%n, %n)
  %zero : int = prim::Constant[value=0]()
  %o : Tensor? = prim::TupleIndex(%t, %zero)
  return (%o)
""")
    assert fold_constants(g)
    assert kinds(g) == [] and g.outputs[0].type == NONE and g.outputs[0].node.attrs.get("value") is None


def test_inlining_a_constant_if_alone_counts_as_a_change():
    g = parse_graph("""graph(%x : Float(3)):
  %c : bool = prim::Constant[value=0]()
  %y : Tensor = prim::If(%c)
    block0():
      %r : Tensor = aten::relu(%x)
      -> (%r)
    block1():
      %s : Tensor = aten::neg(%x)
      -> (%s)
  return (%y)
""")
    assert fold_constants(g) is True
    assert kinds(g) == ["aten::neg"]
    assert fold_constants(g) is False


def test_dropping_a_loop_that_never_runs_alone_counts_as_a_change():
    g = parse_graph("""graph(%x : Float(3)):
  %zero : int = prim::Constant[value=0]()
  %t : bool = prim::Constant[value=1]()
  %y : Tensor = prim::Loop(%zero, %t, %x)
    block0(%i : int, %a : Tensor):
      %b : Tensor = aten::neg(%a)
      -> (%t, %b)
  return (%y)
""")
    assert fold_constants(g) is True
    assert kinds(g) == [] and g.outputs[0] is g.inputs[0]


def test_only_pure_nodes_without_blocks_are_offered_to_the_evaluator():
    """Constant inputs are not enough: a loop (a block), a fresh buffer (``empty``), an in-place write, a
    list appended to later, a raise, a time point (no inputs, but a side effect), a constant itself: none
    is evaluated."""
    w = np.ones(3, np.float32)
    g = parse_graph("""graph():
  %w : Float(3) = prim::Constant[param="w"]()
  %n : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %three : int = prim::Constant[value=3]()
  %t : bool = prim::Constant[value=1]()
  %msg : str = prim::Constant[value="bad"]()
  %two : int = prim::Constant[value=2]()
  %y : int = prim::Loop(%three, %t, %two)
    block0(%i : int, %a : int):
      %b : int = aten::mul(%a, %three)
      -> (%t, %b)
  %sz : int[] = prim::ListConstruct(%three)
  %e : Tensor = aten::empty(%sz, %n, %n, %n, %n, %n)
  %l : int[] = prim::ListConstruct(%one)
  %ap : int[] = aten::append(%l, %three)
  %u : int = prim::Uninitialized()
  %z : Tensor = aten::add_(%w, %w, %one)
  %s : int = aten::add(%one, %three)
  %tp : int = prim::TimePoint()
  = prim::RaiseException(%msg, %n)
  return (%y, %e, %l, %u, %z, %s, %tp)
""", {"w": w})
    seen = []

    def evaluator(node, args):
        seen.append(node.kind)
        raise NotImplementedError

    assert fold_constants(g, evaluator=evaluator) is False
    # the loop body's mul reads the carried value: not constant either
    assert sorted(seen) == ["aten::add", "prim::ListConstruct"]


def test_a_folded_tensor_owns_contiguous_data_keeps_name_and_source_and_gets_a_free_param_name():
    """``w.t()`` of a parameter is a view: the constant must be a C-contiguous copy (the parameter is
    read-only and shared); the value keeps its name and source; the param name is ``<name>.folded``, or
    ``.folded.N`` when taken."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = parse_graph("""graph():
  %w : Float(2, 3) = prim::Constant[param="w"]()
  %u : Float(3, 2) = prim::Constant[param="wt.folded"]()
  %wt : Tensor = aten::t(%w)
  return (%wt, %u)
""", {"w": w, "wt.folded": np.zeros((3, 2), np.float32)}, filename="m.ir")
    src = next(n for n in g.nodes if n.kind == "aten::t").source
    assert fold_constants(g)
    out = g.outputs[0]
    value = out.node.attrs["value"]
    np.testing.assert_array_equal(value, w.T)
    assert value.flags.c_contiguous and not np.shares_memory(value, w)
    assert out.name == "wt" and out.node.source == src is not None
    assert out.node.attrs["param"] == "wt.folded.1"


def test_an_unnamed_folded_tensor_is_called_folded():
    from srcore.ir.graph import Graph
    from srcore.ir.types import INT, TENSOR

    g = Graph()
    w = g.insert_constant(np.ones(2, np.float32))
    one = g.insert_constant(1, INT)
    s = g.insert("aten::add", [w, w, one], [TENSOR]).output
    g.register_output(s)
    assert fold_constants(g)
    c = g.outputs[0].node
    assert c.attrs["param"] == "folded.folded"
    np.testing.assert_array_equal(c.attrs["value"], [2.0, 2.0])


@pytest.mark.parametrize("answer", [[], [1, 2]])
def test_an_answer_with_the_wrong_number_of_values_is_not_folded(answer):
    g = parse_graph("graph():\n  %a : int = prim::Constant[value=4]()\n  %b : int = aten::neg(%a)\n  return (%b)\n")
    assert fold_constants(g, evaluator=lambda n, a: answer) is False
    assert kinds(g) == ["aten::neg"]


def test_the_constant_is_placed_where_the_node_was_and_keeps_the_declared_list_type():
    """Folded in a loop body, the constant must come before its reader (the graph verifies); an empty
    list keeps its declared element type (``float[]``: the value alone would say ``int[]``)."""
    from srcore.ir.types import FLOAT, ListType
    from srcore.ir.verify import verify

    g = parse_graph("""graph(%x : Float(3)):
  %three : int = prim::Constant[value=3]()
  %t : bool = prim::Constant[value=1]()
  %e : float[] = prim::ListConstruct()
  %y : Tensor = prim::Loop(%three, %t, %x)
    block0(%i : int, %a : Tensor):
      %one : int = prim::Constant[value=1]()
      %two : int = aten::add(%one, %one)
      %b : Tensor = aten::mul(%a, %two)
      -> (%t, %b)
  return (%y, %e)
""")
    assert fold_constants(g)
    verify(g)
    body = next(n for n in g.nodes if n.kind == "prim::Loop").blocks[0]
    mul = next(n for n in body.nodes if n.kind == "aten::mul")
    assert mul.inputs[1].node.attrs["value"] == 2 and mul.inputs[1].node.owning_block is body
    assert g.outputs[1].type == ListType(FLOAT) and g.outputs[1].node.attrs["value"] == []


def test_a_folded_contiguous_view_of_a_parameter_is_still_a_copy():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = parse_graph("""graph():
  %w : Float(2, 3) = prim::Constant[param="w"]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %r : Tensor = aten::select(%w, %zero, %one)
  return (%r)
""", {"w": w})
    assert fold_constants(g)
    value = g.outputs[0].node.attrs["value"]
    np.testing.assert_array_equal(value, w[1])
    assert not np.shares_memory(value, w)


class _Refuse(Exception):
    pass


@pytest.mark.parametrize("answer", ["cannot", [1, 2], [2.5], [1 + 2j]],
                         ids=["not implemented", "two values for one output", "float for int", "no IR type"])
def test_a_node_left_unfolded_is_not_a_change_and_is_offered_once(answer):
    """Every way of leaving a node (the evaluator gives up, too many values, a value of the wrong type,
    one no constant can hold) answers "unchanged": counted as a change, the sweep would offer the same
    node forever."""
    calls = []

    def evaluate(node, args):
        calls.append(node.kind)
        if len(calls) > 1:
            raise _Refuse("offered again: the first refusal was counted as a change")
        if answer == "cannot":
            raise NotImplementedError
        return answer

    g = parse_graph("graph():\n  %a : int = prim::Constant[value=4]()\n  %b : int = aten::neg(%a)\n  return (%b)\n")
    assert fold_constants(g, evaluator=evaluate) is False
    assert calls == ["aten::neg"]
    assert kinds(g) == ["aten::neg"]

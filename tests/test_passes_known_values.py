"""fold_known_values: facts from shape propagation (specs' dtypes/static dims, inference flags) fold; nothing
that depends on data or on a symbolic dim does."""
from __future__ import annotations

import numpy as np
import pytest

from srcore.ir import parse_graph
from srcore.ir.types import TensorType
from srcore.passes import prepare
from srcore.passes.known_values import fold_known_values, matches
from srcore.ir.types import (ANY, BOOL, DEVICE, FLOAT, INT, NONE, NUMBER, SCALAR_TYPE, STR, ListType, OptionalType,
                              TupleType)


def kinds(g):
    return [n.kind for n in g.all_nodes() if n.kind != "prim::Constant"]


def test_inference_flags_and_device_checks_fold_and_the_raise_goes():
    g = parse_graph("""graph(%x : Float(2, 3)):
  %msg : str = prim::Constant[value="bad"]()
  %none : NoneType = prim::Constant()
  %devs : str[] = prim::Constant[value=["cpu", "cuda"]]()
  %d : Device = prim::device(%x)
  %dt : str = prim::type(%d)
  %ok : bool = aten::__contains__(%devs, %dt)
  %flags : bool[] = prim::ListConstruct()
  %a1 : bool[] = aten::append(%flags, %ok)
  %rg : bool = prim::requires_grad(%x)
  %nrg : bool = aten::__not__(%rg)
  %a2 : bool[] = aten::append(%flags, %nrg)
  %all : bool = aten::all(%flags)
  %g : bool = aten::is_grad_enabled()
  %n : bool = prim::is_nested(%x)
  %bad : bool = aten::__or__(%g, %n)
  = prim::If(%bad)
    block0():
      = prim::RaiseException(%msg, %none)
      -> ()
    block1():
      -> ()
  %y : Tensor = prim::If(%all)
    block0():
      %r : Tensor = aten::relu(%x)
      -> (%r)
    block1():
      %s : Tensor = aten::sigmoid(%x)
      -> (%s)
  return (%y)
""")
    out = prepare(g, fuse=False).graph
    assert kinds(out) == ["aten::relu"]


def test_static_dims_fold_symbolic_dims_do_not():
    g = parse_graph("""graph(%x : Float(batch, 4)):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %b : int = aten::size(%x, %zero)
  %f : int = aten::size(%x, %one)
  %p : int = aten::mul(%b, %f)
  %q : int = aten::mul(%f, %f)
  %l : int[] = prim::ListConstruct(%p, %q)
  return (%l)
""")
    assert fold_known_values(g)
    consts = [n.attrs.get("value") for n in g.all_nodes() if n.kind == "prim::Constant"]
    lc = next(n for n in g.all_nodes() if n.kind == "prim::ListConstruct")
    # %q = 4 * 4 folds; %p depends on the batch size and stays computed
    assert lc.inputs[0].node.kind == "aten::mul"
    assert lc.inputs[1].node.kind == "prim::Constant" and lc.inputs[1].node.attrs["value"] == 16
    assert 4 in consts


def test_mutated_list_is_not_replaced_but_its_reads_are():
    g = parse_graph("""graph(%x : Float(2, 3)):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %l : int[] = prim::ListConstruct(%zero)
  %n1 : int = aten::len(%l)
  %a : int[] = aten::append(%l, %one)
  %n2 : int = aten::len(%l)
  %t : (int, int, int[]) = prim::TupleConstruct(%n1, %n2, %l)
  return (%t)
""")
    fold_known_values(g)
    tc = next(n for n in g.all_nodes() if n.kind == "prim::TupleConstruct")
    assert [v.node.attrs.get("value") for v in tc.inputs[:2]] == [1, 2]  # each len at its program point
    assert tc.inputs[2].node.kind == "prim::ListConstruct"             # the list itself stays


def test_data_dependent_condition_stays():
    g = parse_graph("""graph(%x : Float(2, 3)):
  %n : NoneType = prim::Constant()
  %s : Tensor = aten::sum(%x, %n)
  %c : bool = aten::Bool(%s)
  %y : Tensor = prim::If(%c)
    block0():
      %r : Tensor = aten::relu(%x)
      -> (%r)
    block1():
      -> (%x)
  return (%y)
""")
    assert not fold_known_values(g)
    assert "prim::If" in kinds(g)


def test_matches_guards_types():
    assert matches(3, INT) and not matches("batch", INT) and not matches(True, INT)
    assert matches(False, BOOL) and not matches(0, BOOL)
    assert matches([1, 2], ListType(INT)) and not matches([1, "s"], ListType(INT))
    assert matches(None, OptionalType(INT)) and matches(2, OptionalType(INT))


@pytest.mark.filterwarnings("ignore")
def test_scripted_transformer_encoder_layer_reduces_to_compute_and_matches_torch():
    torch = pytest.importorskip("torch")
    import srcore

    torch.manual_seed(0)
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)

        def forward(self, x):
            return self.l1(x)

    layer = Block().eval()
    x = torch.randn(2, 5, 16)
    model = srcore.from_torchscript(torch.jit.script(layer), (x,))
    before = sum(1 for _ in model.graph.all_nodes())
    out = prepare(model.graph, input_types=[s.tensor_type() for s in model.input_specs]).graph
    compute = [k for k in kinds(out)]
    assert before > 300 and len(compute) <= 3, compute  # the fast-path checks, error messages and raises go
    assert not {"prim::If", "prim::RaiseException", "aten::format", "aten::is_grad_enabled"} & set(compute)
    sm = srcore.StaticModule(model)
    y = sm(x.numpy())
    y = y[0] if isinstance(y, (list, tuple)) else y
    with torch.no_grad():
        ref = layer(x).numpy()
    np.testing.assert_allclose(np.asarray(y), ref, rtol=1e-5, atol=1e-5)


def _count_propagations(monkeypatch):
    import srcore.ops.shapes as shapes

    calls = []
    real = shapes.propagate

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(shapes, "propagate", counted)
    return calls


@pytest.mark.one_pass
def test_prepare_propagates_once_while_no_pass_changes_the_graph(monkeypatch):
    calls = _count_propagations(monkeypatch)
    g = parse_graph("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x)\n  return (%y)\n")
    prepare(g, input_types=[TensorType("float32", (2, 3))])
    assert len(calls) == 1  # the typing before the passes; fold_known_values reuses it
    # a fold changes the graph: the next round's fold_known_values propagates again, once
    calls.clear()
    g = parse_graph("graph(%x : Tensor):\n  %c0 : int = prim::Constant[value=0]()\n"
                    "  %n : int = aten::size(%x, %c0)\n  %y : Tensor = aten::mul(%x, %n)\n  return (%y)\n")
    out = prepare(g, input_types=[TensorType("float32", (2, 3))]).graph
    assert "aten::size" not in kinds(out) and len(calls) == 2


@pytest.mark.one_pass
def test_known_values_are_not_reused_for_a_changed_graph():
    from srcore.ops.shapes import propagate
    from srcore.passes.known_values import KnownValues

    g = parse_graph("graph(%x : Float(2, 3)):\n  %c0 : int = prim::Constant[value=0]()\n"
                    "  %n : int = aten::size(%x, %c0)\n  return (%n)\n")
    kv = KnownValues(g, propagate(g).known)
    assert kv.for_graph(g) is kv.known
    n = next(n for n in g.nodes if n.kind == "aten::size")
    n.replace_input(1, g.insert_constant(1, INT, before=n))  # rewired: what was known of %n is stale
    assert kv.for_graph(g) is None


@pytest.mark.one_pass
@pytest.mark.parametrize("value, t, ok", [
    (None, OptionalType(INT), True), (2, OptionalType(INT), True), ("s", OptionalType(INT), False),
    (True, OptionalType(INT), False),
    (True, BOOL, True), (0, BOOL, False), (None, BOOL, False),
    (3, INT, True), (True, INT, False), (2.0, INT, False), ("batch", INT, False), (None, INT, False),
    (6, SCALAR_TYPE, True), (False, SCALAR_TYPE, False), (6.0, SCALAR_TYPE, False),
    (1.5, FLOAT, True), (1, FLOAT, False), (True, FLOAT, False),
    (1, NUMBER, True), (1.5, NUMBER, True), (True, NUMBER, False), ("1", NUMBER, False),
    ("a", STR, True), (1, STR, False), ("cpu", DEVICE, True), (None, DEVICE, False),
    (None, NONE, True), (0, NONE, False), (False, NONE, False),
    ([1, 2], ListType(INT), True), ([], ListType(INT), True), ((1, 2), ListType(INT), False),
    ([1, "s"], ListType(INT), False), ([1, True], ListType(INT), False),
    ((1, 2.0), TupleType([INT, FLOAT]), True), ((1,), TupleType([INT, FLOAT]), False),
    ((1, 2.0, 3), TupleType([INT, FLOAT]), False), ((1, 2), TupleType([INT, FLOAT]), False),
    ((2.0, 1), TupleType([INT, FLOAT]), False), ([1, 2.0], TupleType([INT, FLOAT]), False),
    (1, TensorType(), False), (np.float32(1), TensorType(), False), (1, ANY, False),
])
def test_matches_accepts_exactly_the_plain_values_of_the_type(value, t, ok):
    assert matches(value, t) is ok


@pytest.mark.one_pass
def test_known_optional_and_tuple_values_become_constants_of_their_concrete_type():
    g = parse_graph("""graph(%x : Float(2, 3)):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %n : int = aten::size(%x, %one)
  %d : int = aten::dim(%x)
  %t : (int, int) = prim::TupleConstruct(%n, %d)
  %o : int? = aten::__getitem__(%t, %one)
  %u : (int, (int, int)) = prim::TupleConstruct(%o, %t)
  return (%u)
""")
    known = {v: val for v, val in [(g.outputs[0].node.inputs[0], 2), (g.outputs[0].node.inputs[1], (3, 2))]}
    assert fold_known_values(g, known=known)
    o, t = (v.node for v in g.outputs[0].node.inputs)
    assert o.kind == t.kind == "prim::Constant"
    assert o.attrs["value"] == 2 and o.outputs[0].type == INT           # int?, known 2: an int constant
    assert t.attrs["value"] == (3, 2) and t.outputs[0].type == TupleType([INT, INT])


@pytest.mark.one_pass
def test_a_known_none_for_an_optional_is_a_none_constant():
    g = parse_graph("""graph(%x : Float(2, 3)):
  %none : NoneType = prim::Constant()
  %l : int?[] = prim::ListConstruct(%none)
  %zero : int = prim::Constant[value=0]()
  %o : int? = aten::__getitem__(%l, %zero)
  %u : (int?,) = prim::TupleConstruct(%o)
  return (%u)
""")
    o = g.outputs[0].node.inputs[0]
    assert fold_known_values(g, known={o: None})
    c = g.outputs[0].node.inputs[0].node
    assert c.kind == "prim::Constant" and c.attrs.get("value") is None and c.outputs[0].type == NONE


@pytest.mark.one_pass
def test_only_used_non_placeholder_values_are_replaced():
    """Constants, ``prim::Uninitialized`` and unused values stay as they are even when known: replacing
    them changes nothing but makes the pass report a change forever."""
    g = parse_graph("""graph(%x : Float(2, 3)):
  %c : int = prim::Constant[value=1]()
  %u : int = prim::Uninitialized()
  %d : int = aten::dim(%x)
  %t : (int, int) = prim::TupleConstruct(%c, %u)
  return (%t)
""")
    c, u = g.outputs[0].node.inputs
    d = next(n for n in g.all_nodes() if n.kind == "aten::dim").output
    before = [n.kind for n in g.all_nodes()]
    assert fold_known_values(g, known={c: 1, u: 0, d: 2}) is False
    assert [n.kind for n in g.all_nodes()] == before
    assert g.outputs[0].node.inputs == [c, u]


@pytest.mark.one_pass
def test_replacing_constant_keeps_the_source_and_the_graph_keeps_its_types():
    g = parse_graph("""graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::relu(%x)
  %n : int = aten::size(%y, %one)
  %z : Tensor = aten::mul(%y, %n)
  return (%z)
""", filename="model.ir")
    size = next(n for n in g.all_nodes() if n.kind == "aten::size")
    y = size.inputs[0]
    assert fold_known_values(g) is True
    c = next(n for n in g.all_nodes() if n.kind == "aten::mul").inputs[1].node
    assert c.kind == "prim::Constant" and c.attrs["value"] == 3
    assert c.source is not None and c.source == size.source
    assert y.type == TensorType()  # propagation typed it Float(2, 3) on the way: the pass puts it back


@pytest.mark.one_pass
def test_a_contradiction_in_the_types_is_left_for_the_runtime():
    g = parse_graph("""graph(%x : Float(2, 3), %w : Float(2, 3)):
  %y : Tensor = aten::mm(%x, %w)
  %d : int = aten::dim(%y)
  %z : Tensor = aten::mul(%y, %d)
  return (%z)
""")
    assert fold_known_values(g) is False
    assert "aten::dim" in [n.kind for n in g.all_nodes()]


@pytest.mark.one_pass
def test_every_output_of_a_node_is_considered_on_its_own():
    """An unused output, or one whose known value does not fit its type, does not stop the next output."""
    g = parse_graph("""graph(%x : Float(2, 3)):
  %l : int[] = aten::size(%x)
  %a : int, %b : int = prim::ListUnpack(%l)
  %c : int, %d : int = prim::ListUnpack(%l)
  %t : (int, int) = prim::TupleConstruct(%b, %c)
  %u : (int, int) = prim::TupleConstruct(%t, %d)
  return (%u)
""")
    unpack1, unpack2 = [n for n in g.all_nodes() if n.kind == "prim::ListUnpack"]
    a, b = unpack1.outputs
    c, d = unpack2.outputs
    # %a is unused; %c's "known" value is a symbol (a symbolic dim), which never fills an int slot
    assert fold_known_values(g, known={a: 2, b: 3, c: "batch", d: 3})
    tc = next(n for n in g.all_nodes() if n.kind == "prim::TupleConstruct")
    assert tc.inputs[0].node.kind == "prim::Constant" and tc.inputs[0].node.attrs["value"] == 3
    assert tc.inputs[1] is c
    assert g.outputs[0].node.inputs[1].node.kind == "prim::Constant"


@pytest.mark.one_pass
def test_known_values_are_not_reused_once_a_node_is_replaced_by_another_reading_the_same_values():
    from srcore.ops.shapes import propagate
    from srcore.passes.known_values import KnownValues

    g = parse_graph("graph(%x : Float(2, 3)):\n  %n : int = aten::dim(%x)\n  return (%n)\n")
    kv = KnownValues(g, propagate(g).known)
    old = g.outputs[0].node
    new = g.create("aten::numel", [g.inputs[0]], [INT])
    new.insert_before(old)
    old.output.replace_all_uses_with(new.output)
    old.destroy()
    assert kv.for_graph(g) is None


@pytest.mark.one_pass
def test_rewiring_an_input_to_a_value_already_there_invalidates_the_known_values():
    """No node added or removed, one input redirected: the reuse signature must still change."""
    from srcore.ops.shapes import propagate
    from srcore.passes.known_values import KnownValues

    g = parse_graph("graph(%x : Float(2, 3)):\n  %c0 : int = prim::Constant[value=0]()\n"
                    "  %c1 : int = prim::Constant[value=1]()\n"
                    "  %n : int = aten::size(%x, %c0)\n  return (%n, %c1)\n")
    kv = KnownValues(g, propagate(g).known)
    n = next(n for n in g.nodes if n.kind == "aten::size")
    n.replace_input(1, next(v for v in g.outputs if v is not n.output))
    assert kv.for_graph(g) is None
    assert fold_known_values(g, reuse=kv)
    assert g.outputs[0].node.attrs["value"] == 3   # dim 1 of (2, 3), not the stale 2


@pytest.mark.one_pass
def test_a_reused_propagation_feeds_the_next_one_after_a_change():
    """``reuse`` holds the last propagation: after a change, the next propagation starts from it and
    re-runs the rules only where the graph changed (``reused`` counts the rest)."""
    from srcore.ops.shapes import propagate
    from srcore.passes.known_values import KnownValues

    g = parse_graph("graph(%x : Float(2, 3)):\n  %c0 : int = prim::Constant[value=0]()\n"
                    "  %a : Float(2, 3) = aten::relu(%x)\n  %b : Float(2, 3) = aten::tanh(%a)\n"
                    "  %n : int = aten::size(%b, %c0)\n  return (%n, %b)\n")
    first = propagate(g)
    kv = KnownValues(g, first.known, first)
    g.insert_constant(7, INT, before=g.nodes[-1])   # a change that touches no fact of the others
    assert fold_known_values(g, reuse=kv)
    assert kv.result is not first and kv.result.reused > 0
    assert g.outputs[0].node.attrs["value"] == 2


@pytest.mark.one_pass
def test_the_rules_and_schemas_given_are_the_ones_propagation_reads():
    """A private op known only to the given tables: its value folds with them; the process-wide
    tables know nothing of it, and an empty rule table knows nothing at all."""
    from srcore.ops.registry import SchemaRegistry
    from srcore.ops.shapes.base import A
    from srcore.ops.shapes.table import ShapeRuleTable

    schemas = SchemaRegistry()
    schemas.add("mutpass::answer.v(Tensor self) -> int")
    rules = ShapeRuleTable()
    rules.add("mutpass::answer.v", lambda ctx: [A(INT, 42)])
    text = ("graph(%x : Float(2, 3)):\n  %n : int = mutpass::answer(%x)\n  %c0 : int = prim::Constant[value=0]()\n"
            "  %d : int = aten::size(%x, %c0)\n  return (%n, %d)\n")

    def folded(**tables):
        g = parse_graph(text)
        fold_known_values(g, **tables)
        return [o.node.attrs.get("value") if o.node.kind == "prim::Constant" else None for o in g.outputs]

    assert folded(rules=rules, schemas=schemas) == [42, None]
    assert folded() == [None, 2]
    assert folded(rules=ShapeRuleTable()) == [None, None]


@pytest.mark.one_pass
def test_a_mutated_list_output_does_not_stop_the_next_output_of_its_node():
    g = parse_graph("""graph(%t : (int[], int)):
  %one : int = prim::Constant[value=1]()
  %l : int[], %n : int = prim::TupleUnpack(%t)
  %a : int[] = aten::append(%l, %one)
  return (%l, %n)
""")
    unpack = next(n for n in g.all_nodes() if n.kind == "prim::TupleUnpack")
    assert fold_known_values(g, known={unpack.outputs[0]: [1], unpack.outputs[1]: 2})
    assert g.outputs[0] is unpack.outputs[0]                     # the list changes: it stays
    c = g.outputs[1].node
    assert c.kind == "prim::Constant" and c.attrs["value"] == 2 and c.outputs[0].type == INT


@pytest.mark.one_pass
def test_the_constant_has_the_declared_type_and_sits_before_its_node_in_its_block():
    """A ScalarType is an int and a Device a str in Python: the constant keeps the declared type. Inside a
    branch the constant goes where the node was (the graph still verifies)."""
    from srcore.ir.types import BoolType
    from srcore.ir.verify import verify

    g = parse_graph("""graph(%x : Float(2, 3), %b : bool):
  %one : int = prim::Constant[value=1]()
  %dt : ScalarType = prim::dtype(%x)
  %dev : Device = prim::device(%x)
  %y : int = prim::If(%b)
    block0():
      %n : int = aten::size(%x, %one)
      -> (%n)
    block1():
      -> (%one)
  return (%dt, %dev, %y)
""")
    assert g.inputs[1].type == BoolType()
    assert fold_known_values(g)
    verify(g)
    dt, dev = (v.node for v in g.outputs[:2])
    assert dt.kind == dev.kind == "prim::Constant"
    assert dt.attrs["value"] == 6 and dt.outputs[0].type == SCALAR_TYPE    # torch.float32
    assert dev.attrs["value"] == "cpu" and dev.outputs[0].type == DEVICE
    (branch,) = [n for n in g.all_nodes() if n.kind == "prim::If"]
    block = branch.blocks[0]
    assert [n.kind for n in block.nodes] == ["prim::Constant", "aten::size"]
    assert block.outputs[0].node is block.nodes[0] and block.nodes[0].attrs["value"] == 3

"""Each peephole rule's guards, one by one, on small graphs (what mutation testing showed untested).

``tests/test_passes_near_misses.py`` checks values through the whole pipeline; these call
``peephole`` alone and check which rule fired and what it produced, for the edges of each
guard: unknown ranks and shapes, non-constant arguments, negative dims, the device form of
``to``, tensors for ``len``.
"""
from __future__ import annotations

import numpy as np
import pytest

from srcore.ir import parse_graph
from srcore.ir.types import TensorType
from srcore.passes import peephole

pytestmark = pytest.mark.one_pass


def rewrite(text, consts=None, types=None):
    """(rules applied, the graph after peephole); ``consts`` fills ``<Tensor>`` constants by name,
    ``types`` sets graph inputs' types by name (e.g. a known dtype with an unknown shape)."""
    g = parse_graph(text)
    for node in g.all_nodes():
        if node.kind == "prim::Constant" and node.outputs and node.output.name in (consts or {}):
            node.attrs["value"] = consts[node.output.name]
    for v in g.inputs:
        if v.name in (types or {}):
            v.type = types[v.name]
    applied: list[str] = []
    peephole(g, applied=applied)
    return applied, g


def returned_constant(g, i=0):
    node = g.outputs[i].node
    assert node.kind == "prim::Constant", node.kind
    return node.attrs.get("value")


TT = """graph(%x : {xt}):
  %a : int = prim::Constant[value={a}]()
  %b : int = prim::Constant[value={b}]()
  %c : int = prim::Constant[value={c}]()
  %d : int = prim::Constant[value={d}]()
  %t : Tensor = aten::transpose(%x, %a, %b)
  %y : Tensor = aten::transpose(%t, %c, %d)
  %z : Tensor = aten::relu(%y)
  return (%z)
"""
TT_RULE = "transpose(transpose(x, a, b), a, b) -> x"


@pytest.mark.parametrize("xt, dims, fires", [
    ("Tensor", (0, 1, 1, 0), True),              # unknown rank: non-negative dims still compare
    ("Tensor", (0, 1, 0, 1), True),
    ("Tensor", (0, -1, -1, 0), False),           # unknown rank: -1 cannot be compared with 0
    ("Float(2, 3, 4)", (-1, 0, 2, 0), True),     # -1 is 2 at rank 3
    ("Float(2, 3, 4)", (-1, 0, 1, 0), False),
    ("Float(2, 3, 4)", (-3, 1, 1, 0), True),     # -3 is 0
    ("Float(2, 3, 4)", (1, 2, 2, 0), False),
])
def test_transpose_of_transpose_compares_normalized_dims(xt, dims, fires):
    a, b, c, d = dims
    applied, _ = rewrite(TT.format(xt=xt, a=a, b=b, c=c, d=d))
    assert (TT_RULE in applied) == fires


ADD = """graph(%x : Tensor):
  %c : Tensor = prim::Constant[value=<Tensor>]()
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::add(%x, %c, %one)
  return (%y)
"""


@pytest.mark.parametrize("c, x_shape, fires", [
    (np.zeros((), np.float32), None, True),          # a 0-d zero never changes the shape
    (np.zeros((1,), np.float32), None, False),       # x of unknown shape might be 0-d: (1,) grows it
    (np.zeros((1,), np.float32), (), False),
    (np.zeros((3, 4), np.float32), (3, 1), False),   # stretches x's size-1 dim
    (np.zeros((1, 4), np.float32), (3, 4), True),
    (np.zeros((4,), np.float32), (3, 4), True),
    (np.zeros((2, 4), np.float32), (3, 4), False),
])
def test_add_zero_needs_a_constant_that_broadcasts_into_x(c, x_shape, fires):
    applied, _ = rewrite(ADD, {"c": c}, {"x": TensorType("float32", x_shape)})
    assert ("x + 0 -> x" in applied) == fires


DIV_MODE = """graph(%x : Float(2, 3), %m : str?):
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %y : Float(2, 3) = aten::div(%x, %one, {mode})
  return (%y)
"""


def test_div_by_one_with_a_rounding_mode_known_only_at_run_time_stays():
    applied, g = rewrite(DIV_MODE.format(mode="%m"))
    assert "x / 1 -> x" not in applied and g.outputs[0].node.kind == "aten::div"
    applied, _ = rewrite(DIV_MODE.format(mode="%none"))     # rounding_mode=None is a true division
    assert "x / 1 -> x" in applied


CONTIG = """graph(%x : Float(1, 2, 3, 3), %f : int, %g : int):
  %a : Float(1, 2, 3, 3) = aten::contiguous(%x, {f})
  %y : Float(1, 2, 3, 3) = aten::contiguous(%a, {g})
  %z : Float(1, 2, 3, 3) = aten::relu(%y)
  return (%z)
"""


def test_contiguous_of_contiguous_with_formats_known_at_run_time():
    applied, _ = rewrite(CONTIG.format(f="%f", g="%f"))
    assert "contiguous(contiguous(x)) -> contiguous(x)" in applied


TO = """graph(%x : Float(2, 3), %dev : Device, %dt : int):
  %f : bool = prim::Constant[value=0]()
  %t : bool = prim::Constant[value=1]()
  %n : NoneType = prim::Constant()
  %cpu : Device = prim::Constant[value="cpu"]()
  %cl : int = prim::Constant[value=2]()
  %d6 : int = prim::Constant[value=6]()
  %d7 : int = prim::Constant[value=7]()
  %y : Tensor = aten::to({args})
  %z : Tensor = aten::relu(%y)
  return (%z)
"""


@pytest.mark.parametrize("args, fires", [
    ("%x, %d6, %f, %f, %n", True),
    ("%x, %d7, %f, %f, %n", False),
    ("%x, %d6, %f, %t, %n", False),               # copy=True
    ("%x, %d6, %f, %f, %cl", False),              # a memory format
    ("%x, %dt, %f, %f, %n", False),               # dtype known at run time only
    ("%x, %cpu, %d6, %f, %f, %n", True),          # the device form
    ("%x, %n, %d6, %f, %f, %n", True),
    ("%x, %cpu, %d7, %f, %f, %n", False),
    ("%x, %cpu, %d6, %f, %t, %n", False),
    ("%x, %cpu, %d6, %f, %f, %cl", False),
    ("%x, %dev, %d6, %f, %f, %n", False),         # device known at run time only
    ("%x, %cpu, %dt, %f, %f, %n", False),
])
def test_to_the_same_dtype(args, fires):
    applied, _ = rewrite(TO.format(args=args))
    assert ("x.to(x.dtype) -> x" in applied) == fires


@pytest.mark.parametrize("other, fires", [
    ("Float(2, 3)", True),
    ("Float(5)", True),                           # only the dtype matters
    ("Double(2, 3)", False),
    ("Tensor", False),                            # dtype unknown
])
def test_type_as_the_same_dtype(other, fires):
    applied, g = rewrite(f"""graph(%x : Float(2, 3), %o : {other}):
  %y : Tensor = aten::type_as(%x, %o)
  %z : Tensor = aten::relu(%y)
  return (%z)
""")
    assert ("x.type_as(y) -> x (same dtype)" in applied) == fires
    relu = next(n for n in g.all_nodes() if n.kind == "aten::relu")
    assert (relu.inputs[0] is g.inputs[0]) == fires


def test_detach_compared_by_identity_stays():
    text = """graph(%x : Float(2)):
  %y : Float(2) = aten::detach(%x)
  %s : bool = aten::__is__(%y, %x)
  return (%s, %y)
"""
    applied, _ = rewrite(text)
    assert "detach(x) -> x" not in applied
    applied, _ = rewrite(text.replace("  %s : bool = aten::__is__(%y, %x)\n", "").replace("(%s, %y)", "(%y)"))
    assert "detach(x) -> x" in applied


SIZE = """graph(%x : {xt}, %i : int):
  %d : int = prim::Constant[value={d}]()
  %s : int = aten::size(%x, {dim})
  return (%s)
"""


@pytest.mark.parametrize("xt, d, dim, value", [
    ("Float(2, 3)", -2, "%d", 2),
    ("Float(2, 3)", -1, "%d", 3),
    ("Float(2, 3)", 1, "%d", 3),
    ("Float(2, 3)", -3, "%d", None),   # out of range: the kernel raises, nothing is folded
    ("Float(2, 3)", 2, "%d", None),
    ("Float(2, 3)", 0, "%i", None),    # dim known at run time only
    ("Float(batch, 3)", 0, "%d", None),
])
def test_size_of_a_static_dim(xt, d, dim, value):
    applied, g = rewrite(SIZE.format(xt=xt, d=d, dim=dim))
    if value is None:
        assert "size(static) -> constant" not in applied
    else:
        assert returned_constant(g) == value


def test_dim_and_len_of_tensors():
    _, g = rewrite("graph(%x : Float(2, 3)):\n  %r : int = aten::dim(%x)\n  %n : int = aten::len(%x)\n"
                   "  return (%r, %n)\n")
    assert returned_constant(g, 0) == 2 and returned_constant(g, 1) == 2
    applied, _ = rewrite("graph(%x : Tensor):\n  %r : int = aten::dim(%x)\n  %n : int = aten::len(%x)\n"
                         "  return (%r, %n)\n")
    assert applied == []
    applied, _ = rewrite("graph(%x : Float(batch, 3)):\n  %n : int = aten::len(%x)\n  return (%n)\n")
    assert applied == []
    _, g = rewrite("graph(%x : Float(5)):\n  %n : int = aten::len(%x)\n  return (%n)\n")
    assert returned_constant(g) == 5


LIST = """graph(%x : Float(2), %w : Float(2), %i : int):
  %l : Tensor[] = prim::ListConstruct(%x, %w)
{body}"""


@pytest.mark.parametrize("body, fires, rule", [
    ("  %k : int = prim::Constant[value=-2]()\n  %y : Tensor = aten::__getitem__(%l, %k)\n  return (%y)\n",
     True, "ListConstruct(xs)[i] -> xs[i]"),
    ("  %k : int = prim::Constant[value=-3]()\n  %y : Tensor = aten::__getitem__(%l, %k)\n  return (%y)\n",
     False, "ListConstruct(xs)[i] -> xs[i]"),
    ("  %k : int = prim::Constant[value=2]()\n  %y : Tensor = aten::__getitem__(%l, %k)\n  return (%y)\n",
     False, "ListConstruct(xs)[i] -> xs[i]"),
    ("  %k : bool = prim::Constant[value=1]()\n  %y : Tensor = aten::__getitem__(%l, %k)\n  return (%y)\n",
     False, "ListConstruct(xs)[i] -> xs[i]"),
    ("  %y : Tensor = aten::__getitem__(%l, %i)\n  return (%y)\n",        # index known at run time only
     False, "ListConstruct(xs)[i] -> xs[i]"),
    # an element replaced in place: the list no longer holds what was constructed
    ("  %k : int = prim::Constant[value=0]()\n  %n : Float(2) = aten::neg(%x)\n"
     "  %s : Tensor[] = aten::_set_item(%l, %k, %n)\n"
     "  %a : Tensor, %b : Tensor = prim::ListUnpack(%l)\n  return (%a, %b)\n",
     False, "ListUnpack(ListConstruct(xs)) -> xs"),
    ("  %a : Tensor, %b : Tensor = prim::ListUnpack(%l)\n  return (%a, %b)\n",
     True, "ListUnpack(ListConstruct(xs)) -> xs"),
])
def test_list_rules(body, fires, rule):
    applied, g = rewrite(LIST.format(body=body))
    assert (rule in applied) == fires
    if fires and "getitem" in body:
        assert g.outputs[0] is g.inputs[0]          # l[-2] is %x


NONE_TEST = """graph(%x : {xt}):
  %n : NoneType = prim::Constant()
  %m : NoneType = prim::Constant()
  %y : bool = aten::{op}({a}, %n)
  return (%y)
"""


@pytest.mark.parametrize("xt, op, a, value", [
    ("Tensor", "__is__", "%m", True),             # None is None
    ("Tensor", "__isnot__", "%m", False),
    ("Tensor", "__is__", "%x", False),
    ("Tensor", "__isnot__", "%x", True),
    ("Tensor?", "__is__", "%x", None),            # an optional: known at run time only
    ("Tensor?", "__isnot__", "%x", None),
])
def test_is_none_folds_only_what_the_types_decide(xt, op, a, value):
    applied, g = rewrite(NONE_TEST.format(xt=xt, op=op, a=a))
    if value is None:
        assert applied == []
    else:
        assert returned_constant(g) is value


SCALAR = """graph(%x : {xt}):
  %c : {ct} = prim::Constant[value={c}]()
  %y : {yt} = aten::{op}(%x, %c)
  return (%y)
"""


@pytest.mark.parametrize("xt, ct, c, yt, op, fires", [
    ("int", "int", "0", "int", "add", True),
    ("int", "int", "1", "int", "add", False),
    ("int", "int", "5", "int", "sub", False),
    ("int", "int", "1", "int", "mul", True),
    ("int", "int", "0", "int", "mul", False),
    ("float", "float", "0.", "float", "add", True),
    ("float", "int", "0", "float", "add", True),
    ("float", "float", "1.", "float", "mul", True),
    ("int", "float", "0.", "float", "add", False),      # int + 0.0 is a float
    ("Scalar", "float", "0.", "Scalar", "add", False),  # a Scalar may be an int: + 0.0 makes it a float
    ("int", "int", "1", "float", "div", False),         # int / 1 is a float
    ("float", "int", "1", "float", "div", False),       # scalar true division: left to the scalar folder
])
def test_scalar_identities(xt, ct, c, yt, op, fires):
    applied, g = rewrite(SCALAR.format(xt=xt, ct=ct, c=c, yt=yt, op=op))
    assert bool(applied) == fires, applied
    if fires:
        assert g.outputs[0] is g.inputs[0]


def test_transpose_dims_known_at_run_time_stay():
    text = """graph(%x : Float(2, 3), %a : int):
  %b : int = prim::Constant[value=1]()
  %t : Tensor = aten::transpose(%x, %a, %b)
  %y : Tensor = aten::transpose(%t, %a, %b)
  %u : Tensor = aten::transpose(%y, %b, %a)
  %z : Tensor = aten::relu(%u)
  return (%z)
"""
    assert rewrite(text)[0] == []


@pytest.mark.parametrize("args, fires", [
    ('%x, %cuda, %d6, %f, %f, %n', False),                   # another device
    ("%x, %d6, %n, %n, %n, %f, %t, %n", False),              # to.dtype_layout (copy=True)
    ("%x, %d6, %n, %n, %n, %f, %f, %n", False),              # to.dtype_layout: not rewritten at all
])
def test_to_other_devices_and_overloads(args, fires):
    text = TO.replace('  %cl : int', '  %cuda : Device = prim::Constant[value="cuda"]()\n  %cl : int')
    applied, _ = rewrite(text.format(args=args))
    assert ("x.to(x.dtype) -> x" in applied) == fires


@pytest.mark.parametrize("xt, value", [("Float(2)", True), ("Double(2)", True), ("Long(2)", False),
                                       ("Bool(2)", False), ("Tensor", None)])
def test_is_floating_point_of_a_known_dtype(xt, value):
    applied, g = rewrite(f"graph(%x : {xt}):\n  %y : bool = aten::is_floating_point(%x)\n  return (%y)\n")
    if value is None:
        assert applied == []
    else:
        assert returned_constant(g) is value


def test_is_floating_point_of_complex_is_false():
    g = parse_graph("graph(%x : Tensor):\n  %y : bool = aten::is_floating_point(%x)\n  return (%y)\n")
    g.inputs[0].type = TensorType("complex64", (2,))
    assert peephole(g) is True and returned_constant(g) is False


def test_peephole_says_whether_it_changed_the_graph():
    g = parse_graph("graph(%x : Float(2)):\n  %y : Float(2) = aten::relu(%x)\n  return (%y)\n")
    assert peephole(g) is False


def test_a_rule_that_does_not_match_lets_the_next_rule_of_its_op_try():
    from srcore.passes.peephole import Rule, group_rules

    def neg_neg(node):
        inner = node.inputs[0].node
        return inner.inputs[0] if inner.kind == "aten::neg" else None

    table = group_rules([Rule("never", "aten::neg", lambda node: None), Rule("neg(neg(x)) -> x", "aten::neg", neg_neg)])
    g = parse_graph("graph(%x : Float(2)):\n  %a : Float(2) = aten::neg(%x)\n  %b : Float(2) = aten::neg(%a)\n"
                    "  return (%b)\n")
    applied: list[str] = []
    assert peephole(g, rules=table, applied=applied) is True
    assert applied == ["neg(neg(x)) -> x"] and g.outputs[0] is g.inputs[0]


PERM = """graph(%x : Float(2, 3, 4)):
  %d0 : int = prim::Constant[value=0]()
  %d1 : int = prim::Constant[value=2]()
  %d2 : int = prim::Constant[value=1]()
  %dims : int[] = prim::ListConstruct(%d0, %d1, %d2)
  %p : Tensor = aten::permute(%x, %dims)
  %s : Float(2, 4, 3) = aten::{op}
  {more}
  return (%s)
"""


@pytest.mark.parametrize("op, more, fires", [
    ("sigmoid(%p)", "", True),
    ("leaky_relu(%p, %slope)", "", True),                         # a constant extra argument
    ("sigmoid(%p)", "%t : Tensor = aten::sigmoid_(%s)", False),    # the result is written to later
    ("sigmoid(%p)", "%t : Tensor = aten::relu_(%x)", False),       # x is written to later
    ("mul(%p, %p)", "", False),                                   # not a one-tensor elementwise op
])
def test_elementwise_of_permute_moves_before_the_permute(op, more, fires):
    text = PERM.format(op=op, more=more)
    if "%slope" in text:
        text = text.replace("  %p : Tensor", "  %slope : float = prim::Constant[value=0.1]()\n  %p : Tensor")
    applied, g = rewrite(text)
    fired = [a for a in applied if a == "f(permute(x)) -> permute(f(x))"]
    assert bool(fired) == fires
    if fires:
        last = g.outputs[0].node
        assert last.kind == "aten::permute"
        f = last.inputs[0].node
        assert f.kind == "aten::" + op.split("(")[0] and f.inputs[0] is g.inputs[0]
        assert f.output.type == TensorType("float32", (2, 3, 4))
        assert g.outputs[0].type == TensorType("float32", (2, 4, 3))


BT = """graph(%x : {xt}, %y : {yt}):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x, %y)
  %b : Tensor[] = aten::broadcast_tensors(%l)
  %p : Tensor, %q : Tensor = prim::ListUnpack(%b)
  %r : Tensor = aten::sub(%p, %q, %one)
  return (%r)
"""
BT_RULE = "ListUnpack(broadcast_tensors(xs of one static shape)) -> xs"


@pytest.mark.parametrize("xt, yt, fires", [
    ("Float(2, 3)", "Float(2, 3)", True),        # F.mse_loss's operands of one shape: nothing to broadcast
    ("Float(2, 3)", "Float(1, 3)", False),       # a real broadcast
    ("Float(2, 3)", "Float(3)", False),
    ("Tensor", "Tensor", False),                 # unknown shapes
])
def test_broadcast_tensors_of_one_static_shape_is_its_operands(xt, yt, fires):
    applied, g = rewrite(BT.format(xt=xt, yt=yt))
    assert (BT_RULE in applied) == fires
    sub = g.outputs[0].node
    assert [v.name for v in sub.inputs[:2]] == (["x", "y"] if fires else ["p", "q"])


MAXDIM = """graph(%x : Float(2, 5, 3)):
  %d : int = prim::Constant[value={d}]()
  %k : bool = prim::Constant[value={k}]()
  %v : Tensor, %i : Tensor = aten::{op}(%x, %d, %k)
  return ({ret})
"""


@pytest.mark.parametrize("op, amin_amax", [("max", "aten::amax"), ("min", "aten::amin")])
@pytest.mark.parametrize("d, k, ret, fires", [
    (1, "False", "%v", True), (-1, "True", "%v", True),
    (1, "False", "%v, %i", False),               # the indices are returned: the arg reduction stays
    (1, "False", "%i", False),
])
def test_max_min_dim_with_unread_indices_is_amax_amin(op, amin_amax, d, k, ret, fires):
    applied, g = rewrite(MAXDIM.replace("{d}", str(d)).replace("{k}", k).replace("{op}", op).replace("{ret}", ret))
    kinds = [n.kind for n in g.all_nodes() if n.kind != "prim::Constant"]
    assert (f"{op}(x, d) with indices never read -> {amin_amax[6:]}(x, [d])" in applied) == fires
    assert kinds == ([amin_amax] if fires else [f"aten::{op}"])
    if fires:
        node = g.outputs[0].node
        assert [i.node.attrs.get("value") for i in node.inputs[1:]] == [[d], k == "True"]


def test_max_dim_with_unread_indices_keeps_torch_values():
    """Through the pipeline: the values of ``x.max(1)[0]`` and ``x.min(-1, keepdim=True)[0]``
    with NaN and infinities are torch's."""
    torch = pytest.importorskip("torch")
    import srcore

    class M(torch.nn.Module):
        def forward(self, x):
            return x.max(1)[0], x.min(-1, keepdim=True)[0]

    x = torch.randn(2, 5, 3)
    x[0, 2, 1], x[1, 0, 0], x[1, 3, 2] = float("nan"), float("inf"), float("-inf")
    model = srcore.from_torchscript(torch.jit.script(M()), (x,))
    sm = srcore.StaticModule(model, backends=("cpu",))
    assert not any(pn.fn is not None and pn.fn.op.startswith(("aten::max", "aten::min"))
                   for b in sm.blocks for pn in b.nodes)
    for r, e in zip(sm(x.numpy()), M()(x)):
        np.testing.assert_array_equal(r, e.numpy())

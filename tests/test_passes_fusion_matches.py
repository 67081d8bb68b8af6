"""What each fusion matches, node for node, on hand-built graphs: the positive form, the nodes it
absorbs and the inputs the fused op gets, and the near misses one detail away (written against the
mutants that survived the older fusion tests, docs/testing.md#mutation-testing)."""
from __future__ import annotations

import pytest

from srcore.ir import parse_graph
from srcore.ir.verify import verify
from srcore.passes import fuse_ops
from srcore.passes.fuse_chain import fuse_elementwise_chains

pytestmark = pytest.mark.one_pass


def kinds(g):
    return [n.kind for n in g.all_nodes() if n.kind not in ("prim::Constant", "prim::ListConstruct")]


def fused_node(g, kind):
    (node,) = [n for n in g.all_nodes() if n.kind == kind]
    return node


def inputs_of(node):
    """A fused node's inputs: graph inputs by name, constants by value."""
    return [v.node.attrs.get("value") if v.node.kind == "prim::Constant" else v.name for v in node.inputs]


# -- Bool(sum(x) > c) --------------------------------------------------------------------------------------
def sum_gt(x="Float(2, 3)", sum_args="%x, %none", cmp="aten::gt", red="aten::sum", c="0.5", c_type="float",
           extra=""):
    return (f"graph(%x : {x}, %in : float):\n  %none : NoneType = prim::Constant()\n"
            f"  %c : {c_type} = prim::Constant[value={c}]()\n"
            f"  %s : Tensor = {red}({sum_args})\n  %g : Tensor = {cmp}(%s, %c)\n"
            f"  %y : bool = aten::Bool(%g)\n  return (%y{extra})\n")


@pytest.mark.parametrize("text, c", [
    (sum_gt(), 0.5),
    (sum_gt(x="Double(2, 3)"), 0.5),
    (sum_gt(sum_args="%x"), 0.5),          # aten::sum(x): no dtype argument at all
    (sum_gt(c="3", c_type="int"), 3),
])
def test_sum_gt_fuses_to_one_node_reading_x_and_the_constant(text, c):
    g = parse_graph(text)
    applied = []
    assert fuse_ops(g, applied=applied) and applied == ["Bool(sum > c)"]
    assert kinds(g) == ["srcore::sum_gt"]
    node = fused_node(g, "srcore::sum_gt")
    assert inputs_of(node) == ["x", c] and node.output is g.outputs[0]


@pytest.mark.parametrize("text", [
    sum_gt(cmp="aten::lt"),                  # another comparison
    sum_gt(cmp="aten::ge"),
    sum_gt(red="aten::mean"),                # another reduction
    sum_gt(red="aten::amax", sum_args="%x"),
    sum_gt(x="Half(2, 3)"),                  # a dtype the kernel does not sum in
    sum_gt(x="Long(2, 3)"),
    sum_gt(c="1", c_type="bool"),
    sum_gt(c='"a"', c_type="str"),
    sum_gt().replace("%g : Tensor = aten::gt(%s, %c)", "%g : Tensor = aten::gt(%s, %in)"),  # not a constant
])
def test_sum_gt_near_misses_are_left_alone(text):
    g = parse_graph(text)
    before = kinds(g)
    assert fuse_ops(g) is False
    assert kinds(g) == before


# -- linear / conv2d + activation, conv2d + add + relu, add + relu ----------------------------------------
CONV_HEAD = ("graph(%x : Float(1, 2, 5, 5), %w : Float(3, 2, 3, 3), %b : Float(3), %o : {o}, %p : float):\n"
             "  %one : int = prim::Constant[value=1]()\n  %zero : int = prim::Constant[value=0]()\n"
             "  %alpha : {alpha_t} = prim::Constant[value={alpha}]()\n"
             "  %tr : bool = prim::Constant[value={tr}]()\n  %f : bool = prim::Constant[value=0]()\n"
             "  %s : int[] = prim::ListConstruct(%one, %one)\n  %z : int[] = prim::ListConstruct(%zero, %zero)\n"
             "  %g : int = prim::Constant[value=1]()\n")
CONV2D = "  %c : Float(1, 3, 3, 3) = aten::conv2d(%x, %w, %b, %s, %z, %s, %g), scope: net.conv\n"
CONVOLUTION = ("  %c : Float(1, 3, 3, 3) = aten::_convolution(%x, %w, %b, %s, %z, %s, %tr, %z, %g, %f, %f, %f, %f)"
               ", scope: net.conv\n")
CONV_ARGS = ["x", "w", "b", "s", "z", "s", "g"]


def conv_graph(tail, conv=CONV2D, o="Float(1, 3, 3, 3)", alpha="1", alpha_t="int", tr="0", ret="%y"):
    return (CONV_HEAD.format(o=o, alpha=alpha, alpha_t=alpha_t, tr=tr) + conv + tail
            + f"  return ({ret})\n")


def names(node):
    return [v.name if v.node.kind != "prim::Constant" or v.name in ("s", "z", "g", "alpha") else
            v.node.attrs.get("value") for v in node.inputs]


def fuse(text):
    g = parse_graph(text)
    applied = []
    fuse_ops(g, applied=applied)
    return g, applied


RELU = "  %y : Float(1, 3, 3, 3) = aten::relu(%c), scope: net.act\n"
ADD_RELU = ("  %a : Float(1, 3, 3, 3) = aten::add({lhs}, {rhs}, %alpha), scope: net.add\n"
            "  %y : Float(1, 3, 3, 3) = aten::{relu}(%a), scope: net.act\n")


@pytest.mark.parametrize("conv", [CONV2D, CONVOLUTION], ids=["conv2d", "_convolution"])
@pytest.mark.parametrize("relu", ["relu", "relu_"])
def test_conv_relu_reads_the_plain_conv2d_arguments_and_keeps_name_and_scopes(conv, relu):
    g, applied = fuse(conv_graph(RELU.replace("aten::relu", f"aten::{relu}"), conv=conv))
    assert applied == [f"conv2d + {relu}"]
    assert kinds(g) == ["srcore::conv2d_relu"]
    node = fused_node(g, "srcore::conv2d_relu")
    assert names(node) == CONV_ARGS            # _convolution: stride, padding, dilation, then groups (9th)
    assert node.output is g.outputs[0] and node.output.name == "y"
    assert node.meta["scope"] == "net.conv|net.act"


@pytest.mark.parametrize("text", [
    conv_graph(RELU, conv=CONVOLUTION, tr="1"),                                   # transposed
    conv_graph(RELU, conv=CONVOLUTION.replace("%s, %tr,", "%s, %b2,")).replace(
        "%p : float)", "%p : float, %b2 : bool)"),                               # transposed: unknown
    conv_graph(RELU, conv=CONVOLUTION.replace("Float(3, 2, 3, 3)", "")).replace(
        "%w : Float(3, 2, 3, 3)", "%w : Float(3, 2, 3)"),                          # a 1-d convolution's weight
    conv_graph(RELU, conv=CONVOLUTION).replace("%w : Float(3, 2, 3, 3)", "%w : Tensor"),   # rank unknown
    conv_graph(RELU, conv=CONV2D.replace(", %g)", ")")),              # conv2d without groups
    conv_graph(RELU, conv=CONVOLUTION.replace(", %f, %f, %f, %f)", ")")),   # 9 arguments: fine
    conv_graph(RELU, conv=CONV2D.replace("aten::conv2d", "aten::conv3d")),
    conv_graph(RELU.replace("aten::relu", "aten::relu6")),
    conv_graph(RELU, ret="%y, %c"),                                               # the conv used twice
])
def test_conv_relu_near_misses(text):
    g, applied = fuse(text)
    if "%z, %g)" in text:
        assert applied == ["conv2d + relu"]   # the short _convolution form still fuses
        return
    assert applied == [] and "srcore::conv2d_relu" not in kinds(g)


@pytest.mark.parametrize("lhs, rhs", [("%c", "%o"), ("%o", "%c")])
@pytest.mark.parametrize("relu", ["relu", "relu_"])
def test_conv_add_relu_takes_the_conv_from_either_side(lhs, rhs, relu):
    g, applied = fuse(conv_graph(ADD_RELU.format(lhs=lhs, rhs=rhs, relu=relu)))
    assert applied == [f"conv2d + add + {relu}"]
    assert kinds(g) == ["srcore::conv2d_add_relu"]
    node = fused_node(g, "srcore::conv2d_add_relu")
    assert names(node) == ["x", "w", "b", "o", "s", "z", "s", "g"]
    assert node.meta["scope"] == "net.conv|net.add|net.act" and node.output.name == "y"


@pytest.mark.parametrize("o, fuses", [
    ("Float(1, 3, 3, 3)", True), ("Float(3, 1, 1)", True), ("Float(1, 3, 1, 3)", True), ("Float(3)", True),
    ("Float(1, 1, 1, 1, 3)", False),        # more dims than the conv output: grows it
    ("Float(2, 3, 3, 3)", False), ("Float(3, 3, 3, 3)", False), ("Float(1, 3, 3, 4)", False),
    ("Float(1, 3, n, 3)", False),           # a symbolic dim might be anything
    ("Tensor", False), ("float", False),
])
def test_conv_add_relu_only_when_the_other_operand_cannot_grow_the_result(o, fuses):
    g, applied = fuse(conv_graph(ADD_RELU.format(lhs="%c", rhs="%o", relu="relu"), o=o))
    assert ("srcore::conv2d_add_relu" in kinds(g)) is fuses
    assert ("conv2d + add + relu" in applied) is fuses


@pytest.mark.parametrize("c, o, fuses", [
    ("Float(n, 3, 3, 3)", "Float(n, 3, 3, 3)", True),
    ("Float(n, 3, 3, 3)", "Float(n, 3, 3, 1)", True),    # the same symbol in the same place
    ("Float(n, 3, 3, 3)", "Float(m, 3, 3, 1)", False),
    ("Tensor", "Tensor", False),                         # equal, but nothing known of the shapes
])
def test_conv_add_relu_with_a_symbolic_conv_output(c, o, fuses):
    text = conv_graph(ADD_RELU.format(lhs="%c", rhs="%o", relu="relu"), o=o).replace(
        "%c : Float(1, 3, 3, 3)", f"%c : {c}")
    g, applied = fuse(text)
    assert (applied == ["conv2d + add + relu"]) is fuses


@pytest.mark.parametrize("alpha, alpha_t", [("2", "int"), ("1", "bool"), ("1.5", "float")])
def test_conv_add_relu_needs_alpha_one(alpha, alpha_t):
    g, applied = fuse(conv_graph(ADD_RELU.format(lhs="%c", rhs="%o", relu="relu"), alpha=alpha, alpha_t=alpha_t))
    assert "srcore::conv2d_add_relu" not in kinds(g)


def test_conv_add_relu_of_the_conv_added_to_itself_is_not_fused():
    g, applied = fuse(conv_graph(ADD_RELU.format(lhs="%c", rhs="%c", relu="relu")))
    assert "srcore::conv2d_add_relu" not in kinds(g)


def test_add_relu_of_two_tensors_fuses_with_its_alpha():
    g, applied = fuse(conv_graph(ADD_RELU.format(lhs="%o", rhs="%o", relu="relu"), ret="%y, %c"))
    assert applied == ["add + relu"]
    node = fused_node(g, "srcore::add_relu")
    assert names(node) == ["o", "o", "alpha"] and node.meta["scope"] == "net.add|net.act"


@pytest.mark.parametrize("lhs, rhs", [("%o", "%p"), ("%p", "%o")])
def test_add_relu_of_a_tensor_and_a_scalar_is_not_fused(lhs, rhs):
    g, applied = fuse(conv_graph(ADD_RELU.format(lhs=lhs, rhs=rhs, relu="relu"), ret="%y, %c"))
    assert applied == [] and "srcore::add_relu" not in kinds(g)


LINEAR = ("graph(%x : Float(2, 4), %w : Float(3, 4), %b : Float(3)):\n"
          '  %approx : str = prim::Constant[value="tanh"]()\n'
          "  %l : Float(2, 3) = aten::linear(%x, %w, %b), scope: net.fc\n"
          "  %y : Float(2, 3) = {act}), scope: net.act\n  return (%y{extra})\n")


@pytest.mark.parametrize("act, fused, extra", [
    ("aten::relu(%l", "srcore::linear_relu", []), ("aten::relu_(%l", "srcore::linear_relu", []),
    ("aten::gelu(%l, %approx", "srcore::linear_gelu", ["tanh"]), ("aten::silu(%l", "srcore::linear_silu", []),
    ("aten::tanh(%l", "srcore::linear_tanh", []), ("aten::sigmoid(%l", "srcore::linear_sigmoid", []),
])
def test_linear_activation_fuses_with_its_arguments(act, fused, extra):
    g = parse_graph(LINEAR.format(act=act, extra=""))
    assert fuse_ops(g)
    assert kinds(g) == [fused]
    node = fused_node(g, fused)
    assert names(node) == ["x", "w", "b"] + extra and node.output.name == "y"
    assert node.meta["scope"] == "net.fc|net.act"


def test_linear_with_two_arguments_or_used_twice_is_not_fused():
    g = parse_graph(LINEAR.format(act="aten::relu(%l", extra=", %l"))
    assert not fuse_ops(g)
    g = parse_graph(LINEAR.format(act="aten::relu(%l", extra="").replace("aten::linear(%x, %w, %b)",
                                                                          "aten::linear(%x, %w)"))
    assert not fuse_ops(g)


def test_fusions_are_found_inside_blocks_and_only_the_given_table_is_used():
    from srcore.passes.fuse import FUSIONS

    text = ("graph(%x : Float(2, 3), %o : Float(2, 3), %c : bool):\n  %one : int = prim::Constant[value=1]()\n"
            "  %r : Float(2, 3) = prim::If(%c)\n    block0():\n"
            "      %a : Float(2, 3) = aten::add(%x, %o, %one)\n      %y : Float(2, 3) = aten::relu(%a)\n"
            "      -> (%y)\n    block1():\n      -> (%x)\n  return (%r)\n")
    g = parse_graph(text)
    applied = []
    assert fuse_ops(g, applied=applied) and applied == ["add + relu"]
    assert "srcore::add_relu" in kinds(g) and "aten::add" not in kinds(g)
    g = parse_graph(text)
    assert not fuse_ops(g, fusions=[f for f in FUSIONS if f.name != "add + relu"])
    assert "srcore::add_relu" not in kinds(g)
    g = parse_graph(text)
    assert fuse_ops(g, fusions=[f for f in FUSIONS if f.name == "add + relu"])


# -- elementwise chains ------------------------------------------------------------------------------------
def chain(body, head="%x : Float(3, 4), %a : Float(3, 4), %b : Float(4), %c : Float(1, 4), %d : Float(3, 4), "
          "%e : Float(3, 4), %f : Float(3, 4)", ret="%y"):
    return (f"graph({head}):\n  %one : int = prim::Constant[value=1]()\n  %two : int = prim::Constant[value=2]()\n"
            "  %half : float = prim::Constant[value=0.5]()\n  %t : bool = prim::Constant[value=1]()\n"
            + body + f"  return ({ret})\n")


def fused_chain(text, **kw):
    """(program, operand names) of the one ew_chain made, or None when nothing fused."""
    g = parse_graph(text)
    changed = fuse_elementwise_chains(g, **kw)
    if changed is False:
        assert "srcore::ew_chain" not in kinds(g)
        return None
    assert changed is True
    node = [n for n in g.all_nodes() if n.kind == "srcore::ew_chain"][0]   # the first, when a cut made two
    return node.inputs[1].node.attrs["value"], [v.name for v in [node.inputs[0], *node.inputs[2:]]], g, node


def test_a_chain_becomes_one_node_with_its_program_and_operands():
    text = chain("  %p : Float(3, 4) = aten::mul(%x, %half), scope: m.a\n"
                 "  %q : Float(3, 4) = aten::add(%p, %a, %one), scope: m.b\n"
                 "  %r : Float(3, 4) = aten::tanh(%q)\n  %y : Float(3, 4) = aten::relu(%r), scope: m.c\n")
    program, operands, g, node = fused_chain(text)
    assert program == "mul:s:0.5;add:t:1;tanh;relu" and operands == ["x", "a"]
    assert kinds(g) == ["srcore::ew_chain"] and node.output.name == "y" and node.output is g.outputs[0]
    assert node.meta["scope"] == "m.a|m.b|m.c"
    verify(g)                                   # the program constant comes before the fused node
    g = parse_graph(text, filename="net.ir")
    last = next(n for n in g.all_nodes() if n.kind == "aten::relu")
    fuse_elementwise_chains(g)
    node = next(n for n in g.all_nodes() if n.kind == "srcore::ew_chain")
    assert node.source is not None and node.source == last.source      # the source of the last step


@pytest.mark.parametrize("body, program, operands", [
    # add and mul take the running value on either side (the first node's first operand starts the
    # chain); the chain input itself is operand 0
    ("  %p : Float(3, 4) = aten::mul(%a, %x)\n  %y : Float(3, 4) = aten::add(%b, %p, %one)\n",
     "mul:t:1;add:t:2", ["a", "x", "b"]),
    ("  %p : Float(3, 4) = aten::mul(%x, %x)\n  %y : Float(3, 4) = aten::sub(%p, %x, %one)\n",
     "mul:t:0;sub:t:0", ["x"]),
    ("  %p : Float(3, 4) = aten::add(%x, %a, %one)\n  %q : Float(3, 4) = aten::div(%p, %a)\n"
     "  %y : Float(3, 4) = aten::mul(%q, %c)\n", "add:t:1;div:t:1;mul:t:2", ["x", "a", "c"]),
    ("  %p : Float(3, 4) = aten::mul(%x, %two)\n  %y : Float(3, 4) = aten::sigmoid(%p)\n", "mul:s:2;sigmoid", ["x"]),
    # five distinct operands: the chain is cut from its end to four
    ("  %p : Float(3, 4) = aten::add(%x, %a, %one)\n  %q : Float(3, 4) = aten::add(%p, %b, %one)\n"
     "  %r : Float(3, 4) = aten::add(%q, %c, %one)\n  %s : Float(3, 4) = aten::add(%r, %d, %one)\n"
     "  %y : Float(3, 4) = aten::add(%s, %e, %one)\n", "add:t:1;add:t:2;add:t:3;add:t:4", ["x", "a", "b", "c", "d"]),
    # after the cut, an operand only the removed steps read goes too
    ("  %p : Float(3, 4) = aten::add(%x, %a, %one)\n  %q : Float(3, 4) = aten::add(%p, %b, %one)\n"
     "  %r : Float(3, 4) = aten::add(%q, %c, %one)\n  %s : Float(3, 4) = aten::add(%r, %d, %one)\n"
     "  %u : Float(3, 4) = aten::relu(%s)\n  %v : Float(3, 4) = aten::add(%u, %e, %one)\n"
     "  %y : Float(3, 4) = aten::add(%v, %f, %one)\n",
     "add:t:1;add:t:2;add:t:3;add:t:4;relu", ["x", "a", "b", "c", "d"]),
])
def test_chain_programs(body, program, operands):
    got = fused_chain(chain(body, ret="%y" if "%u " not in body else "%y"))
    assert got is not None
    assert got[0] == program and got[1] == operands


@pytest.mark.parametrize("body", [
    "  %p : Float(3, 4) = aten::relu(%x)\n  %y : Float(3, 4) = aten::sub(%a, %p, %one)\n",     # p not first
    "  %p : Float(3, 4) = aten::add(%x, %a, %two)\n  %y : Float(3, 4) = aten::relu(%p)\n",     # alpha 2
    "  %p : Float(3, 4) = aten::add(%x, %a, %t)\n  %y : Float(3, 4) = aten::relu(%p)\n",       # alpha True
    "  %p : Float(3, 4) = aten::mul(%x, %t)\n  %y : Float(3, 4) = aten::relu(%p)\n",           # a bool scalar
    '  %m : str = prim::Constant[value="floor"]()\n'
    "  %p : Float(3, 4) = aten::div(%x, %a, %m)\n  %y : Float(3, 4) = aten::relu(%p)\n",       # rounding mode
    "  %p : Float(3, 4) = aten::neg(%x)\n  %y : Float(3, 4) = aten::relu(%p)\n",               # not a step op
    "  %p : Float(3, 4) = aten::relu(%x)\n  %y : Double(3, 4) = aten::tanh(%p)\n",             # another type
    "  %y : Float(3, 4) = aten::relu(%x)\n",                                                    # one step
])
def test_chain_near_misses(body):
    assert fused_chain(chain(body)) is None


@pytest.mark.parametrize("t", ["Float(n, 4)", "Long(3, 4)", "Half(3, 4)", "Tensor"])
def test_chains_need_a_static_float_type(t):
    body = f"  %p : {t} = aten::add(%x, %a, %one)\n  %y : {t} = aten::relu(%p)\n"
    assert fused_chain(chain(body, head=f"%x : {t}, %a : {t}")) is None


@pytest.mark.parametrize("operand, ok", [
    ("Float(4)", True), ("Float(1, 4)", True), ("Float(3, 1)", True), ("Float(3, 4)", True),
    ("Float(2, 3, 4)", False), ("Float(5)", False), ("Double(4)", False), ("Float(k)", False), ("Tensor", False),
])
def test_tensor_operands_must_broadcast_into_the_chain(operand, ok):
    body = "  %p : Float(3, 4) = aten::mul(%x, %o)\n  %y : Float(3, 4) = aten::relu(%p)\n"
    got = fused_chain(chain(body, head=f"%x : Float(3, 4), %o : {operand}"))
    assert (got is not None) is ok
    if ok:
        assert got[0] == "mul:t:1;relu" and got[1] == ["x", "o"]


def test_min_steps_and_the_chain_ends_at_a_value_used_twice_or_in_another_block():
    two = "  %p : Float(3, 4) = aten::relu(%x)\n  %y : Float(3, 4) = aten::tanh(%p)\n"
    assert fused_chain(chain(two), min_steps=3) is None
    assert fused_chain(chain("  %y : Float(3, 4) = aten::relu(%x)\n"), min_steps=1)[0] == "relu"
    # %p used twice: relu alone is one step (not enough), tanh then sigmoid fuse on their own
    got = fused_chain(chain(two + "  %z : Float(3, 4) = aten::sigmoid(%y)\n  %w : Float(3, 4) = aten::neg(%p)\n",
                            ret="%z, %w"))
    assert got[0] == "tanh;sigmoid" and got[1] == ["p"]
    nested = chain("  %p : Float(3, 4) = aten::relu(%x)\n  %y : Float(3, 4) = prim::If(%t)\n    block0():\n"
                   "      %q : Float(3, 4) = aten::tanh(%p)\n      -> (%q)\n    block1():\n      -> (%p)\n")
    assert fused_chain(nested) is None


def test_no_chain_over_an_input_written_before_its_end():
    body = ("  %p : Float(3, 4) = aten::add(%x, %a, %one)\n  %w : Float(3, 4) = aten::mul_(%a, %two)\n"
            "  %y : Float(3, 4) = aten::relu(%p)\n")
    assert fused_chain(chain(body)) is None


def test_conv_add_relu_of_a_second_conv_and_with_a_non_constant_alpha():
    # both operands convs: the first cannot take the second (it would grow), the second takes the first
    text = conv_graph(ADD_RELU.format(lhs="%c1", rhs="%c", relu="relu"),
                      conv=CONV2D + CONV2D.replace("%c : Float(1, 3, 3, 3)", "%c1 : Float(3, 1, 1)")
                      .replace("(%x, %w, %b,", "(%x, %w, %o,"), o="Float(3)")
    g, applied = fuse(text)
    assert applied == ["conv2d + add + relu"]
    assert names(fused_node(g, "srcore::conv2d_add_relu")) == ["x", "w", "b", "c1", "s", "z", "s", "g"]
    text = conv_graph(ADD_RELU.format(lhs="%c", rhs="%o", relu="relu").replace(", %alpha)", ", %k)")).replace(
        "%p : float)", "%p : float, %k : int)")
    g, applied = fuse(text)
    assert "conv2d + add + relu" not in applied


def test_a_fusion_refused_for_a_written_input_leaves_room_for_the_next_one():
    """x is written later: conv2d + add + relu (which would read x at the relu) is refused, add + relu
    (which reads the conv's output) is not."""
    text = conv_graph(ADD_RELU.format(lhs="%c", rhs="%o", relu="relu")
                      + "  %x2 : Float(1, 2, 5, 5) = aten::mul_(%x, %p)\n", ret="%y, %x2")
    g, applied = fuse(text)
    assert applied == ["add + relu"]
    assert "aten::conv2d" in kinds(g)


def test_the_fused_node_keeps_the_activation_source():
    g = parse_graph(conv_graph(RELU), filename="net.ir")
    relu = next(n for n in g.all_nodes() if n.kind == "aten::relu")
    fuse_ops(g)
    node = fused_node(g, "srcore::conv2d_relu")
    assert node.source is not None and node.source == relu.source


@pytest.mark.parametrize("step", [
    "  %p : Float(3, 4) = aten::mul(%x, %s)\n",          # a scalar that is not a constant
    "  %p : Float(3, 4) = aten::add(%x, %a, %k)\n",      # an alpha that is not a constant
    "  %p : Float(3, 4) = aten::add(%x, %a)\n",          # no alpha at all
])
def test_chain_steps_need_constant_scalars_and_alpha(step):
    text = chain(step + "  %y : Float(3, 4) = aten::relu(%p)\n",
                 head="%x : Float(3, 4), %a : Float(3, 4), %s : float, %k : int")
    assert fused_chain(text) is None


def test_every_chain_of_a_block_is_fused_and_a_chain_ends_where_a_block_begins():
    # two chains in a row (the first over an input written later), then one cut by a block
    text = chain("  %p : Float(3, 4) = aten::add(%x, %a, %one)\n  %q : Float(3, 4) = aten::relu(%p)\n"
                 "  %w : Float(3, 4) = aten::mul_(%a, %two)\n"
                 "  %r : Float(3, 4) = aten::mul(%d, %half)\n  %u : Float(3, 4) = aten::tanh(%r)\n"
                 "  %v : Float(3, 4) = aten::sub(%e, %half, %one)\n  %z : Float(3, 4) = aten::sigmoid(%v)\n"
                 "  %y : Float(3, 4) = prim::If(%t)\n    block0():\n"
                 "      %k : Float(3, 4) = aten::relu(%z)\n      -> (%k)\n    block1():\n      -> (%f)\n",
                 ret="%q, %u, %y")
    g = parse_graph(text)
    assert fuse_elementwise_chains(g) is True
    programs = sorted(n.inputs[1].node.attrs["value"] for n in g.all_nodes() if n.kind == "srcore::ew_chain")
    assert programs == ["mul:s:0.5;tanh", "sub:s:0.5;sigmoid"]
    assert "aten::add" in kinds(g) and "aten::relu" in kinds(g)


def test_a_chain_may_start_on_the_second_operand_of_add_or_mul():
    got = fused_chain(chain("  %p : Float(3, 4) = aten::mul(%c, %x)\n  %y : Float(3, 4) = aten::relu(%p)\n"))
    assert got[0] == "mul:t:1;relu" and got[1] == ["x", "c"]

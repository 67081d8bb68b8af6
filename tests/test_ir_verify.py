"""The verifier: SSA, def-before-use across blocks, block arities, use lists, schemas."""
from __future__ import annotations

from pathlib import Path

import pytest

from srcore import VerificationError
from srcore.errors import SrcoreError
from srcore.ir.builder import GraphBuilder
from srcore.ir.graph import Graph
from srcore.ir.parser import parse_graph
from srcore.ir.types import TENSOR
from srcore.ir.verify import verify
from srcore.ops.schema import FunctionSchema

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

IF_TEXT = """graph(%x : Tensor, %c : bool):
  %r : Tensor = prim::If(%c)
    block0():
      %a : Tensor = aten::relu(%x)
      -> (%a)
    block1():
      -> (%x)
  %n : int = prim::Constant[value=2]()
  %t : bool = prim::Constant[value=1]()
  %l : Tensor = prim::Loop(%n, %t, %r)
    block0(%i : int, %y : Tensor):
      %z : Tensor = aten::neg(%y)
      -> (%t, %z)
  return (%l)
"""


def test_valid_graph_passes():
    assert verify(parse_graph(IF_TEXT)) is None


def test_use_before_def_in_same_block():
    g = parse_graph("graph(%x : Tensor):\n  %a : Tensor = aten::relu(%x)\n  %b : Tensor = aten::neg(%a)\n"
                    "  return (%b)\n")
    a, b = g.nodes
    b.move_before(a)  # %b's producer now uses %a before it is defined
    with pytest.raises(VerificationError, match=r"%a is used before it is defined.*\n.*aten::neg"):
        verify(g)


def test_value_from_inside_a_block_used_outside():
    g = parse_graph(IF_TEXT)
    if_ = g.nodes[0]
    inner = if_.blocks[0].nodes.first.output  # %a, defined in block0
    g.outputs[0].node.blocks[0].nodes.first.replace_input(0, inner)  # used in the loop body
    with pytest.raises(VerificationError, match="%a is defined inside a block that does not enclose"):
        verify(g)


def test_value_from_outer_block_is_fine_and_sibling_block_is_not():
    g = parse_graph(IF_TEXT)
    if_ = g.nodes[0]
    a = if_.blocks[0].nodes.first.output
    if_.blocks[1].return_node.replace_input(0, a)
    with pytest.raises(VerificationError, match="block"):
        verify(g)


def test_if_arity_and_condition_type():
    g = parse_graph(IF_TEXT)
    if_ = g.nodes[0]
    if_.blocks[1].erase_output(0)
    with pytest.raises(VerificationError, match="block1 of prim::If must .* return 1"):
        verify(g)
    g = parse_graph(IF_TEXT)
    g.nodes[0].replace_input(0, g.inputs[0])  # a Tensor condition
    with pytest.raises(VerificationError, match="condition must be bool"):
        verify(g)


def test_loop_arity():
    g = parse_graph(IF_TEXT)
    loop = list(g.nodes)[-1]
    loop.blocks[0].erase_output(1)
    with pytest.raises(VerificationError, match="prim::Loop with 1 outputs"):
        verify(g)


def test_broken_use_list_is_caught():
    g = parse_graph(IF_TEXT)
    x = g.inputs[0]
    x.uses.clear()
    with pytest.raises(VerificationError, match="use list of %x"):
        verify(g)


def test_error_names_node_and_source():
    b = GraphBuilder()
    x = b.input("x")
    with b.at("model.py:7:3"):
        y = b.op("aten::relu", x)
    b.output(y)
    g = b.graph
    y.node.replace_input(0, y)  # uses its own output
    with pytest.raises(VerificationError) as ei:
        verify(g)
    assert "aten::relu" in str(ei.value) and "model.py:7:3" in str(ei.value)


def test_value_of_another_graph():
    other = Graph()
    foreign = other.add_input(TENSOR, "f")
    b = GraphBuilder()
    b.output(b.op("aten::relu", foreign))
    with pytest.raises(VerificationError, match="another graph"):
        verify(b.graph)


class FakeRegistry:
    """Stands in for srcore.ops.registry.SchemaRegistry: resolve(node) -> FunctionSchema."""

    def __init__(self, *texts):
        self.schemas = {FunctionSchema.parse(t).name: FunctionSchema.parse(t) for t in texts}

    def resolve(self, node):
        try:
            return self.schemas[node.kind]
        except KeyError:
            raise VerificationError(f"unknown op {node.kind}") from None


REG = FakeRegistry("aten::relu(Tensor self) -> Tensor",
                   "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
                   "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")


def test_schema_checks():
    ok = parse_graph("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x)\n  %z : Tensor = aten::add_(%y, %x)\n"
                     "  return (%z)\n")
    verify(ok, REG)
    with pytest.raises(VerificationError, match="unknown op aten::neg"):
        verify(parse_graph("graph(%x : Tensor):\n  %y : Tensor = aten::neg(%x)\n  return (%y)\n"), REG)
    with pytest.raises(VerificationError, match="takes 1..1 inputs, got 2"):
        verify(parse_graph("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x, %x)\n  return (%y)\n"), REG)
    with pytest.raises(VerificationError, match="writes its argument self.*graph input %x"):
        verify(parse_graph("graph(%x : Tensor):\n  %z : Tensor = aten::add_(%x, %x)\n  return (%z)\n"), REG)
    with pytest.raises(VerificationError, match="must be a Tensor, got %n : int"):
        verify(parse_graph("graph(%x : Tensor):\n  %n : int = prim::Constant[value=1]()\n"
                           "  %y : Tensor = aten::relu(%n)\n  return (%y)\n"), REG)


def test_verification_error_is_srcore_error():
    assert issubclass(VerificationError, SrcoreError)


GOLDEN = sorted(p for p in (Path(__file__).parent / "golden" / "ir").glob("*.txt")
                if ".inlined" not in p.name and ".optimized" not in p.name)  # the frozen graphs


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_torch_graphs_verify_against_the_core_registry(path):
    from srcore.ops.registry import default_registry
    verify(parse_graph(path.read_text()), default_registry())


def test_core_registry_rejects_a_bad_call():
    from srcore.ops.registry import default_registry
    g = parse_graph('graph(%x : Tensor):\n  %s : str = prim::Constant[value="a"]()\n'
                    '  %y : Tensor = aten::relu(%s) # m.py:4:2\n  return (%y)\n')
    with pytest.raises(VerificationError, match=r"(?s)aten::relu.*m\.py:4:2"):
        verify(g, default_registry())

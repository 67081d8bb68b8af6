"""srcore.ir.alias: writes and aliasing derived from the schemas' alias annotations."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from srcore.ir.alias import (VIEW_OPS, alias_class, alias_sources, is_mutated, mutated_inputs, mutated_values)
from srcore.ir.parser import parse_graph
from srcore.ops.registry import default_registry
from srcore.ops.schema import FunctionSchema

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass


@pytest.fixture(scope="module")
def reg():
    return default_registry()


def _node(schema: str | None, n_inputs: int, kind: str | None = None):
    """A node of ``kind`` (default: the schema's name) with ``n_inputs`` graph inputs."""
    kind = kind or schema.split("(", 1)[0].split(".", 1)[0]
    args = ", ".join(f"%a{i}" for i in range(n_inputs))
    g = parse_graph(f"graph({', '.join(f'%a{i} : Tensor' for i in range(n_inputs))}):\n"
                    f"  %r : Tensor = {kind}({args})\n  return (%r)\n")
    node = next(iter(g.nodes))
    node.schema = FunctionSchema.parse(schema) if schema else None
    return node


@pytest.mark.parametrize("schema, n, sources, written", [
    ("aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", 3, [0], []),
    ("aten::relu(Tensor self) -> Tensor", 1, [], []),
    ("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", 3, [0], [0]),
    ("aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", 3, [2], [2]),
    # an element of a container argument (wildcard) and a type variable passed through
    ("aten::__getitem__.t(t[](a) list, int idx) -> t(*)", 2, [0], []),
    ("aten::list.t(t[] l) -> t[]", 1, [0], []),
    ("aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", 3, [0], []),
    # a string is never a view, though its op's name is in the table for nodes without a schema
    ("aten::slice.str(str string, int? start=None, int? end=None, int step=1) -> str", 4, [], []),
    # srcore's dropout kernel returns its input in eval mode though torch's schema says fresh
    ("aten::dropout(Tensor input, float p, bool train) -> Tensor", 3, [0], []),
])
def test_sources_and_writes_follow_the_schema(schema, n, sources, written):
    node = _node(schema, n)
    assert [node.inputs.index(v) for v in alias_sources(node)] == sources
    assert mutated_inputs(node) == written


def test_name_tables_only_without_a_schema():
    assert [v.name for v in alias_sources(_node(None, 2, "aten::view"))] == ["a0"]
    assert alias_sources(_node(None, 1, "aten::relu")) == []
    assert mutated_inputs(_node(None, 2, "aten::relu_")) == [0]
    assert mutated_inputs(_node(None, 2, "aten::append")) == [0]
    assert mutated_inputs(_node(None, 2, "aten::__iadd__")) == []  # a dunder is not an in-place op by name
    assert [v.name for v in alias_sources(_node(None, 3, "prim::ListConstruct"))] == ["a0", "a1", "a2"]


def test_the_name_table_agrees_with_the_core_schemas(reg):
    """Every declared tensor overload of an op in VIEW_OPS aliases its first argument by its schema:
    the table only stands in for a schema, it never disagrees with one."""
    checked = 0
    for name in VIEW_OPS:
        for s in reg.overloads(name):
            if s.arguments and str(s.arguments[0].type) in ("str", "str?"):
                continue  # strings are values
            node = _node(str(s), len(s.arguments))
            node.schema = s
            assert node.inputs[0] in alias_sources(node), str(s)
            checked += 1
    assert checked > 40


_OPS = [  # (text, schema overload) of ops a generated graph chains
    ("aten::transpose(%{x}, %c0, %c1)", "aten::transpose.int"),
    ("aten::relu(%{x})", "aten::relu"),
    ("aten::relu_(%{x})", "aten::relu_"),
    ("aten::view(%{x}, %shape)", "aten::view"),
    ("aten::add(%{x}, %{y}, %c1)", "aten::add.Tensor"),
    ("aten::add_(%{x}, %{y}, %c1)", "aten::add_.Tensor"),
    ("aten::contiguous(%{x}, %c0)", "aten::contiguous"),
    ("aten::clone(%{x}, %none)", "aten::clone"),
]


@st.composite
def _graphs(draw):
    lines, names = [], ["x0", "x1"]
    for i in range(draw(st.integers(1, 8))):
        text, overload = _OPS[draw(st.integers(0, len(_OPS) - 1))]
        x, y = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        lines.append((f"  %v{i} : Tensor = " + text.format(x=x, y=y), overload))
        names.append(f"v{i}")
    return lines, names


@settings(max_examples=60, deadline=None)
@given(_graphs())
def test_alias_classes_are_symmetric_and_mutated_values_matches_is_mutated(reg, case):
    lines, names = case
    text = ("graph(%x0 : Tensor, %x1 : Tensor):\n  %c0 : int = prim::Constant[value=0]()\n"
            "  %c1 : int = prim::Constant[value=1]()\n  %none : NoneType = prim::Constant()\n"
            "  %shape : int[] = prim::Constant[value=[-1]]()\n"
            + "\n".join(t for t, _ in lines) + f"\n  return (%{names[-1]})\n")
    g = parse_graph(text)
    ops = [n for n in g.nodes if n.kind != "prim::Constant"]
    for node, (_, overload) in zip(ops, lines):
        node.schema = reg.get(overload)
    values = {v.name: v for n in g.all_nodes() for v in n.outputs} | {v.name: v for v in g.inputs}
    tensors = [values[n] for n in names]
    for a in tensors:
        for b in alias_class(a):
            assert a in alias_class(b)
    assert {id(v) for v in tensors if is_mutated(v)} == {id(v) for v in tensors} & mutated_values(g)
    # hand-derived: a value is written when an in-place op takes it or anything in its view class
    for node in ops:
        for i in mutated_inputs(node):
            assert is_mutated(node.inputs[i])
    for v in tensors:
        if v.node.kind in ("aten::add", "aten::relu", "aten::clone") and not any(
                u.user.kind in ("aten::transpose", "aten::view", "aten::contiguous", "aten::relu_", "aten::add_")
                for u in v.uses):
            assert not is_mutated(v)  # a fresh result no one views or writes

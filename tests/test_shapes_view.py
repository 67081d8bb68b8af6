"""View/shape op rules against torch: view/reshape (hypothesis), slicing, cat/split/stack."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings, strategies as st

import srcore
from test_shapes_util import TL, T, check, one_node

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

small_shape = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(small_shape, st.data())
def test_view_with_minus_one_matches_torch(shape, data):
    n = math.prod(shape)
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    a = data.draw(st.sampled_from(divisors))
    target = data.draw(st.sampled_from([[a, -1], [-1, a], [a, n // a], [n], [-1]]))
    for op in ("view", "reshape"):
        check(f"aten::{op}", lambda x, s: getattr(x, op)(s), T("float32", *shape), target)


@settings(max_examples=40, deadline=None)
@given(small_shape, st.integers(2, 7))
def test_view_of_wrong_size_raises(shape, k):
    n = math.prod(shape)
    assume(n % k)
    with pytest.raises(srcore.ShapeError, match="invalid for input of size"):
        one_node("aten::view", T("float32", *shape), [k, -1])
    with pytest.raises(srcore.ShapeError, match="invalid"):
        one_node("aten::reshape", T("float32", *shape), [n + 1])


@settings(max_examples=80, deadline=None)
@given(small_shape, st.data())
def test_slice_matches_torch(shape, data):
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    start = data.draw(st.one_of(st.none(), st.integers(-6, 6)))
    end = data.draw(st.one_of(st.none(), st.integers(-6, 6), st.just(9223372036854775807)))
    step = data.draw(st.integers(1, 3))
    check("aten::slice", lambda x, d, s, e, st_: torch.ops.aten.slice(x, d, s, e, st_),
          T("float32", *shape), d, start, end, step)


@settings(max_examples=40, deadline=None)
@given(small_shape, st.data())
def test_select_narrow_unsqueeze_squeeze_flatten(shape, data):
    x = T("int64", *shape)
    r = len(shape)
    d = data.draw(st.integers(-r, r - 1))
    i = data.draw(st.integers(-shape[d], shape[d] - 1))
    check("aten::select", torch.select, x, d, i)
    check("aten::narrow", torch.narrow, x, d, 0, shape[d])
    u = data.draw(st.integers(-r - 1, r))
    check("aten::unsqueeze", torch.unsqueeze, x, u)
    check("aten::squeeze", torch.squeeze, x)
    check("aten::squeeze", torch.squeeze, x, d)
    a, b = sorted([data.draw(st.integers(0, r - 1)), data.draw(st.integers(0, r - 1))])
    check("aten::flatten", torch.flatten, x, a, b)
    perm = data.draw(st.permutations(range(r)))
    check("aten::permute", torch.permute, x, list(perm))
    check("aten::transpose", torch.transpose, x, d, a)
    check("aten::flip", torch.flip, x, [0])


def test_select_out_of_range_raises():
    with pytest.raises(srcore.ShapeError, match="out of range"):
        one_node("aten::select", T("float32", 2, 3), 1, 3)
    with pytest.raises(srcore.ShapeError, match="dim 2 out of range"):
        one_node("aten::unsqueeze", T("float32", 2), 2)


@settings(max_examples=40, deadline=None)
@given(small_shape, st.data())
def test_expand_repeat(shape, data):
    target = [d if d != 1 else data.draw(st.integers(1, 3)) for d in shape]
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    check("aten::expand", lambda x, s: x.expand(s), T("float32", *shape), lead + target)
    check("aten::expand", lambda x, s: x.expand(s), T("float32", *shape), [-1] * len(shape))
    check("aten::repeat", lambda x, s: x.repeat(s), T("float32", *shape), lead + target)


def test_expand_mismatch_raises():
    with pytest.raises(srcore.ShapeError, match="cannot expand"):
        one_node("aten::expand", T("float32", 2, 3), [2, 4])


@settings(max_examples=40, deadline=None)
@given(small_shape, st.data())
def test_cat_stack_split_chunk(shape, data):
    r = len(shape)
    d = data.draw(st.integers(-r, r - 1))
    others = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(shape)
        s[d] = data.draw(st.integers(1, 4))
        others.append(T("float32", *s))
    check("aten::cat", torch.cat, TL(others), d)
    check("aten::stack", torch.stack, TL([T("int32", *shape)] * 3), data.draw(st.integers(-r - 1, r)))
    n = shape[d]
    k = data.draw(st.integers(1, 4))
    node, _ = one_node("aten::split", T("float32", *shape), k, d, out_type=srcore.ir.ListType(srcore.ir.TENSOR))
    _, res = one_node("aten::split", T("float32", *shape), k, d)
    ref = torch.split(torch.zeros(shape), k, d)
    g_node, res = one_node("aten::chunk", T("float32", *shape), k, d, n_out=len(torch.chunk(torch.zeros(shape), k, d)))
    assert [o.type.shape for o in g_node.outputs] == [tuple(p.shape) for p in torch.chunk(torch.zeros(shape), k, d)]
    u_node, _ = one_node("aten::unbind", T("float32", *shape), d, n_out=n)
    assert [o.type.shape for o in u_node.outputs] == [tuple(p.shape) for p in torch.unbind(torch.zeros(shape), d)]


def test_cat_mismatch_raises():
    with pytest.raises(srcore.ShapeError, match="must match"):
        one_node("aten::cat", TL([T("float32", 2, 3), T("float32", 2, 4)]), 0)


def test_cat_with_an_input_of_unknown_rank_keeps_the_rank():
    """One input of unknown rank (an ONNX Loop's stacked output): the others give the rank and every
    dim but the cat dim (torch requires them equal; a legacy empty 1-D input is skipped), so a
    Gemm after it can be converted (wide & deep's EmbeddingBag Loop at opset 13 was refused)."""
    node, _ = one_node("aten::cat", TL([T("float32", 4, 6), srcore.ir.TensorType("float32", None), T("float32", 4, 3)]), 1)
    assert node.output.type.shape == (4, None)
    node, _ = one_node("aten::cat", TL([srcore.ir.TensorType("float32", None), T("float32", 2, 5, 3)]), -3)
    assert node.output.type.shape == (None, 5, 3)
    for legacy in (torch.zeros(0), torch.zeros(3, 5)):  # what the unknown input may be
        assert torch.cat([legacy, torch.zeros(3, 5)], 1 if legacy.dim() == 2 else 0).dim() == 2


def test_split_into_list_then_unpack():
    from srcore.ir import Graph
    from srcore.ir.types import TENSOR, ListType
    from srcore.ops.shapes import propagate
    g = Graph()
    x = g.add_input(T("float32", 5, 4), "x")
    lst = g.insert("aten::split", [x, g.insert_constant(2), g.insert_constant(0)], [ListType(TENSOR)]).output
    parts = g.insert("prim::ListUnpack", [lst], [TENSOR] * 3)
    propagate(g)
    assert [o.type.shape for o in parts.outputs] == [(2, 4), (2, 4), (1, 4)]


def test_symbolic_view_keeps_batch_and_solves_minus_one():
    from srcore.ir import Graph
    from srcore.ir.types import INT, TENSOR, ListType
    from srcore.ops.shapes import propagate
    g = Graph()
    x = g.add_input(T("float32", "batch", 3, 4), "x")
    b = g.insert("aten::size", [x, g.insert_constant(0)], [INT]).output
    lst = g.insert("prim::ListConstruct", [b, g.insert_constant(-1)], [ListType(INT)]).output
    v = g.insert("aten::view", [x, lst], [TENSOR]).output
    lst2 = g.insert("prim::ListConstruct", [g.insert_constant(-1), g.insert_constant(4)], [ListType(INT)]).output
    w = g.insert("aten::reshape", [x, lst2], [TENSOR]).output
    f = g.insert("aten::flatten", [x, g.insert_constant(0), g.insert_constant(1)], [TENSOR]).output
    res = propagate(g)
    assert v.type.shape == ("batch", 12)
    assert res.known[b] == "batch"
    assert w.type.shape == ("3*batch", 4)
    assert f.type.shape == ("3*batch", 4)


def _subst(d, env):
    if not isinstance(d, str):
        return d
    out = 1
    for part in d.split("*"):
        out *= int(part) if part.isdigit() else env[part]
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(1, 5), st.data())
def test_symbolic_dims_agree_with_concrete_ones(rest, batch, data):
    """Propagating with a symbolic batch, then substituting it, gives the concrete propagation."""
    n = math.prod(rest)
    k = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    target = data.draw(st.sampled_from([[-1, k], [k, -1], [-1], [0, -1]]))
    if target == [0, -1]:
        target = ["b", -1]  # the batch size read back with aten::size
    from srcore.ir import Graph
    from srcore.ir.types import INT, TENSOR, ListType
    from srcore.ops.shapes import propagate

    def build(x_type):
        g = Graph()
        x = g.add_input(x_type, "x")
        b = g.insert("aten::size", [x, g.insert_constant(0)], [INT]).output
        elems = [b if t == "b" else g.insert_constant(t) for t in target]
        lst = g.insert("prim::ListConstruct", elems, [ListType(INT)]).output
        v = g.insert("aten::view", [x, lst], [TENSOR]).output
        f = g.insert("aten::flatten", [x, g.insert_constant(0), g.insert_constant(-1)], [TENSOR]).output
        s = g.insert("aten::sum", [v, g.insert_constant([-1]), g.insert_constant(True), g.insert_constant(None)],
                     [TENSOR]).output
        propagate(g)
        return [v.type.shape, f.type.shape, s.type.shape]

    symbolic = build(T("float32", "batch", *rest))
    concrete = build(T("float32", batch, *rest))
    assert [tuple(_subst(d, {"batch": batch}) for d in s) for s in symbolic] == concrete
    assert all(d is not None for s in symbolic for d in s)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_torch(indexing):
    check("aten::meshgrid.indexing", lambda ts, i: torch.meshgrid(*ts, indexing=i),
          TL([T("int64", 3), T("int64", 5)]), indexing, n_out=2)
    check("aten::meshgrid.indexing", lambda ts, i: torch.meshgrid(*ts, indexing=i),
          TL([T("float32", 2), T("float32"), T("float32", 4)]), indexing, n_out=3)
    with pytest.raises(srcore.ShapeError, match="0-D or 1-D"):
        one_node("aten::meshgrid.indexing", TL([T("float32", 2, 2), T("float32", 3)]), indexing, n_out=2)


@pytest.mark.parametrize("dim,size,step", [(0, 2, 1), (1, 3, 2), (-1, 4, 4), (1, 7, 3)])
def test_tensor_unfold_matches_torch(dim, size, step):
    check("aten::unfold", lambda x, d, s, st_: x.unfold(d, s, st_), T("float32", 4, 7, 5), dim, size, step)
    with pytest.raises(srcore.ShapeError, match="exceeds"):
        one_node("aten::unfold", T("float32", 4, 7, 5), 1, 8, 1)


@pytest.mark.parametrize("arg", [3, 4, [1, 4], [2, 2, 9], [-2], [5, 1]])
def test_tensor_split_sections_and_indices_match_torch(arg):
    """``tensor_split(x, [1, 4])`` splits at indices; the rule once read them as sizes ("split sizes
    [1, 4] do not sum to dimension size 7")."""
    op = "aten::tensor_split.indices" if isinstance(arg, list) else "aten::tensor_split.sections"
    n_out = len(arg) + 1 if isinstance(arg, list) else arg
    check(op, lambda x, a, d: torch.tensor_split(x, a, d), T("float32", 3, 7), arg, 1, n_out=n_out)

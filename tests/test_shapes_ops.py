"""Rules for linalg, reductions, indexing, creation, casts and nn ops, checked against torch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

import srcore
from test_shapes_util import TL, T, check, one_node

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

F32 = "float32"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.lists(st.integers(1, 3), min_size=1, max_size=4),
       st.integers(1, 4))
def test_matmul_matches_torch(a, b, k):
    a = a[:-1] + [k]
    b = b[:-2] + [k] + b[-1:] if len(b) >= 2 else [k]
    try:
        torch.matmul(torch.zeros(a), torch.zeros(b))
    except RuntimeError:
        with pytest.raises(srcore.ShapeError):
            one_node("aten::matmul", T(F32, *a), T(F32, *b))
        return
    check("aten::matmul", torch.matmul, T(F32, *a), T(F32, *b))


def test_linalg_family():
    check("aten::mm", torch.mm, T(F32, 2, 3), T(F32, 3, 5))
    check("aten::bmm", torch.bmm, T(F32, 4, 2, 3), T(F32, 4, 3, 5))
    check("aten::addmm", lambda s_, a, b, be, al: torch.addmm(s_, a, b, beta=be, alpha=al), T(F32, 5), T(F32, 2, 3), T(F32, 3, 5), 1, 1)
    check("aten::baddbmm", lambda s_, a, b, be, al: torch.baddbmm(s_, a, b, beta=be, alpha=al), T(F32, 1, 2, 5), T(F32, 4, 2, 3), T(F32, 4, 3, 5), 1, 1)
    check("aten::linear", F.linear, T(F32, 7, 2, 3), T(F32, 5, 3), T(F32, 5))
    check("aten::linear", F.linear, T(F32, 3), T(F32, 5, 3), None)
    check("aten::einsum", torch.einsum, "bij,bjk->bik", TL([T(F32, 2, 3, 4), T(F32, 2, 4, 5)]))
    check("aten::einsum", torch.einsum, "ij,jk", TL([T(F32, 3, 4), T(F32, 4, 5)]))
    check("aten::einsum", torch.einsum, "...ij->...ji", TL([T(F32, 6, 3, 4)]))
    check("aten::t", torch.t, T(F32, 2, 3))
    check("aten::dot", torch.dot, T(F32, 3), T(F32, 3))
    check("aten::mv", torch.mv, T(F32, 2, 3), T(F32, 3))
    with pytest.raises(srcore.ShapeError, match="do not match"):
        one_node("aten::mm", T(F32, 2, 3), T(F32, 4, 5))
    with pytest.raises(srcore.ShapeError, match="do not match"):
        one_node("aten::linear", T(F32, 2, 3), T(F32, 5, 4), None)
    node, _ = one_node("srcore::linear_relu", T(F32, "batch", 3), T(F32, 5, 3), T(F32, 5))
    assert node.output.type == T(F32, "batch", 5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reductions_match_torch(shape, data):
    r = len(shape)
    dims = data.draw(st.lists(st.integers(-r, r - 1), unique_by=lambda d: d % r, max_size=r))
    keep = data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(["float32", "int32", "bool", "float64"]))
    x = T(dtype, *shape)
    check("aten::sum", lambda a, d, k, dt: torch.sum(a, d, k, dtype=dt), x, dims, keep, None)
    check("aten::sum", lambda a, dt: torch.sum(a, dtype=dt), x, None)
    check("aten::sum", lambda a, d, k, dt: torch.sum(a, d, k, dtype=torch.float64), x, dims, keep, 7)
    check("aten::amax", torch.amax, x, dims, keep)
    check("aten::any", torch.any, x, dims, keep) if dims else None
    d = data.draw(st.integers(-r, r - 1))
    check("aten::max", lambda a, d, k: torch.max(a, d, k), x, d, keep, n_out=2)
    if dtype != "bool":
        check("aten::argmax", torch.argmax, x, d, keep)
        check("aten::argmax", torch.argmax, x, None, False)
    check("aten::cumsum", lambda a, d, dt: torch.cumsum(a, d, dtype=dt), x, d, None)
    if dtype.startswith("float"):
        check("aten::mean", lambda a, d, k, dt: torch.mean(a, d, k, dtype=dt), x, dims, keep, None)
        check("aten::softmax", lambda a, d, dt: torch.softmax(a, d, dtype=dt), x, d, None)
        check("aten::log_softmax", lambda a, d, dt: torch.log_softmax(a, d, dtype=torch.float64), x, d, 7)
    if dtype != "bool":
        k = data.draw(st.integers(0, shape[d]))
        check("aten::topk", torch.topk, x, k, d, True, True, n_out=2)
        check("aten::sort", torch.sort, x, d, False, n_out=2)
    check("aten::max", torch.max, x)
    check("aten::max", torch.max, x, T(F32, *shape))


def test_topk_out_of_range_raises():
    with pytest.raises(srcore.ShapeError, match="out of range"):
        one_node("aten::topk", T(F32, 2, 3), 4, -1, True, True, n_out=2)


def test_indexing_matches_torch():
    check("aten::gather", torch.gather, T(F32, 3, 4), 1, T("int64", 3, 2))
    check("aten::index_select", torch.index_select, T(F32, 3, 4), 1, T("int64", 5))
    check("aten::embedding", torch.embedding, T(F32, 10, 4), T("int64", 2, 3))
    check("aten::index", lambda x, idx: x[tuple(idx)], T(F32, 3, 4, 5), TL([T("int64", 2), T("int64", 2)]))
    node, _ = one_node("aten::index", T(F32, 3, 4, 5), TL([T("bool", 3, 4)]))
    assert node.output.type == T(F32, None, 5)
    node, _ = one_node("aten::nonzero", T(F32, 3, 4))
    assert node.output.type == T("int64", None, 2)


def test_advanced_index_with_none_entries():
    from srcore.ir import Graph
    from srcore.ir.types import TENSOR, ListType, NONE, OptionalType
    from srcore.ops.shapes import propagate
    ref = torch.zeros(3, 4, 5)
    for pattern, want in (([None, "i"], ref[:, torch.zeros(2, dtype=torch.long)]),
                          (["i", None, "i"], ref[torch.zeros(2, 1, dtype=torch.long), :, torch.zeros(6, dtype=torch.long)])):
        g = Graph()
        x = g.add_input(T(F32, 3, 4, 5), "x")
        elems = []
        shapes = iter([(2,)] if pattern == [None, "i"] else [(2, 1), (6,)])
        for p in pattern:
            elems.append(g.insert_constant(None) if p is None else g.add_input(T("int64", *next(shapes))))
        lst = g.insert("prim::ListConstruct", elems, [ListType(OptionalType(TENSOR))]).output
        out = g.insert("aten::index", [x, lst], [TENSOR]).output
        propagate(g)
        assert out.type == T(F32, *want.shape)


def test_creation_and_casts():
    check("aten::zeros", lambda s, *a: torch.zeros(s), [2, 3], None, None, None, None)
    check("aten::ones", lambda s, dt, *a: torch.ones(s, dtype=torch.int64), [4], 4, None, None, None)
    check("aten::full", lambda s, v, *a: torch.full(s, v), [2], 3, None, None, None, None)
    check("aten::full", lambda s, v, *a: torch.full(s, v), [2], 1.5, None, None, None, None)
    check("aten::full", lambda s, v, *a: torch.full(s, v), [2], True, None, None, None, None)
    check("aten::arange", lambda e, *a: torch.arange(e), 5, None, None, None, None)
    check("aten::arange", lambda s, e, *a: torch.arange(s, e), 1, 2.5, None, None, None, None)
    check("aten::arange", lambda s, e, st_, *a: torch.arange(s, e, st_), 10, 1, -3, None, None, None, None)
    check("aten::zeros_like", lambda x, *a: torch.zeros_like(x), T("int32", 2, 3), None, None, None, None, None)
    check("aten::full_like", lambda x, v, dt, *a: torch.full_like(x, v, dtype=torch.float64), T("int32", 2, 3), 1,
          7, None, None, None, None)
    check("aten::to", lambda x, dt, *a: x.to(torch.float16), T(F32, 2, 3), 5, False, False, None)
    check("aten::to", lambda x, o, *a: x.to(o), T(F32, 2, 3), T("int8", 1), False, False, None)
    check("aten::type_as", lambda x, o: x.type_as(o), T(F32, 2, 3), T("int8", 1))
    check("aten::new_zeros", lambda x, s, *a: x.new_zeros(s), T("int16", 1), [3, 2], None, None, None, None)


def test_nn_ops():
    check("aten::batch_norm", F.batch_norm, T(F32, 2, 3, 4), T(F32, 3), T(F32, 3), T(F32, 3), T(F32, 3),
          False, 0.1, 1e-5)
    check("aten::layer_norm", F.layer_norm, T(F32, 2, 3, 4), [3, 4], T(F32, 3, 4), T(F32, 3, 4), 1e-5)
    check("aten::native_layer_norm", torch.native_layer_norm, T(F32, 2, 3, 4), [4], T(F32, 4), T(F32, 4), 1e-5,
          n_out=3)
    check("aten::group_norm", F.group_norm, T(F32, 2, 4, 5), 2, None, None, 1e-5)
    check("aten::scaled_dot_product_attention", F.scaled_dot_product_attention, T(F32, 2, 3, 5, 8),
          T(F32, 2, 3, 7, 8), T(F32, 2, 3, 7, 6))
    check("aten::glu", F.glu, T(F32, 2, 6), -1)
    check("aten::constant_pad_nd", torch.constant_pad_nd, T(F32, 2, 3, 4), [1, 2, 0, 3], 0.0)
    check("aten::dropout", torch.dropout, T("float16", 2, 3), 0.5, False)
    with pytest.raises(srcore.ShapeError, match="normalized_shape"):
        one_node("aten::layer_norm", T(F32, 2, 3, 4), [3], None, None, 1e-5, True)
    with pytest.raises(srcore.ShapeError, match="channels"):
        one_node("aten::batch_norm", T(F32, 2, 3, 4), T(F32, 5), None, None, None, False, 0.1, 1e-5, True)


def test_native_mha_and_encoder_layer():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    q = T(F32, 2, 5, 8)
    k = T(F32, 2, 5, 8)
    args = (q, k, k, 8, 2, T(F32, 24, 8), T(F32, 24), T(F32, 8, 8), T(F32, 8), None, True, False, None)
    node, _ = one_node("aten::_native_multi_head_attention", *args, n_out=2)
    ref = torch._native_multi_head_attention(torch.zeros(2, 5, 8), torch.zeros(2, 5, 8), torch.zeros(2, 5, 8), 8, 2,
                                             mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight,
                                             mha.out_proj.bias, None, True, False, None)
    assert [o.type.shape for o in node.outputs] == [tuple(r.shape) for r in ref]


@pytest.mark.parametrize("dim", [1, -1, 0])
def test_cosine_similarity_matches_torch(dim):
    check("aten::cosine_similarity", lambda a, b, d, e: torch.cosine_similarity(a, b, d, e),
          T("float32", 3, 4, 5), T("float32", 1, 4, 5), dim, 1e-8)


def test_distance_norm_bucketize_diag_rules_match_torch():
    check("aten::cdist", lambda a, b, p, m: torch.cdist(a, b, p), T("float32", 2, 4, 6), T("float32", 1, 5, 6), 2.0, None)
    check("aten::pairwise_distance", lambda a, b, p, e, k: F.pairwise_distance(a, b, p, e, k),
          T("float32", 4, 6), T("float32", 1, 6), 2.0, 1e-6, True)
    check("aten::linalg_norm", lambda x, o, d, k, dt: torch.linalg.norm(x, o, d, k), T("float32", 3, 4, 5), None,
          [1, 2], False, None)
    check("aten::linalg_norm", lambda x, o, d, k, dt: torch.linalg.norm(x, o, d, k), T("float32", 3, 4), 1.0,
          [-1], True, None)
    check("aten::bucketize.Tensor", lambda x, b, i, r: torch.bucketize(x, b, out_int32=i, right=r),
          T("float32", 2, 3), T("float32", 4), True, False)
    for shape, k in (((4,), 1), ((3, 5), 2), ((3, 5), -1), ((3, 5), 7)):
        check("aten::diag", lambda x, kk: torch.diag(x, kk), T("float32", *shape), k)
    with pytest.raises(srcore.ShapeError, match="at least 2D"):
        one_node("aten::cdist", T("float32", 4), T("float32", 3, 4), 2.0, None)


def test_grid_sampler_and_affine_grid_rules_match_torch():
    check("aten::grid_sampler", lambda x, g, m, p, a: F.grid_sample(x, g, "bilinear", "zeros", a),
          T("float32", 2, 3, 5, 7), T("float32", 2, 4, 6, 2), 0, 0, False)
    check("aten::affine_grid_generator", lambda t, s, a: F.affine_grid(t, s, a), T("float32", 2, 2, 3),
          [2, 3, 4, 5], False)
    with pytest.raises(srcore.ShapeError, match="last dim must be 2"):
        one_node("aten::grid_sampler", T("float32", 2, 3, 5, 7), T("float32", 2, 4, 6, 3), 0, 0, False)


@pytest.mark.one_pass
def test_a_tensor_list_takes_its_elements_common_dtype():
    """``prim::ListConstruct`` of tensors of one known dtype is a list of that dtype (an RNN's weight
    list: its kernel is then chosen with the dtype known, no check per call); mixed or unknown
    dtypes leave the element dtype unknown."""
    from srcore.ir import Graph
    from srcore.ir.types import TENSOR, ListType
    from srcore.ops.shapes import propagate

    for dtypes, want in ((("float32", "float32"), "float32"), (("float32", "float64"), None),
                         (("float32", None), None)):
        g = Graph()
        elems = [g.add_input(T(d, 2, 3) if d else TENSOR) for d in dtypes]
        out = g.insert("prim::ListConstruct", elems, [ListType(TENSOR)]).output
        propagate(g)
        assert isinstance(out.type, ListType) and out.type.elem.dtype == want, out.type

"""Shape/dtype rules of cumprod, median, one_hot, the 1-d/3-d/bicubic upsamples, select_scatter,
slice_scatter and copy, checked against torch, with and without the node's schema bound."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

import srcore
from srcore.ir import Graph
from srcore.ir.types import TENSOR, TensorType
from srcore.ops.registry import default_registry
from srcore.ops.shapes import propagate
from test_shapes_util import T, as_type, check, one_node, torch_args

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

F32 = "float32"
aten = torch.ops.aten
REG = default_registry()


def check_bound(qualified, torch_fn, *args, n_out=1):
    """As ``check``, but the node carries its schema (``qualified``), so rules see argument names."""
    g = Graph()
    inputs = [g.add_input(a, f"x{i}") if isinstance(a, TensorType) else g.insert_constant(a)
              for i, a in enumerate(args)]
    schema = REG.get(qualified)
    node = g.insert(schema.name, inputs, [TENSOR] * n_out)
    node.schema = schema
    for o in node.outputs:
        g.register_output(o)
    propagate(g)
    ref = torch_fn(*torch_args(args))
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    assert [o.type for o in node.outputs] == [as_type(r) for r in refs[:n_out]], (qualified, args)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_cumprod_median_match_torch(shape, data):
    r = len(shape)
    d = data.draw(st.integers(-r, r - 1))
    keep = data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(["float32", "float64", "int32", "int64", "bool"]))
    x = T(dtype, *shape)
    check("aten::cumprod", lambda a, dd, dt: torch.cumprod(a, dd, dtype=dt), x, d, None)
    check_bound("aten::cumprod", lambda a, dd: torch.cumprod(a, dd), x, d)
    check_bound("aten::cumprod", lambda a, dd, dt: torch.cumprod(a, dd, dtype=torch.float64), x, d, 7)
    if dtype == "bool":
        with pytest.raises(srcore.ShapeError, match="bool"):
            one_node("aten::median", x)
        return
    check("aten::median", torch.median, x)
    check("aten::median", lambda a, dd, k: torch.median(a, dd, k), x, d, keep, n_out=2)
    check_bound("aten::median", torch.median, x)
    check_bound("aten::median.dim", lambda a, dd, k: torch.median(a, dd, k), x, d, keep, n_out=2)


def test_median_errors():
    with pytest.raises(srcore.ShapeError, match="non-zero size"):
        one_node("aten::median", T(F32, 2, 0), 1, False, n_out=2)
    with pytest.raises(srcore.ShapeError, match="out of range"):
        one_node("aten::median", T(F32, 2, 3), 2, False, n_out=2)


@pytest.mark.parametrize("shape", [(3,), (2, 5), ()])
def test_one_hot(shape):
    x = T("int64", *shape)
    check("aten::one_hot", lambda a, n: F.one_hot(a, n), x, 4)
    check_bound("aten::one_hot", lambda a, n: F.one_hot(a, n), x, 4)
    node, _ = one_node("aten::one_hot", x, -1)  # inferred from the values: unknown last dim
    assert node.output.type == TensorType("int64", tuple(shape) + (None,))
    with pytest.raises(srcore.ShapeError, match="int64"):
        one_node("aten::one_hot", T("int32", *shape), 4)
    with pytest.raises(srcore.ShapeError, match="num_classes"):
        one_node("aten::one_hot", x, -2)


@pytest.mark.parametrize("scale", [2.0, 1.5, 0.7])
def test_upsample_1d_3d_bicubic(scale):
    x1, x2, x3 = T(F32, 2, 3, 7), T(F32, 1, 2, 5, 6), T(F32, 1, 2, 3, 4, 5)
    s3 = [scale, 2.0, 1.3]
    check("aten::upsample_nearest1d", lambda a, o, s: aten.upsample_nearest1d.vec(a, o, s), x1, None, [scale])
    check("aten::upsample_linear1d", lambda a, o, ac, s: aten.upsample_linear1d.vec(a, o, ac, s), x1, None,
          False, [scale])
    check("aten::upsample_nearest3d", lambda a, o, s: aten.upsample_nearest3d.vec(a, o, s), x3, None, s3)
    check("aten::upsample_trilinear3d", lambda a, o, ac, s: aten.upsample_trilinear3d.vec(a, o, ac, s), x3, None,
          True, s3)
    check("aten::upsample_bicubic2d", lambda a, o, ac, s: aten.upsample_bicubic2d.vec(a, o, ac, s), x2, None,
          False, [scale, 2.5])
    check_bound("aten::upsample_bicubic2d.vec", lambda a, o, ac, s: aten.upsample_bicubic2d.vec(a, o, ac, s), x2,
                None, False, [scale, 2.5])
    check_bound("aten::upsample_trilinear3d.vec", lambda a, o, ac, s: aten.upsample_trilinear3d.vec(a, o, ac, s),
                x3, None, False, s3)
    # classic overloads: the output size given (and the scales it came from)
    check_bound("aten::upsample_nearest1d", lambda a, o, s: aten.upsample_nearest1d(a, o, s), x1, [9], scale)
    check_bound("aten::upsample_linear1d", lambda a, o, ac: aten.upsample_linear1d(a, o, ac), x1, [4], True)
    check_bound("aten::upsample_nearest3d", lambda a, o: aten.upsample_nearest3d(a, o), x3, [2, 8, 5])
    check_bound("aten::upsample_trilinear3d", lambda a, o, ac: aten.upsample_trilinear3d(a, o, ac), x3,
                [6, 1, 5], False)
    check_bound("aten::upsample_bicubic2d", lambda a, o, ac: aten.upsample_bicubic2d(a, o, ac), x2, [4, 9], False)
    check("aten::upsample_bicubic2d", lambda a, o, ac: aten.upsample_bicubic2d(a, o, ac), x2, [11, 3], True)


@settings(max_examples=60, deadline=None)
@given(st.integers(-3, 2), st.one_of(st.none(), st.integers(-6, 6)), st.one_of(st.none(), st.integers(-6, 6)),
       st.integers(1, 3), st.integers(-4, 4))
def test_select_slice_scatter_match_torch(dim, start, end, step, index):
    shape = (3, 4, 5)
    x = T(F32, *shape)
    key = [slice(None)] * 3
    key[dim] = slice(start, end, step)
    view = torch.zeros(shape)[tuple(key)].shape
    check_bound("aten::slice_scatter", lambda a, s, *r: torch.slice_scatter(a, s, *r), x, T(F32, *view), dim, start,
                end, step)
    check("aten::slice_scatter", lambda a, s, *r: torch.slice_scatter(a, s, *r), x, T(F32, *view), dim, start, end,
          step)
    if -shape[dim] <= index < shape[dim]:
        sel = tuple(n for i, n in enumerate(shape) if i != dim % 3)
        check_bound("aten::select_scatter", lambda a, s, d, i: torch.select_scatter(a, s, d, i), x, T(F32, *sel),
                    dim, index)
    else:
        with pytest.raises(srcore.ShapeError, match="out of range"):
            one_node("aten::select_scatter", x, T(F32, 5), dim, index)


def test_scatter_src_shape_errors():
    x = T(F32, 3, 4, 5)
    with pytest.raises(srcore.ShapeError, match="src to have a size equal"):
        one_node("aten::select_scatter", x, T(F32, 3, 1), 1, 2)
    with pytest.raises(srcore.ShapeError, match="src to have a size equal"):
        one_node("aten::slice_scatter", x, T(F32, 3, 1, 5), 1, 1, 3, 1)
    with pytest.raises(srcore.ShapeError, match="step must be positive"):
        one_node("aten::slice_scatter", x, T(F32, 3, 2, 5), 1, 0, 4, 0)
    node, _ = one_node("aten::slice_scatter", T(F32, "n", 4), T(F32, "m", 4), 0, 1, None, 1)  # symbolic: passes
    assert node.output.type == T(F32, "n", 4)


@pytest.mark.parametrize("self_t,src_t", [(T(F32, 3, 4), T(F32, 3, 4)), (T("int32", 3, 4), T("float64", 4)),
                                          (T("bool", 2, 1, 3), T(F32, 1, 3))])
def test_copy(self_t, src_t):
    check("aten::copy", aten.copy, self_t, src_t)
    check_bound("aten::copy", aten.copy, self_t, src_t)


def test_copy_src_must_broadcast_to_self():
    with pytest.raises(srcore.ShapeError, match="does not broadcast"):
        one_node("aten::copy", T(F32, 5), T(F32, 3, 5))
    with pytest.raises(srcore.ShapeError):
        one_node("aten::copy", T(F32, 3, 4), T(F32, 2, 4))

"""Shape rules of repeat_interleave, im2col/col2im (and the existing argsort / pixel_(un)shuffle rules
on the newly declared overloads) against torch, with the node's schema bound."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import srcore
from srcore.ir import Graph
from srcore.ir.types import TENSOR, TensorType
from srcore.ops.registry import default_registry
from srcore.ops.shapes import propagate

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

REG = default_registry()


def bound(qualified, *args):
    """Output types of one node of overload ``qualified`` (TensorType args are inputs, others constants)."""
    g = Graph()
    ins = [g.add_input(a, f"x{i}") if isinstance(a, TensorType) else g.insert_constant(a) for i, a in enumerate(args)]
    schema = REG.get(qualified)
    node = g.insert(schema.name, ins, [TENSOR] * len(schema.returns))
    node.schema = schema
    for o in node.outputs:
        g.register_output(o)
    propagate(g)
    return [o.type for o in node.outputs]


def shape(types):
    return [t.shape for t in types]


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_repeat_interleave_int(dim):
    x = torch.zeros(3, 4)
    want = torch.repeat_interleave(x, 3, dim)
    assert shape(bound("aten::repeat_interleave.self_int", TensorType("float32", (3, 4)), 3, dim, None)) \
        == [tuple(want.shape)]
    got = bound("aten::repeat_interleave.self_int", TensorType("float32", ("b", 4)), 3, dim, None)
    assert got[0].shape == {None: ("12*b",), 0: ("3*b", 4), 1: ("b", 12), -1: ("b", 12)}[dim]


def test_repeat_interleave_data_dependent():
    x = TensorType("float32", (3, 4))
    r = TensorType("int64", (4,))
    assert shape(bound("aten::repeat_interleave.self_Tensor", x, r, 1, None)) == [(3, None)]
    assert shape(bound("aten::repeat_interleave.self_Tensor", x, r, 1, 9)) == [(3, 9)]
    assert shape(bound("aten::repeat_interleave.self_Tensor", x, r, None, None)) == [(None,)]
    assert bound("aten::repeat_interleave.Tensor", r, None) == [TensorType("int64", (None,))]
    assert bound("aten::repeat_interleave.Tensor", r, 7) == [TensorType("int64", (7,))]
    with pytest.raises(srcore.ShapeError, match="1-D"):
        bound("aten::repeat_interleave.Tensor", TensorType("int64", (2, 2)), None)
    with pytest.raises(srcore.ShapeError, match="negative"):
        bound("aten::repeat_interleave.self_int", x, -1, 0, None)


GEOMS = [((3, 3), (1, 1), (0, 0), (1, 1)), ((2, 3), (2, 1), (1, 2), (2, 1)), ((1, 1), (1, 1), (1, 1), (3, 3))]


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("g", GEOMS)
def test_im2col_col2im(g, batched):
    k, d, p, s = g
    x = torch.zeros((2, 3, 7, 6) if batched else (3, 7, 6))
    cols = F.unfold(x, k, d, p, s)
    xt = TensorType("float32", tuple(x.shape))
    assert bound("aten::im2col", xt, list(k), list(d), list(p), list(s)) == [TensorType("float32", tuple(cols.shape))]
    back = F.fold(cols, (7, 6), k, d, p, s)
    ct = TensorType("float32", tuple(cols.shape))
    assert bound("aten::col2im", ct, [7, 6], list(k), list(d), list(p), list(s)) == \
        [TensorType("float32", tuple(back.shape))]


def test_im2col_col2im_errors_and_symbols():
    assert bound("aten::im2col", TensorType("float32", ("n", 3, 7, 6)), [3, 3], [1, 1], [0, 0], [1, 1]) == \
        [TensorType("float32", ("n", 27, 20))]
    with pytest.raises(srcore.ShapeError, match="does not fit"):
        bound("aten::im2col", TensorType("float32", (1, 1, 2, 2)), [3, 3], [1, 1], [0, 0], [1, 1])
    with pytest.raises(srcore.ShapeError, match=r"expected 5\*4 = 20 blocks"):
        bound("aten::col2im", TensorType("float32", (1, 9, 7)), [7, 6], [3, 3], [1, 1], [0, 0], [1, 1])
    with pytest.raises(srcore.ShapeError, match="divisible by the kernel size"):
        bound("aten::col2im", TensorType("float32", (1, 10, 20)), [7, 6], [3, 3], [1, 1], [0, 0], [1, 1])


def test_argsort_and_pixel_shuffle_overloads():
    x = TensorType("float32", (2, 8, 3, 3))
    assert bound("aten::argsort.stable", x, True, 1, False) == [TensorType("int64", (2, 8, 3, 3))]
    assert bound("aten::pixel_shuffle", x, 2) == [TensorType("float32", tuple(F.pixel_shuffle(torch.zeros(2, 8, 3, 3),
                                                                                                2).shape))]
    assert bound("aten::pixel_unshuffle", TensorType("float32", (2, 1, 4, 6)), 2) == \
        [TensorType("float32", (2, 4, 2, 3))]

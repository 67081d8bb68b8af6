"""Convolution, pooling (ceil_mode) and upsampling output sizes against torch (hypothesis)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings, strategies as st

import srcore
from test_shapes_util import T, check, one_node

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.data())
def test_conv_matches_torch(nd, data):
    groups = data.draw(st.sampled_from([1, 2]))
    cin, cout = 2 * data.draw(st.integers(1, 2)), 2 * data.draw(st.integers(1, 2))
    k = data.draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd))
    size = data.draw(st.lists(st.integers(3, 8), min_size=nd, max_size=nd))
    stride = data.draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd))
    pad = data.draw(st.lists(st.integers(0, 2), min_size=nd, max_size=nd))
    dil = data.draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
    assume(all(s + 2 * p - d * (kk - 1) - 1 >= 0 for s, p, d, kk in zip(size, pad, dil, k)))
    batched = data.draw(st.booleans())
    x = T("float32", *([2] if batched else []), cin, *size)
    w = T("float32", cout, cin // groups, *k)
    b = T("float32", cout)
    fn = getattr(torch, f"conv{nd}d")
    check(f"aten::conv{nd}d", fn, x, w, b, stride, pad, dil, groups)
    if batched:
        check("aten::_convolution", lambda *a: torch.ops.aten._convolution(*a), x, w, b, stride, pad, dil,
              False, [0] * nd, groups, False, False, True, True)
        check(f"aten::conv{nd}d", fn, x, w, None, [1] * nd, "same", dil, groups)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_conv_transpose_matches_torch(data):
    k = data.draw(st.integers(1, 3))
    s = data.draw(st.integers(1, 3))
    p = data.draw(st.integers(0, k - 1))
    op = data.draw(st.integers(0, s - 1))
    d = data.draw(st.integers(1, 2))
    assume(op < max(s, d))
    check("aten::conv_transpose2d", torch.conv_transpose2d, T("float32", 1, 4, 5, 6), T("float32", 4, 2, k, k),
          None, s, p, op, 2, d)


def test_conv_channel_mismatch_raises():
    with pytest.raises(srcore.ShapeError, match="channels"):
        one_node("aten::conv2d", T("float32", 1, 3, 8, 8), T("float32", 4, 2, 3, 3), None, [1, 1], [0, 0],
                 [1, 1], 1)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3), st.data())
def test_pools_match_torch(nd, data):
    size = data.draw(st.lists(st.integers(4, 9), min_size=nd, max_size=nd))
    k = data.draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd))
    stride = data.draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd))
    pad = [data.draw(st.integers(0, kk // 2)) for kk in k]
    dil = data.draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
    assume(all(n + 2 * p - d * (kk - 1) - 1 >= 0 for n, p, d, kk in zip(size, pad, dil, k)))
    ceil = data.draw(st.booleans())
    x = T("float32", 1, 2, *size)
    check(f"aten::max_pool{nd}d", getattr(F, f"max_pool{nd}d"), x, k, stride, pad, dil, ceil)
    check(f"aten::max_pool{nd}d_with_indices", lambda *a: getattr(torch.ops.aten, f"max_pool{nd}d_with_indices")(*a)
          if nd > 1 else F.max_pool1d_with_indices(*a), x, k, stride, pad, dil, ceil, n_out=2)
    if nd == 1:
        check("aten::avg_pool1d", torch.avg_pool1d, x, k, stride, pad, ceil, True)
    else:
        check(f"aten::avg_pool{nd}d", getattr(torch._C._nn, f"avg_pool{nd}d"), x, k, stride, pad, ceil, True, None)
    out = data.draw(st.lists(st.integers(1, 5), min_size=nd, max_size=nd))
    check(f"aten::adaptive_avg_pool{nd}d", getattr(F, f"adaptive_avg_pool{nd}d"), x, out)
    check(f"aten::adaptive_max_pool{nd}d", lambda a, o: getattr(torch.ops.aten, f"adaptive_max_pool{nd}d")(a, o),
          x, out, n_out=2)


def test_pool_too_small_raises():
    with pytest.raises(srcore.ShapeError, match="too small"):
        one_node("aten::max_pool2d", T("float32", 1, 1, 2, 2), [3, 3], [1, 1], [0, 0], [1, 1], False)


@pytest.mark.parametrize("scale", [2.0, 1.5, 0.5])
def test_upsample_matches_torch(scale):
    x = T("float32", 1, 2, 5, 7)
    check("aten::upsample_nearest2d", lambda a, o, s: torch.ops.aten.upsample_nearest2d.vec(a, o, s), x, None,
          [scale, scale])
    check("aten::upsample_bilinear2d", lambda a, o, ac, s: torch.ops.aten.upsample_bilinear2d.vec(a, o, ac, s), x,
          None, False, [scale, 2.0])
    check("aten::upsample_nearest2d", lambda a, o, s: torch.ops.aten.upsample_nearest2d.vec(a, o, s), x, [3, 4],
          None)

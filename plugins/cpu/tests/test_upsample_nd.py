"""upsample kernels beyond 2-d nearest/bilinear vs torch: nearest1d/3d, linear1d, trilinear3d, bicubic2d
(classic overloads with output sizes and scales, .vec overloads with scale factors), __interpolate bicubic."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

from srcore_cpu.kernels import upsample as K  # noqa: E402
from cpu_kernel_util import make_rand, check_both as both  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

aten = torch.ops.aten
T = torch.from_numpy
F = torch.nn.functional
RNG = np.random.default_rng(3)
rand = make_rand(RNG)


DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,o", [(7, 13), (7, 3), (5, 5), (1, 4), (6, 1)])
def test_nearest1d_linear1d(n, o, dtype):
    x = rand(2, 3, n, dtype=dtype)
    both(K.upsample_nearest1d, aten.upsample_nearest1d(T(x), [o]).numpy(), x, [o])
    both(K.upsample_nearest1d_vec, aten.upsample_nearest1d.vec(T(x), [o], None).numpy(), x, [o], None)
    for align in (False, True):
        both(K.upsample_linear1d, aten.upsample_linear1d(T(x), [o], align).numpy(), x, [o], align)
        both(K.upsample_linear1d_vec, aten.upsample_linear1d.vec(T(x), [o], align, None).numpy(), x, [o], align, None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("osz", [(4, 7, 9), (2, 3, 2), (3, 4, 5), (1, 1, 1)])
def test_nearest3d_trilinear3d(osz, dtype):
    x = rand(1, 2, 3, 4, 5, dtype=dtype)
    both(K.upsample_nearest3d, aten.upsample_nearest3d(T(x), osz).numpy(), x, osz)
    both(K.upsample_nearest3d_vec, aten.upsample_nearest3d.vec(T(x), osz, None).numpy(), x, osz, None)
    for align in (False, True):
        both(K.upsample_trilinear3d, aten.upsample_trilinear3d(T(x), osz, align).numpy(), x, osz, align)
        both(K.upsample_trilinear3d_vec, aten.upsample_trilinear3d.vec(T(x), osz, align, None).numpy(),
             x, osz, align, None)


@pytest.mark.parametrize("scales", [[2.0, 2.0, 2.0], [1.5, 0.7, 2.3], [1.0, 3.0, 0.5]])
def test_3d_scale_factors(scales):
    x = rand(1, 2, 3, 4, 5)
    both(K.upsample_nearest3d_vec, aten.upsample_nearest3d.vec(T(x), None, scales).numpy(), x, None, scales)
    osz = [int(n * s) for n, s in zip(x.shape[2:], scales)]
    both(K.upsample_nearest3d, aten.upsample_nearest3d(T(x), osz, *scales).numpy(), x, osz, *scales)
    for align in (False, True):
        both(K.upsample_trilinear3d_vec, aten.upsample_trilinear3d.vec(T(x), None, align, scales).numpy(),
             x, None, align, scales)
        both(K.upsample_trilinear3d, aten.upsample_trilinear3d(T(x), osz, align, *scales).numpy(),
             x, osz, align, *scales)


@pytest.mark.parametrize("scale", [2.0, 1.7, 0.6])
def test_1d_scale_factors(scale):
    x = rand(2, 2, 9)
    o = [int(9 * scale)]
    both(K.upsample_nearest1d_vec, aten.upsample_nearest1d.vec(T(x), None, [scale]).numpy(), x, None, [scale])
    both(K.upsample_nearest1d, aten.upsample_nearest1d(T(x), o, scale).numpy(), x, o, scale)
    both(K.upsample_linear1d_vec, aten.upsample_linear1d.vec(T(x), None, False, [scale]).numpy(),
         x, None, False, [scale])
    both(K.upsample_linear1d, aten.upsample_linear1d(T(x), o, False, scale).numpy(), x, o, False, scale)


BICUBIC_SIZES = [((1, 3, 6, 6), (4, 9)), ((2, 2, 5, 7), (11, 3)), ((1, 1, 1, 1), (3, 3)), ((1, 1, 4, 4), (4, 4)),
                 ((1, 2, 3, 8), (1, 1)), ((1, 1, 2, 9), (7, 20)), ((1, 1, 16, 16), (37, 5))]


@pytest.mark.parametrize("shape,osz", BICUBIC_SIZES)
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bicubic2d(shape, osz, align, dtype):
    x = rand(*shape, dtype=dtype)
    both(K.upsample_bicubic2d, aten.upsample_bicubic2d(T(x), osz, align).numpy(), x, osz, align)
    both(K.upsample_bicubic2d_vec, aten.upsample_bicubic2d.vec(T(x), osz, align, None).numpy(), x, osz, align, None)


@pytest.mark.parametrize("scales", [[2.0, 2.0], [1.5, 1.7], [1.3, 2.6], [0.6, 0.8]])
@pytest.mark.parametrize("align", [False, True])
def test_bicubic2d_scales(scales, align):
    x = rand(1, 2, 5, 6)
    both(K.upsample_bicubic2d_vec, aten.upsample_bicubic2d.vec(T(x), None, align, scales).numpy(),
         x, None, align, scales)
    osz = [int(5 * scales[0]), int(6 * scales[1])]
    both(K.upsample_bicubic2d, aten.upsample_bicubic2d(T(x), osz, align, *scales).numpy(), x, osz, align, *scales)


def test_bicubic_overshoots_and_clamps_at_the_border():
    # a step: Keys' kernel (A = -0.75) overshoots on both sides; taps past the edge repeat the edge pixel
    x = np.zeros((1, 1, 1, 8), np.float64)
    x[..., 4:] = 1.0
    exp = aten.upsample_bicubic2d(T(x), [1, 29], False).numpy()
    both(K.upsample_bicubic2d, exp, x, [1, 29], False)
    assert exp.min() < 0 and exp.max() > 1


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 17), st.integers(1, 17), st.booleans(),
       st.sampled_from(DTYPES))
def test_bicubic2d_any_size(h, w, oh, ow, align, dtype):
    x = np.random.default_rng(h * 100 + w).standard_normal((1, 2, h, w)).astype(dtype)
    both(K.upsample_bicubic2d, aten.upsample_bicubic2d(T(x), [oh, ow], align).numpy(), x, [oh, ow], align)


@pytest.mark.parametrize("kw", [dict(size=[7, 9], scale_factor=None, align_corners=False),
                                dict(size=None, scale_factor=1.6, align_corners=True),
                                dict(size=None, scale_factor=[0.7, 2.0], align_corners=False)])
def test_interpolate_bicubic(kw):
    x = rand(2, 3, 4, 5)
    exp = F.interpolate(T(x), mode="bicubic", **kw).numpy()
    both(K.__interpolate, exp, x, kw["size"], kw["scale_factor"], "bicubic", kw["align_corners"])


def test_decl_covers_every_overload():
    from srcore_cpu.decl import upsample as D
    ops = {k.op for k in D.KERNELS}
    for op in ("nearest1d", "nearest3d", "linear1d", "trilinear3d", "bicubic2d"):
        assert {f"aten::upsample_{op}", f"aten::upsample_{op}.vec"} <= ops
    for k in D.KERNELS:
        mod, _, attr = k.impl.partition(":")
        assert callable(getattr(__import__(mod, fromlist=[attr]), attr))

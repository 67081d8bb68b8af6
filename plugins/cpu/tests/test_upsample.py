"""upsample kernels vs torch: nearest/bilinear 2-D (sizes, scales, .vec), __interpolate."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore_cpu.kernels import upsample as K  # noqa: E402
from cpu_kernel_util import make_rand, check_both as both  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)
rand = make_rand(RNG)
aten = torch.ops.aten
T = torch.from_numpy
F = torch.nn.functional


SIZES = [((2, 3, 4, 5), [8, 10]), ((1, 2, 5, 7), [3, 4]), ((1, 1, 3, 3), [7, 5]), ((2, 2, 4, 4), [4, 4]),
         ((1, 1, 5, 4), [1, 1])]


@pytest.mark.parametrize("shape,osz", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nearest2d(shape, osz, dtype):
    x = rand(*shape, dtype=dtype)
    both(K.upsample_nearest2d, aten.upsample_nearest2d(T(x), osz).numpy(), x, osz)
    both(K.upsample_nearest2d_vec, aten.upsample_nearest2d(T(x), osz, None).numpy(), x, osz, None)


@pytest.mark.parametrize("shape,osz", SIZES)
@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bilinear2d(shape, osz, align, dtype):
    x = rand(*shape, dtype=dtype)
    both(K.upsample_bilinear2d, aten.upsample_bilinear2d(T(x), osz, align).numpy(), x, osz, align)
    both(K.upsample_bilinear2d_vec, aten.upsample_bilinear2d(T(x), osz, align, None).numpy(), x, osz, align, None)


@pytest.mark.parametrize("scales", [[2.0, 2.0], [1.5, 0.7], [3.0, 1.0]])
@pytest.mark.parametrize("align", [True, False])
def test_scale_factors(scales, align):
    x = rand(1, 2, 5, 6)
    both(K.upsample_nearest2d_vec, aten.upsample_nearest2d(T(x), None, scales).numpy(), x, None, scales)
    both(K.upsample_bilinear2d_vec, aten.upsample_bilinear2d(T(x), None, align, scales).numpy(),
         x, None, align, scales)
    osz = [int(5 * scales[0]), int(6 * scales[1])]
    both(K.upsample_nearest2d, aten.upsample_nearest2d(T(x), osz, *scales).numpy(), x, osz, *scales)
    both(K.upsample_bilinear2d, aten.upsample_bilinear2d(T(x), osz, align, *scales).numpy(), x, osz, align, *scales)


@pytest.mark.parametrize("kw", [
    dict(size=None, scale_factor=2.0, mode="nearest"),
    dict(size=[7, 9], scale_factor=None, mode="nearest"),
    dict(size=None, scale_factor=[1.5, 2.5], mode="nearest-exact"),
    dict(size=None, scale_factor=1.7, mode="bilinear", align_corners=False),
    dict(size=None, scale_factor=1.7, mode="bilinear", align_corners=False, recompute_scale_factor=True),
    dict(size=[6, 5], scale_factor=None, mode="bilinear", align_corners=True),
])
def test_interpolate_2d(kw):
    x = rand(2, 3, 4, 5)
    exp = F.interpolate(T(x), **kw).numpy()
    both(K.__interpolate, exp, x, kw["size"], kw["scale_factor"], kw["mode"], kw.get("align_corners"),
         kw.get("recompute_scale_factor"))


@pytest.mark.parametrize("shape,mode", [((2, 3, 7), "linear"), ((1, 2, 3, 4, 5), "trilinear"),
                                        ((2, 3, 7), "nearest"), ((1, 2, 3, 4, 5), "nearest")])
def test_interpolate_1d_3d(shape, mode):
    x = rand(*shape)
    align = False if "linear" in mode else None
    exp = F.interpolate(T(x), scale_factor=2.0, mode=mode, align_corners=align).numpy()
    both(K.__interpolate, exp, x, None, 2.0, mode, align)


def test_interpolate_unsupported_mode():
    with pytest.raises(srcore.KernelError, match="area"):
        K.__interpolate(rand(1, 1, 4, 4), None, 2.0, "area")
    with pytest.raises(srcore.KernelError, match="bicubic"):  # bicubic is 2-d only, as in torch
        K.__interpolate(rand(1, 1, 4), None, 2.0, "bicubic")


def test_decl():
    from srcore_cpu.decl import upsample as D
    assert {"aten::upsample_nearest2d.vec", "aten::upsample_bilinear2d", "aten::__interpolate"} <= {
        k.op for k in D.KERNELS}
    for k in D.KERNELS:
        mod, _, attr = k.impl.partition(":")
        assert callable(getattr(__import__(mod, fromlist=[attr]), attr))


@pytest.mark.parametrize("shape,osz", SIZES + [((2, 3, 7), [12]), ((1, 2, 3, 4, 5), [5, 3, 9])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nearest_exact_matches_torch(shape, osz, dtype):
    """``aten::_upsample_nearest_exact{1,2,3}d`` (``interpolate(mode="nearest-exact")``), both overloads,
    by size and by scale factors: torch's picks exactly."""
    x = rand(*shape, dtype=dtype)
    nd = len(osz)
    op = getattr(K, f"_upsample_nearest_exact{nd}d")
    vec = getattr(K, f"_upsample_nearest_exact{nd}d_vec")
    want = F.interpolate(T(x), size=osz, mode="nearest-exact").numpy()
    both(op, want, x, osz)
    both(vec, want, x, osz, None)
    scales = [1.7] * nd
    want = F.interpolate(T(x), scale_factor=scales, mode="nearest-exact").numpy()
    both(vec, want, x, None, scales)


def test_a_nearest_exact_model_runs_on_numpy_kernels():
    """A model with ``mode="nearest-exact"`` converts and runs with no torch-backed fallback node."""
    class Up(torch.nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=2.0, mode="nearest-exact") * 2.0

    x = torch.randn(1, 3, 5, 6)
    model = srcore.from_torchscript(torch.jit.trace(Up(), (x,)), (x,))
    sm = srcore.StaticModule(model, backends=("cpu",), options=srcore.Options(allow_fallback=False))
    np.testing.assert_array_equal(sm(x.numpy()), Up()(x).numpy())
    assert not sm.load_report.fallbacks

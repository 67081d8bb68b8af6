"""argsort, repeat_interleave, pixel_(un)shuffle, im2col/col2im kernels vs torch, and their errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")
F = torch.nn.functional

import srcore  # noqa: E402
from srcore_cpu.kernels import rearrange as K  # noqa: E402

#: kernels called directly, and the end-to-end test runs every executor and planner itself: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)


def eq(got, want):
    want = want.numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# --- argsort ----------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.data())
def test_argsort_is_torchs_stable_order(shape, data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int64, np.int32, np.bool_]))
    x = RNG.integers(0, 3, shape).astype(dtype)  # many ties
    if dtype in (np.float32, np.float64) and data.draw(st.booleans()):
        x.flat[0] = np.nan
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    desc = data.draw(st.booleans())
    t = torch.from_numpy(x)
    eq(K.argsort(x, dim, desc, stable=True), torch.argsort(t, dim=dim, descending=desc, stable=True))
    eq(K.argsort(x, dim, desc), torch.sort(t, stable=True, dim=dim, descending=desc).indices)
    out = np.empty(x.shape, np.int64)
    assert K.argsort(x, dim=dim, descending=desc, stable=True, out=out) is out
    eq(out, torch.argsort(t, dim=dim, descending=desc, stable=True))


def test_argsort_0d_and_errors():
    eq(K.argsort(np.array(3.0)), torch.argsort(torch.tensor(3.0)))
    with pytest.raises(srcore.KernelError, match="dim 2 out of range"):
        K.argsort(np.zeros((2, 2)), 2)


# --- repeat_interleave ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_repeat_interleave_tensor(dtype):
    r = np.array([2, 0, 3, 1], dtype)
    want = torch.repeat_interleave(torch.from_numpy(r))
    eq(K.repeat_interleave_tensor(r), want)
    eq(K.repeat_interleave_tensor(r, output_size=6), want)
    out = np.empty(6, dtype)
    assert K.repeat_interleave_tensor(r, out=out) is out
    eq(out, want)


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_repeat_interleave_self(dim):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    t = torch.from_numpy(x)
    eq(K.repeat_interleave(x, 2, dim), torch.repeat_interleave(t, 2, dim))
    n = x.size if dim is None else x.shape[dim]
    reps = RNG.integers(0, 3, n)
    eq(K.repeat_interleave(x, reps, dim), torch.repeat_interleave(t, torch.from_numpy(reps), dim))
    one = np.array([3])  # a one-element repeats tensor broadcasts
    eq(K.repeat_interleave(x, one, dim), torch.repeat_interleave(t, torch.from_numpy(one), dim))
    eq(K.repeat_interleave(x, np.array(2), dim), torch.repeat_interleave(t, torch.tensor(2), dim))


def test_repeat_interleave_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(srcore.KernelError, match="can not be negative"):
        K.repeat_interleave(x, -1, 0)
    with pytest.raises(srcore.KernelError, match="same size as input along dim: 2 vs 3"):
        K.repeat_interleave(x, np.array([1, 2]), 1)
    with pytest.raises(srcore.KernelError, match="output_size=5"):
        K.repeat_interleave(x, 2, 0, output_size=5)
    with pytest.raises(srcore.KernelError, match="1-D tensor"):
        K.repeat_interleave_tensor(np.array([[1]]))
    with pytest.raises(srcore.KernelError, match="integer tensor"):
        K.repeat_interleave(x, np.array([1.0, 2.0]), 0)


# --- pixel_shuffle ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,r", [((1, 8, 3, 5), 2), ((2, 3, 18, 2, 3), 3), ((4, 2, 2), 1), ((9, 1, 1), 3)])
def test_pixel_shuffle_roundtrip(shape, r):
    x = RNG.standard_normal(shape).astype(np.float32)
    t = torch.from_numpy(x)
    y = K.pixel_shuffle(x, r)
    eq(y, F.pixel_shuffle(t, r))
    eq(K.pixel_unshuffle(y, r), F.pixel_unshuffle(torch.from_numpy(y), r))
    np.testing.assert_array_equal(K.pixel_unshuffle(y, r), x)
    out = np.empty(y.shape, np.float32)
    assert K.pixel_shuffle(x, r, out=out) is out
    eq(out, F.pixel_shuffle(t, r))
    strided = np.empty((y.shape[-1],) + y.shape[:-1], np.float32)
    out2 = np.moveaxis(strided, 0, -1)   # a non-contiguous out
    K.pixel_shuffle(x, r, out=out2)
    eq(out2, F.pixel_shuffle(t, r))


def test_pixel_shuffle_errors():
    with pytest.raises(srcore.KernelError, match="not divisible by upscale_factor"):
        K.pixel_shuffle(np.zeros((1, 6, 2, 2)), 2)
    with pytest.raises(srcore.KernelError, match="divisible by 2"):
        K.pixel_unshuffle(np.zeros((1, 1, 3, 2)), 2)
    with pytest.raises(srcore.KernelError, match="at least 3-D"):
        K.pixel_shuffle(np.zeros((4, 4)), 2)


# --- im2col / col2im --------------------------------------------------------------------------

GEOMS = [dict(kernel_size=3, dilation=1, padding=0, stride=1), dict(kernel_size=(2, 3), dilation=(2, 1),
         padding=(1, 2), stride=(2, 1)), dict(kernel_size=1, dilation=1, padding=1, stride=3),
         dict(kernel_size=(3, 2), dilation=1, padding=1, stride=(1, 2))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("g", GEOMS)
def test_im2col_col2im_match_unfold_fold(g, batched, dtype):
    shape = (2, 3, 7, 6) if batched else (3, 7, 6)
    x = RNG.standard_normal(shape).astype(dtype)
    t = torch.from_numpy(x)
    args = [g[k] for k in ("kernel_size", "dilation", "padding", "stride")]
    cols = K.im2col(x, *args)
    want = F.unfold(t, **g)
    np.testing.assert_array_equal(cols, want.numpy())
    assert cols.dtype == x.dtype
    back = K.col2im(cols, (7, 6), *args)
    np.testing.assert_allclose(back, F.fold(want, (7, 6), **g).numpy(), rtol=1e-6, atol=1e-6)
    out = np.empty(want.shape, dtype)
    assert K.im2col(x, *args, out=out) is out
    np.testing.assert_array_equal(out, want.numpy())


def test_im2col_col2im_errors():
    with pytest.raises(srcore.KernelError, match="does not fit"):
        K.im2col(np.zeros((1, 1, 2, 2)), 3, 1, 0, 1)
    with pytest.raises(srcore.KernelError, match="3-D or 4-D"):
        K.im2col(np.zeros((2, 2)), 1, 1, 0, 1)
    with pytest.raises(srcore.KernelError, match=r"expected 5\*4 = 20 blocks"):
        K.col2im(np.zeros((1, 9, 7)), (7, 6), 3, 1, 0, 1)
    with pytest.raises(srcore.KernelError, match="divisible by the kernel size"):
        K.col2im(np.zeros((1, 10, 20)), (7, 6), 3, 1, 0, 1)


# --- end to end -------------------------------------------------------------------------------


class _Rearrange(torch.nn.Module):
    def forward(self, x, reps):
        cols = F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
        back = F.fold(cols, x.shape[-2:], (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
        ps = F.pixel_shuffle(x, 2)
        pu = F.pixel_unshuffle(ps, 2)
        order = torch.argsort(x.flatten(1), dim=1, descending=True, stable=True)
        rep = x.sum((2, 3)).repeat_interleave(2, dim=1)
        rep_t = torch.repeat_interleave(x[0, :, 0, 0], reps)
        idx = torch.repeat_interleave(reps)
        return cols, back, ps, pu, order, rep, rep_t, idx


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("frontend", ["script", "trace", "export"])
def test_end_to_end_matches_torch(frontend):
    torch.manual_seed(0)
    m = _Rearrange().eval()
    x = torch.randn(2, 8, 5, 6)
    x[0, 0, 0, :3] = 0.5  # ties for the stable argsort
    inputs = (x, torch.tensor([1, 0, 3, 2, 1, 1, 0, 2]))
    if frontend == "script":
        model = srcore.from_torchscript(m, inputs)
    elif frontend == "trace":
        model = srcore.from_torchscript(torch.jit.trace(m, inputs), inputs)
    else:
        model = srcore.from_torch(m, inputs)
    ops = {n.kind for n in model.graph.all_nodes()}
    assert {"aten::im2col", "aten::col2im", "aten::pixel_shuffle", "aten::pixel_unshuffle", "aten::argsort",
            "aten::repeat_interleave"} <= ops
    with torch.no_grad():
        want = [t.numpy() for t in m(*inputs)]
    for executor in ("codegen", "interpreter"):
        for planner in ("standard_resizing", "precomputed_offsets"):
            sm = srcore.StaticModule(model, options=srcore.Options(executor=executor,
                                                                   memory_planner_algorithm=planner))
            for _ in range(2):
                got = sm(*[t.numpy() for t in inputs])
                for g, w in zip(got, want):
                    assert g.shape == w.shape and g.dtype == w.dtype
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)

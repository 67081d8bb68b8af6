"""Compiled group norm and bilinear upsampling (numba) vs torch: values (shapes with tails, data far
from zero), into ``out``, non-contiguous and float64 fallbacks, the matchers' choices, and a model
through a StaticModule (both executors over the suite's two passes)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from srcore.testing import node_info  # noqa: E402
from srcore_cpu.kernels import norm as NK  # noqa: E402
from srcore_cpu.kernels import upsample as UK  # noqa: E402

F = torch.nn.functional
T = torch.from_numpy
rng = np.random.default_rng(0)


def _gn(shape, groups, op="aten::group_norm"):
    t = TensorType("float32", ("n",) + tuple(shape[1:]))   # an unknown size: the matcher compiles
    if op == "aten::group_norm":
        answer = NK.group_norm_matcher(node_info(op, input=t, num_groups=groups, weight=t, bias=t, eps=1e-5,
                                                 cudnn_enabled=False, outputs=(t,)))
    else:
        answer = NK.native_group_norm_matcher(node_info(op, input=t, weight=t, bias=t, N=shape[0], C=shape[1],
                                                        HxW=int(np.prod(shape[2:])), group=groups, eps=1e-5,
                                                        outputs=(t, t, t)))
    assert isinstance(answer, Specialized)
    return answer.fn


GN_CASES = [((1, 16, 128, 128), 8), ((2, 6, 5, 3), 3), ((3, 4, 7), 2), ((2, 12, 9, 1), 12), ((1, 8, 20000), 1),
            ((1, 128, 3199), 128)]


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("shape,groups", GN_CASES)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_torch(shape, groups, affine):
    x = (rng.standard_normal(shape) * 3 + 50).astype(np.float32)   # far from zero: the variance cancels
    C = shape[1]
    w = rng.standard_normal(C).astype(np.float32) if affine else None
    b = rng.standard_normal(C).astype(np.float32) if affine else None
    want = F.group_norm(T(x).double(), groups, None if w is None else T(w).double(),
                        None if b is None else T(b).double()).numpy()
    fn = _gn(shape, groups)   # the kernel serves any shape: the matcher's type only picks it
    got = fn(x, w, b)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-4)
    out = np.full_like(x, np.nan)
    assert fn(x, w, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-4)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("shape,groups", [((1, 4, 3199), 4), ((2, 6, 40, 50), 3), ((1, 2, 200000), 1)])
def test_group_norm_with_a_far_first_element_matches_torch(shape, groups):
    """Each group's first element 1e4 from the others (the statistics' shift): the float32 lane sums
    around it would cancel; the second pass around the mean keeps torch's float64 values."""
    x = (rng.standard_normal(shape) * 3 + 50).astype(np.float32)
    per = shape[1] // groups
    for n in range(shape[0]):
        for g in range(groups):
            x[n, g * per].reshape(-1)[0] = 1e4
    want = F.group_norm(T(x).double(), groups).numpy()
    np.testing.assert_allclose(_gn(shape, groups)(x, None, None), want, rtol=1e-4, atol=2e-4)


@pytest.mark.one_pass   # kernel calls only
def test_native_group_norm_statistics_and_fallbacks():
    x = rng.standard_normal((2, 8, 6, 5)).astype(np.float32)
    w, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    want = [v.numpy() for v in torch.ops.aten.native_group_norm(T(x), T(w), T(b), 2, 8, 30, 4, 1e-5)]
    fn = _gn(x.shape, 4, op="aten::native_group_norm")
    for got, exp in zip(fn(x, w, b, 2, 8, 30), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)
    # non-contiguous input, float64, a non-contiguous weight: the numpy kernel, same values
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    assert not xt.flags.c_contiguous
    for got, exp in zip(fn(xt, w, b, 2, 8, 30), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)
    wn = np.repeat(w, 2)[::2]
    np.testing.assert_allclose(fn(x, wn, b, 2, 8, 30)[0], want[0], rtol=1e-5, atol=1e-5)
    gfn = _gn(x.shape, 4)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(gfn(x64, w.astype(np.float64), b.astype(np.float64)),
                               F.group_norm(T(x64), 4, T(w).double(), T(b).double()).numpy(), rtol=1e-10)


@pytest.mark.one_pass   # matcher choices only
def test_group_norm_matcher_small_late_declines_float64_and_runtime_groups():
    small = TensorType("float32", (1, 4, 4, 4))
    kw = dict(weight=None, bias=None, eps=1e-5, cudnn_enabled=False)
    # a small node: numpy's kernel or the compiled one, chosen at the first call (test_late_compiled.py)
    late = NK.group_norm_matcher(node_info("aten::group_norm", input=small, num_groups=2, **kw, outputs=(small,)))
    assert isinstance(late, Specialized) and late.fn.tactic is None and callable(late.fn.choose)
    dynamic = TensorType("float32", ("n", 4, 4, 4))   # (an unknown size compiles now)
    assert "late" not in NK.group_norm_matcher(node_info("aten::group_norm", input=dynamic, num_groups=2, **kw,
                                                         outputs=(dynamic,))).fn.__qualname__
    f64 = TensorType("float64", (1, 16, 64, 64))
    assert NK.group_norm_matcher(node_info("aten::group_norm", input=f64, num_groups=2, **kw, outputs=(f64,))) is None
    big = TensorType("float32", (1, 16, 64, 64))
    from srcore.ir.types import INT
    assert NK.group_norm_matcher(node_info("aten::group_norm", input=big, num_groups=INT, **kw, outputs=(big,))) is None


def _bilinear(vec=True):
    t = TensorType("float32", (1, 64, 64, 64))
    if vec:
        answer = UK.bilinear2d_matcher(node_info("aten::upsample_bilinear2d.vec", input=t, output_size=None,
                                                 align_corners=False, scale_factors=[2.0, 2.0], outputs=(t,)))
    else:
        answer = UK.bilinear2d_matcher(node_info("aten::upsample_bilinear2d", self=t, output_size=[4, 4],
                                                 align_corners=False, scales_h=None, scales_w=None, outputs=(t,)))
    assert isinstance(answer, Specialized)
    return answer.fn


UP_CASES = [  # (input shape, output size or None, scale factors, align_corners)
    ((1, 32, 64, 64), None, [2.0, 2.0], True),
    ((1, 32, 16, 16), None, [2.0, 2.0], False),
    ((2, 3, 5, 7), (11, 4), None, False),     # up in height, down in width
    ((2, 3, 5, 7), (11, 4), None, True),
    ((1, 2, 1, 9), (3, 1), None, True),       # one row in, one column out
    ((1, 2, 6, 6), None, [1.5, 0.75], False),
]


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("shape,size,scales,ac", UP_CASES)
def test_bilinear_matches_torch(shape, size, scales, ac):
    x = rng.standard_normal(shape).astype(np.float32)
    want = F.interpolate(T(x), size=size, scale_factor=scales, mode="bilinear", align_corners=ac).numpy()
    fn = _bilinear()
    got = fn(x, size, ac, scales)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    out = np.full_like(want, np.nan)
    assert fn(x, size, ac, scales, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    if size is not None:   # the classic overload
        np.testing.assert_allclose(_bilinear(vec=False)(x, size, ac, None, None), want, rtol=1e-5, atol=1e-6)


def _bicubic(vec=True):
    t = TensorType("float32", (1, 64, 64, 64))
    if vec:
        answer = UK.bicubic2d_matcher(node_info("aten::upsample_bicubic2d.vec", input=t, output_size=None,
                                                align_corners=False, scale_factors=[2.0, 2.0], outputs=(t,)))
    else:
        answer = UK.bicubic2d_matcher(node_info("aten::upsample_bicubic2d", self=t, output_size=[4, 4],
                                                align_corners=False, scales_h=None, scales_w=None, outputs=(t,)))
    assert isinstance(answer, Specialized) and answer.fn.__name__ == "bicubic2d_jit"
    return answer.fn


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("shape,size,scales,ac", UP_CASES + [((1, 3, 4, 4), (9, 13), None, False)])
def test_compiled_bicubic_matches_torch(shape, size, scales, ac):
    """The compiled bicubic kernel (jit_upsample.Bicubic2d): torch's values (taps clamped at the border,
    up and down, align_corners or not), the classic overload too, into a buffer; a non-contiguous
    input or output and float64 go to the numpy kernel, with the same values."""
    x = rng.standard_normal(shape).astype(np.float32)
    want = F.interpolate(T(x), size=size, scale_factor=scales, mode="bicubic", align_corners=ac).numpy()
    fn = _bicubic()
    got = fn(x, size, ac, scales)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    out = np.full_like(want, np.nan)
    assert fn(x, size, ac, scales, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    if size is not None:   # the classic overload
        np.testing.assert_allclose(_bicubic(vec=False)(x, size, ac, None, None), want, rtol=1e-5, atol=1e-5)
    xc = np.ascontiguousarray(np.swapaxes(x, 2, 3)).swapaxes(2, 3)
    np.testing.assert_allclose(fn(xc, size, ac, scales), want, rtol=1e-5, atol=1e-5)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(fn(x64, size, ac, scales), F.interpolate(T(x64), size=size, scale_factor=scales,
                                                                          mode="bicubic", align_corners=ac).numpy(),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.one_pass   # kernel calls only
def test_bilinear_non_contiguous_and_float64_fall_back():
    x = rng.standard_normal((1, 4, 9, 6)).astype(np.float32)
    want = F.interpolate(T(x), size=(12, 12), mode="bilinear", align_corners=False).numpy()
    fn = _bilinear()
    xc = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    np.testing.assert_allclose(fn(xc, (12, 12), False, None), want, rtol=1e-5, atol=1e-6)
    out = np.empty((1, 4, 12, 12), np.float32, order="F")
    assert fn(x, (12, 12), False, None, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(fn(x64, (12, 12), False, None),
                               F.interpolate(T(x64), size=(12, 12), mode="bilinear").numpy(), rtol=1e-12)


def test_a_unet_block_through_a_static_module():
    import srcore

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gn = torch.nn.GroupNorm(4, 16)

        def forward(self, x):
            y = F.silu(self.gn(x))
            return (F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False),
                    F.interpolate(y, size=(50, 70), mode="bilinear", align_corners=True))

    m = M().eval()
    with torch.no_grad():
        m.gn.weight.normal_()
        m.gn.bias.normal_()
    x = torch.randn(1, 16, 40, 40)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)))
    with torch.no_grad():
        want = m(x)
    for got, w in zip(sm(x.numpy()), want):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-4, atol=1e-5)
    chosen = [(pn.node.kind, getattr(pn.fn.fn, "__qualname__", "")) for b in sm.blocks for pn in b.nodes
              if pn.fn is not None]
    assert ("aten::group_norm", "_group_norm_jit.<locals>.group_norm_jit") in chosen
    ups = [q for k, q in chosen if k.startswith("aten::upsample_bilinear2d")]
    assert ups == ["bilinear2d_jit"] * 2


def _ln(ns, eps=1e-5):
    t = TensorType("float32", ("n", 7) + tuple(ns))   # an unknown size: the matcher compiles
    answer = NK.layer_norm_matcher(node_info("aten::layer_norm", input=t, normalized_shape=list(ns), weight=t,
                                             bias=t, eps=eps, cudnn_enable=False, outputs=(t,)))
    assert isinstance(answer, Specialized) and answer.args == (0, 2, 3)
    assert answer.fn(np.ones((1, 7) + tuple(ns), np.float64)).dtype == np.float64   # (callable as the node's)
    return answer.fn


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("shape,ns", [((2, 7, 256), (256,)), ((1, 3, 37), (37,)), ((2, 3, 4, 5), (4, 5)),
                                      ((4, 1), (1,))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_matches_torch(shape, ns, affine):
    """The compiled layer norm: lengths on and off its 16 lanes, 2-D normalized shapes, data far from
    zero, into a fresh array, into ``out`` and in place; torch in float64 as the reference."""
    x = (rng.standard_normal(shape) * 3 + 50).astype(np.float32)
    w = rng.standard_normal(ns).astype(np.float32) if affine else None
    b = rng.standard_normal(ns).astype(np.float32) if affine else None
    want = F.layer_norm(T(x).double(), ns, None if w is None else T(w).double(),
                        None if b is None else T(b).double(), 1e-5).numpy()
    fn = _ln(ns)
    got = fn(x, w, b)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-4)
    out = np.full_like(x, np.nan)
    assert fn(x, w, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-4)
    same = x.copy()
    assert fn(same, w, b, out=same) is same
    np.testing.assert_allclose(same, want, rtol=1e-4, atol=2e-4)


@pytest.mark.one_pass   # kernel calls only
def test_layer_norm_rows_whose_first_element_lies_far_from_the_mean():
    """The sums are taken around a row's first element, then again around the mean when that
    element is far from it (else q / E - mean^2 cancels): outliers first, and constant rows."""
    x = (rng.standard_normal((6, 256)) + 1000).astype(np.float32)
    x[:3, 0] = [1e5, -3e4, 2e3]
    x[4] = 7.0                                                     # variance 0: (x - mean) = 0
    want = F.layer_norm(T(x).double(), (256,), None, None, 1e-5).numpy()
    np.testing.assert_allclose(_ln((256,))(x, None, None), want, rtol=1e-4, atol=2e-4)


@pytest.mark.one_pass   # kernel calls only
def test_layer_norm_fallbacks():
    """A transposed view is copied into ``out`` and normalized there; arrays the compiled kernel
    does not take go to the numpy kernel: float64, a partly overlapping out; a node under
    ``MIN_ELEMENTS_LAYER_NORM`` elements keeps the numpy kernel itself, one at it the compiled."""
    fn = _ln((6,))
    x = rng.standard_normal((6, 10)).astype(np.float32).T          # (10, 6), not contiguous
    w, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    want = F.layer_norm(T(np.ascontiguousarray(x)), (6,), T(w), T(b)).numpy()
    np.testing.assert_allclose(fn(x, w, b), want, rtol=1e-5, atol=1e-5)
    before = x.copy()
    out = np.full((10, 6), np.nan, np.float32)
    assert fn(x, w, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x, before)                        # the input is left alone
    x64 = np.ascontiguousarray(x, np.float64)
    got64 = fn(x64, w.astype(np.float64), b.astype(np.float64))
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, F.layer_norm(T(x64), (6,), T(w).double(), T(b).double()).numpy(), rtol=1e-10)
    buf = np.ascontiguousarray(x).reshape(-1)
    shifted = np.empty(buf.size + 6, np.float32)
    shifted[:buf.size] = buf
    src, dst = shifted[:buf.size].reshape(10, 6), shifted[6:].reshape(10, 6)   # overlap by all rows but one
    want_shift = F.layer_norm(T(src.copy()), (6,), T(w), T(b)).numpy()
    assert fn(src, w, b, out=dst) is dst
    np.testing.assert_allclose(dst, want_shift, rtol=1e-5, atol=1e-5)
    small = TensorType("float32", (2, 3))
    late = NK.layer_norm_matcher(node_info("aten::layer_norm", input=small, normalized_shape=[3], weight=small,
                                           bias=small, eps=1e-5, cudnn_enable=False, outputs=(small,)))
    assert callable(late.fn.choose)   # small: chosen at the first call (test_late_compiled.py)
    rows = NK.MIN_ELEMENTS_LAYER_NORM // 64
    for n, want_late in ((rows - 1, True), (rows, False)):
        t = TensorType("float32", (n, 64))
        got = NK.layer_norm_matcher(node_info("aten::layer_norm", input=t, normalized_shape=[64], weight=None,
                                              bias=None, eps=1e-5, cudnn_enable=False, outputs=(t,)))
        assert isinstance(got, Specialized) and hasattr(got.fn, "choose") is want_late
    dynamic = TensorType("float64", ("n", 3))
    assert NK.layer_norm_matcher(node_info("aten::layer_norm", input=dynamic, normalized_shape=[3], weight=None,
                                           bias=None, eps=1e-5, cudnn_enable=False, outputs=(dynamic,))) is NK.layer_norm


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(1, 8, 64, 40), (2, 3, 4100, 2), (1, 16, 1100)])
def test_instance_norm_through_the_compiled_group_norm(shape, affine):
    """InstanceNorm (input statistics) of a large float32 node runs the compiled group norm with
    one group per channel: torch's values; small and float64 nodes keep the numpy kernel."""
    import srcore

    norm = (torch.nn.InstanceNorm2d if len(shape) == 4 else torch.nn.InstanceNorm1d)(shape[1], affine=affine)
    with torch.no_grad():
        if affine:
            norm.weight.normal_()
            norm.bias.normal_()
    m = torch.nn.Sequential(norm).eval()
    x = torch.randn(*shape) * 3 + 5
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)))
    with torch.no_grad():
        np.testing.assert_allclose(sm(x.numpy()), m(x).numpy(), rtol=1e-4, atol=1e-4)
    chosen = [getattr(pn.fn.fn, "__qualname__", "") for b in sm.blocks for pn in b.nodes
              if pn.fn is not None and pn.node.kind == "aten::instance_norm"]
    assert chosen == ["_instance_norm_jit.<locals>.instance_norm_jit"]


def test_instance_norm_matcher_small_late_and_declines_running_stats():
    kw = dict(weight=None, bias=None, running_mean=None, running_var=None, momentum=0.1, eps=1e-5,
              cudnn_enabled=False)
    big, small = TensorType("float32", (1, 8, 64, 64)), TensorType("float32", (1, 8, 4, 4))
    late = NK.instance_norm_matcher(node_info("aten::instance_norm", input=small, use_input_stats=True, **kw,
                                              outputs=(small,)))   # chosen at the first call (late_compiled)
    assert isinstance(late, Specialized) and late.fn.tactic is None and callable(late.fn.choose)
    assert NK.instance_norm_matcher(node_info("aten::instance_norm", input=big, use_input_stats=False, **kw,
                                              outputs=(big,))) is None
    assert isinstance(NK.instance_norm_matcher(node_info("aten::instance_norm", input=big, use_input_stats=True,
                                                         **kw, outputs=(big,))), Specialized)

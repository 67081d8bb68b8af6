"""Convolutions whose weight is a graph value (conv_dynamic.py): the conv matchers' answer for a
non-constant weight or bias, planned per shape, against torch."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from cpu_kernel_util import make_rand, node, thread_mismatches  # noqa: E402
from srcore_cpu.kernels import conv as K  # noqa: E402
from srcore_cpu.kernels import conv_dynamic as D  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

F = torch.nn.functional
rand = make_rand(np.random.default_rng(11))
CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
MATCHER = {1: K.conv1d_matcher, 2: K.conv2d_matcher, 3: K.conv3d_matcher}


def _ref(x, w, b, s, p, d, g):
    t = torch.from_numpy
    return CONV[w.ndim - 2](t(x), t(w), None if b is None else t(b), s, p, d, g).numpy()


def _spec(nd, s, p, d, g, bias="<var>"):
    """The matcher's answer for a conv whose weight (and bias, unless given) is a graph value."""
    return MATCHER[nd](node(f"aten::conv{nd}d", input="<var>", weight="<var>", bias=bias, stride=s, padding=p,
                            dilation=d, groups=g))


CASES = [
    # x shape, w shape, stride, padding, dilation, groups
    ((1, 12, 10, 10), (18, 4, 3, 3), [1, 1], [1, 1], [1, 1], 3),   # the held-out hypernetwork conv
    ((2, 3, 7, 5), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1),
    ((1, 4, 9, 8), (6, 2, 3, 2), [2, 1], [1, 0], [1, 2], 2),        # grouped, asymmetric everything
    ((2, 6, 9, 9), (6, 1, 3, 3), [1, 1], [0, 0], [1, 1], 6),        # depthwise (a tracker's xcorr)
    ((1, 2, 6, 6), (3, 2, 3, 3), [1, 1], [0, 0], [2, 2], 1),        # dilated, unpadded
    ((4, 9, 9), (2, 4, 3, 3), [1, 1], [1, 1], [1, 1], 1),           # unbatched
    ((2, 3, 13), (4, 3, 5), [2], [2], [1], 1),                      # conv1d
    ((1, 2, 5, 4, 6), (4, 1, 2, 2, 2), [1, 2, 1], [1, 1, 1], [1, 1, 1], 2),   # conv3d
]


@pytest.mark.parametrize("xs,wsh,s,p,d,g", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_computed_weight_matches_torch(xs, wsh, s, p, d, g, dtype, with_bias):
    nd = len(wsh) - 2
    spec = _spec(nd, s, p, d, g, bias="<var>" if with_bias else None)
    assert isinstance(spec.fn, D.DynamicWeightConv) and spec.args == (0, 1, 2)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for _ in range(2):   # new weights every call (as a hypernetwork's), the plan and buffers reused
        x, w = rand(*xs, dtype=dtype), rand(*wsh, dtype=dtype)
        b = rand(wsh[0], dtype=dtype) if with_bias else None
        exp = _ref(x, w, b, s, p, d, g)
        r = spec.fn(x, w, b)
        assert r.dtype == exp.dtype and r.shape == exp.shape
        np.testing.assert_allclose(r, exp, rtol=tol, atol=tol)
    assert spec.fn.plans[(x.shape, w.shape, x.dtype, w.dtype)] is not spec.fn._plain   # the planned path
    buf = np.full(exp.shape, np.nan, dtype)
    assert spec.fn(x, w, b, out=buf) is buf
    np.testing.assert_allclose(buf, exp, rtol=tol, atol=tol)
    big = np.full(exp.shape[:-1] + (2 * exp.shape[-1],), np.nan, dtype)   # a non-contiguous out
    view = big[..., ::2]
    assert spec.fn(x, w, b, out=view) is view
    np.testing.assert_allclose(view, exp, rtol=tol, atol=tol)
    assert np.isnan(big[..., 1::2]).all()
    wt = np.ascontiguousarray(np.swapaxes(w, -1, -2)).swapaxes(-1, -2)   # a non-contiguous weight and input
    xt = np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    np.testing.assert_allclose(spec.fn(xt, wt, b), exp, rtol=tol, atol=tol)


def test_large_mismatched_and_mixed_take_the_plain_path():
    fn = _spec(2, [1, 1], [1, 1], [1, 1], 1).fn
    x, w, b = rand(1, 16, 64, 64), rand(16, 16, 3, 3), rand(16)    # columns over conv_small's limit
    np.testing.assert_allclose(fn(x, w, b), _ref(x, w, b, 1, 1, 1, 1), rtol=1e-4, atol=1e-4)
    assert fn.plans[(x.shape, w.shape, x.dtype, w.dtype)] == fn._plain
    x64 = rand(1, 3, 6, 6, dtype=np.float64)                         # dtypes that differ: promoted
    w3 = rand(4, 3, 3, 3)
    r = fn(x64, w3, None)
    assert r.dtype == np.float64
    np.testing.assert_allclose(r, _ref(x64, w3.astype(np.float64), None, 1, 1, 1, 1), rtol=1e-5, atol=1e-5)
    with pytest.raises(KernelError, match="channels"):
        fn(rand(1, 8, 6, 6), w3, None)


def test_same_padding_without_a_known_weight_shape_takes_the_generic_kernel():
    # padding="same" needs the kernel size, which a weight of unknown shape does not give
    spec = K.conv2d_matcher(node("aten::conv2d.padding", input="<var>", weight="<var>", bias=None,
                                 stride=[1, 1], padding="same", dilation=[1, 1], groups=1))
    assert spec is K.conv2d
    # a constant weight keeps the packed kernel
    const = K.conv2d_matcher(node("aten::conv2d", input="<var>", weight=rand(4, 3, 3, 3), bias=None,
                                  stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1))
    assert not isinstance(const.fn, D.DynamicWeightConv) and const.args == (0,)


def test_plans_capped_and_thread_safe(monkeypatch):
    monkeypatch.setattr(D._small, "MAX_PLANS", 3)
    fn = _spec(2, [1, 1], [1, 1], [1, 1], 1).fn
    for n in range(3, 9):   # more shapes than plans kept: still right after eviction
        x, w = rand(2, 2, n, n + 1), rand(4, 2, 3, 3)
        np.testing.assert_allclose(fn(x, w, None), _ref(x, w, None, 1, 1, 1, 1), rtol=1e-4, atol=1e-4)
    assert len(fn.plans) <= 3
    cases = [(rand(1, 2, 6, 6), rand(4, 2, 3, 3)) for _ in range(4)]
    exps = [_ref(x, w, None, 1, 1, 1, 1) for x, w in cases]
    assert not thread_mismatches(lambda i: fn(*cases[i], None), exps)


def _typed_node(op, wshape, **args):
    """:func:`node` with the weight's static shape in its type (what a converted graph knows)."""
    from srcore.ir.types import TensorType
    from srcore.plugin import ArgInfo, NodeInfo

    n = node(op, **args)
    return NodeInfo(op, None, tuple(ArgInfo(a.name, TensorType(shape=wshape), False, None) if a.name == "weight"
                                    else a for a in n.args), ())


def test_convolution_and_same_padding_with_a_typed_weight():
    x, w, b = rand(2, 4, 7, 6), rand(6, 2, 3, 3), rand(6)
    spec = K.convolution_matcher(_typed_node("aten::_convolution", w.shape, input="<var>", weight="<var>",
                                             bias="<var>", stride=[2, 1], padding=[1, 0], dilation=[1, 1],
                                             transposed=False, output_padding=[0, 0], groups=2))
    assert isinstance(spec.fn, D.DynamicWeightConv)
    np.testing.assert_allclose(spec.fn(x, w, b), _ref(x, w, b, [2, 1], [1, 0], 1, 2), rtol=1e-4, atol=1e-4)
    # transposed: the generic kernel
    tr = K.convolution_matcher(_typed_node("aten::convolution", (4, 6, 3, 3), input="<var>", weight="<var>",
                                           bias=None, stride=[2, 2], padding=[1, 1], dilation=[1, 1],
                                           transposed=True, output_padding=[0, 0], groups=1))
    assert tr is K.convolution
    same = K.conv2d_matcher(_typed_node("aten::conv2d.padding", (6, 4, 3, 5), input="<var>", weight="<var>",
                                        bias=None, stride=[1, 1], padding="same", dilation=[1, 1], groups=1))
    x, w = rand(1, 4, 7, 8), rand(6, 4, 3, 5)
    np.testing.assert_allclose(same.fn(x, w, None), _ref(x, w, None, 1, "same", 1, 1), rtol=1e-4, atol=1e-4)


def test_hypernetwork_module_end_to_end():
    """A module computing its conv weight from its input, through srcore's cpu backend."""
    import srcore

    class Hyper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = torch.nn.Linear(3, 5 * 3 * 9)

        def forward(self, x):
            k = self.h(x.mean((0, 2, 3))).reshape(5, 3, 3, 3)
            return F.conv2d(x, k, padding=1, stride=2)

    torch.manual_seed(0)
    m, x = Hyper().eval(), torch.randn(2, 3, 9, 9)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)), backends=("cpu",),
                             options=srcore.Options(allow_fallback=False))
    with torch.no_grad():
        exp = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), exp, rtol=1e-4, atol=1e-5)

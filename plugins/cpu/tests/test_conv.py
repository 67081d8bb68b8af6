"""conv kernels vs torch: conv1d/2d/3d (padding ints and strings), groups, depthwise, transposed, matchers."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from cpu_kernel_util import node, thread_mismatches  # noqa: E402
from srcore_cpu.kernels import conv as K  # noqa: E402
from srcore_cpu.kernels.conv_dynamic import DynamicWeightConv  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

F = torch.nn.functional
RNG = np.random.default_rng(0)
T = torch.from_numpy


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def close(a, b):
    tol = 1e-4 if b.dtype == np.float32 else 1e-10
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def both(fn, exp, *args):
    close(fn(*args), exp)
    buf = np.full(exp.shape, np.nan, exp.dtype)
    assert fn(*args, out=buf) is buf
    close(buf, exp)


CONV2D = [
    # x shape, w shape, stride, padding, dilation, groups
    ((2, 4, 9, 8), (6, 4, 3, 3), 1, 1, 1, 1),
    ((1, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),      # grouped, asymmetric everything
    ((2, 3, 10, 10), (5, 3, 1, 1), 1, 0, 1, 1),                    # 1x1 GEMM path
    ((1, 3, 10, 10), (5, 3, 1, 1), 2, 0, 1, 1),                    # 1x1 strided: im2col path
    ((2, 6, 7, 9), (6, 1, 3, 3), 1, 1, 1, 6),                      # depthwise
    ((1, 4, 7, 9), (8, 1, 3, 3), 2, 2, 2, 4),                      # depthwise, multiplier 2
    ((1, 3, 15, 15), (4, 3, 7, 7), 2, 3, 1, 1),                    # stem-like
    ((4, 9, 9), (2, 4, 3, 3), 1, 1, 1, 1),                         # unbatched
]


@pytest.mark.parametrize("xs,wsh,s,p,d,g", CONV2D)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv2d(xs, wsh, s, p, d, g, dtype, with_bias):
    x, w = rand(*xs, dtype=dtype), rand(*wsh, dtype=dtype)
    b = rand(wsh[0], dtype=dtype) if with_bias else None
    exp = F.conv2d(T(x), T(w), None if b is None else T(b), s, p, d, g).numpy()
    both(K.conv2d, exp, x, w, b, s, p, d, g)
    spec = K.conv2d_matcher(node("aten::conv2d", input="<var>", weight=w, bias=b, stride=s, padding=p,
                                 dilation=d, groups=g))
    assert isinstance(spec, Specialized) and spec.args == (0,)
    both(spec.fn, exp, x)
    both(spec.fn, exp, x)  # the reused workspace gives the same answer


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.filterwarnings("ignore:Using padding=.same.")
def test_conv_padding_strings(padding, d):
    x, w, b = rand(2, 3, 10, 11), rand(4, 3, 4, 3), rand(4)   # even kernel: asymmetric "same"
    both(K.conv2d, F.conv2d(T(x), T(w), T(b), 1, padding, d).numpy(), x, w, b, 1, padding, d, 1)
    x1, w1 = rand(2, 3, 12), rand(5, 3, 4)
    both(K.conv1d, F.conv1d(T(x1), T(w1), None, 1, padding, d).numpy(), x1, w1, None, 1, padding, d, 1)


def test_same_padding_with_stride_rejected():
    with pytest.raises(srcore.KernelError):
        K.conv2d(rand(1, 1, 5, 5), rand(1, 1, 3, 3), None, 2, "same", 1, 1)


@pytest.mark.parametrize("s,p,d,g", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 2), (3, 1, 1, 4)])
def test_conv1d_conv3d(s, p, d, g):
    x, w, b = rand(2, 4, 17), rand(8, 4 // g, 3), rand(8)
    both(K.conv1d, F.conv1d(T(x), T(w), T(b), s, p, d, g).numpy(), x, w, b, s, p, d, g)
    x3, w3 = rand(1, 4, 6, 7, 5), rand(4, 4 // g, 2, 3, 2)
    both(K.conv3d, F.conv3d(T(x3), T(w3), None, s, p, d, g).numpy(), x3, w3, None, s, p, d, g)
    spec = K.conv1d_matcher(node("aten::conv1d", input="<var>", weight=w, bias=b, stride=[s], padding=[p],
                                 dilation=[d], groups=g))
    both(spec.fn, F.conv1d(T(x), T(w), T(b), s, p, d, g).numpy(), x)


@pytest.mark.parametrize("s,p,op,g,d", [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (2, 0, 0, 2, 1), (3, 2, 1, 1, 2),
                                        ((2, 1), (1, 0), (1, 0), 1, (1, 2))])
def test_conv_transpose2d(s, p, op, g, d):
    x, w, b = rand(2, 4, 5, 6), rand(4, 6 // g, 3, 2), rand(6)
    exp = F.conv_transpose2d(T(x), T(w), T(b), s, p, op, g, d).numpy()
    both(K.conv_transpose2d, exp, x, w, b, s, p, op, g, d)
    spec = K.conv_transpose2d_matcher(node("aten::conv_transpose2d.input", input="<var>", weight=w, bias=b,
                                           stride=s, padding=p, output_padding=op, groups=g, dilation=d))
    both(spec.fn, exp, x)


@pytest.mark.parametrize("s,p,op,g,d", [((1, 2, 2), (0, 1, 1), (0, 1, 0), 1, 1), (2, 1, 1, 2, (1, 2, 1))])
def test_conv_transpose3d(s, p, op, g, d):
    x, w, b = rand(2, 4, 3, 5, 4), rand(4, 6 // g, 2, 3, 3), rand(6)
    exp = F.conv_transpose3d(T(x), T(w), T(b), s, p, op, g, d).numpy()
    both(K.conv_transpose3d, exp, x, w, b, s, p, op, g, d)
    spec = K.conv_transpose3d_matcher(node("aten::conv_transpose3d.input", input="<var>", weight=w, bias=b,
                                           stride=s, padding=p, output_padding=op, groups=g, dilation=d))
    both(spec.fn, exp, x)


def test_conv_transpose1d_unbatched():
    x, w = rand(4, 7), rand(4, 3, 3)
    both(K.conv_transpose1d, F.conv_transpose1d(T(x), T(w), None, 2, 1, 1).numpy(), x, w, None, 2, 1, 1, 1, 1)
    spec = K.conv_transpose1d_matcher(node("aten::conv_transpose1d", input="<var>", weight=w, bias=None,
                                           stride=[3], padding=[1], output_padding=[2], groups=1, dilation=[1]))
    both(spec.fn, F.conv_transpose1d(T(x), T(w), None, 3, 1, 2).numpy(), x)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_transpose_with_a_static_shape_times_its_form_and_matches_torch(nd):
    """A known input shape: the form is picked by timing at load; the kernel serves that shape and
    another batch (its own prepared runner), into a given or a new output."""
    k, s, p, op, d = (3, 2, 1, 1, 2)[:1] * nd, (2,) * nd, (1,) * nd, (1,) * nd, (2,) * nd
    w, b = rand(4, 3, *k), rand(6)
    fn = K.make_conv_transpose(nd, w, b, s, p, op, 2, d, input_shape=(2, 4) + (3,) * nd)
    ref = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
    for batch in (2, 1):
        x = rand(batch, 4, *(3,) * nd)
        both(fn, ref(T(x), T(w), T(b), s, p, op, 2, d).numpy(), x)


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_and__convolution(transposed):
    x = rand(1, 4, 6, 6, dtype=np.float64)
    w = rand(4, 2, 3, 3, dtype=np.float64)
    b = rand(4 if not transposed else 4, dtype=np.float64)
    args = ([2, 2], [1, 1], [1, 1], transposed, [1, 1] if transposed else [0, 0], 2)
    exp = torch.ops.aten.convolution(T(x), T(w), T(b), *args).numpy()
    both(K.convolution, exp, x, w, b, *args)
    both(K._convolution, exp, x, w, b, *args, False, False, True, True)
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
    spec = K.convolution_matcher(node("aten::convolution", **dict(zip(names, ("<var>", w, b, *args)))))
    both(spec.fn, exp, x)


def test_matchers_fall_back_to_generic_kernels():
    # a computed weight with constant hyper-parameters: planned per shape (test_conv_dynamic.py)
    assert isinstance(K.conv2d_matcher(node("aten::conv2d", input="<var>", weight="<var>", bias=None, stride=1,
                                            padding=0, dilation=1, groups=1)).fn, DynamicWeightConv)
    assert K.conv2d_matcher(node("aten::conv2d", input="<var>", weight=rand(1, 1, 1, 1), bias=None, stride=1,
                                 padding=0, dilation=1, groups="<var>")) is K.conv2d
    assert K.conv_transpose2d_matcher(node("aten::conv_transpose2d.input", input="<var>", weight="<var>",
                                           bias=None, stride=1, padding=0, output_padding=0, groups=1,
                                           dilation=1)) is K.conv_transpose2d
    assert K.convolution_matcher(node("aten::convolution", input="<var>", weight=rand(1, 1, 1), bias="<var>",
                                      stride=[1], padding=[0], dilation=[1], transposed=False,
                                      output_padding=[0], groups=1)) is K.convolution
    assert K.convolution_matcher(node("aten::_convolution", input="<var>", weight="<var>", bias=None,
                                      stride=[1], padding=[0], dilation=[1], transposed=False,
                                      output_padding=[0], groups=1)) is K._convolution
    assert K.conv1d_matcher(node("aten::conv1d", input="<var>", weight="<var>", bias=None, stride="<var>",
                                 padding=0, dilation=1, groups=1)) is K.conv1d


@pytest.mark.parametrize("transposed", [False, True])
def test_kernel_instance_is_thread_safe(transposed):
    """One kernel called from four threads at once (a transposed conv's column scratch per thread)."""
    w, b = rand(8, 4, 3, 3), rand(4 if transposed else 8)
    fn = (K.make_conv_transpose(2, w[:, :4].copy(), b, 2, 1, 1, 1, 1) if transposed
          else K.make_conv(2, w, b, 1, 1, 1, 1))
    xs = [rand(1, 8 if transposed else 4, 12, 12) for _ in range(4)]
    exps = [(F.conv_transpose2d(T(x), T(w[:, :4].copy()), T(b), 2, 1, 1) if transposed
             else F.conv2d(T(x), T(w), T(b), 1, 1)).numpy() for x in xs]
    assert not thread_mismatches(lambda i: fn(xs[i]), exps, rounds=20)


def test_noncontiguous_out_and_shape_change():
    w = rand(3, 2, 3, 3)
    fn = K.make_conv(2, w, None, 1, 1, 1, 1)
    for hw in (5, 7, 5):   # the workspace follows the input shape
        x = rand(1, 2, hw, hw)
        exp = F.conv2d(T(x), T(w), None, 1, 1).numpy()
        big = np.zeros((1, 3, hw, 2 * hw), np.float32)
        view = big[..., ::2]
        assert fn(x, out=view) is view
        close(view, exp)


def test_channel_mismatch_is_kernel_error():
    with pytest.raises(srcore.KernelError, match="channels"):
        K.conv2d(rand(1, 3, 5, 5), rand(2, 4, 3, 3))


def test_decl():
    from srcore_cpu.decl import conv as D
    ops = {k.op for k in D.KERNELS}
    assert {"aten::conv2d", "aten::conv2d.padding", "aten::_convolution", "aten::convolution",
            "aten::conv_transpose2d.input", "aten::conv_transpose3d.input"} <= ops
    for k in D.KERNELS:
        for ref in (k.impl, k.matcher):
            if ref:
                mod, _, attr = ref.partition(":")
                assert callable(getattr(__import__(mod, fromlist=[attr]), attr))

"""srcore:: fused kernels vs the torch compositions they replace, matchers included."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from cpu_kernel_util import node, make_rand, check_both as both  # noqa: E402
from srcore_cpu.kernels import fused as K  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)
rand = make_rand(RNG)
F = torch.nn.functional


def T(a):
    return None if a is None else torch.from_numpy(a)


LINEAR_ACTS = [
    ("linear_relu", K.linear_relu, K.linear_relu_matcher, F.relu, {}),
    ("linear_silu", K.linear_silu, K.linear_silu_matcher, F.silu, {}),
    ("linear_gelu", K.linear_gelu, K.linear_gelu_matcher, lambda t: F.gelu(t), {"approximate": "none"}),
    ("linear_gelu", K.linear_gelu, K.linear_gelu_matcher, lambda t: F.gelu(t, approximate="tanh"),
     {"approximate": "tanh"}),
]


@pytest.mark.parametrize("name,fn,matcher,act,extra", LINEAR_ACTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_act(name, fn, matcher, act, extra, dtype, with_bias):
    x, w = rand(3, 4, 6, dtype=dtype), rand(5, 6, dtype=dtype)
    b = rand(5, dtype=dtype) if with_bias else None
    exp = act(F.linear(T(x), T(w), T(b))).numpy()
    both(fn, exp, x, w, b, *extra.values())
    spec = matcher(node(f"srcore::{name}", input="<var>", weight=w, bias=b, **extra))
    assert isinstance(spec, Specialized) and spec.args == (0,)
    both(spec.fn, exp, x)
    assert matcher(node(f"srcore::{name}", input="<var>", weight="<var>", bias=b, **extra)) is fn


def test_linear_gelu_matcher_needs_constant_approximate():
    w = rand(5, 6)
    assert K.linear_gelu_matcher(node("srcore::linear_gelu", input="<var>", weight=w, bias=None,
                                      approximate="<var>")) is K.linear_gelu
    with pytest.raises(srcore.KernelError, match="approximate"):
        K.linear_gelu(rand(2, 6), w, None, "fast")


@pytest.mark.parametrize("s,p,g", [(1, 1, 1), (2, 0, 2), (1, 1, 4)])
def test_conv2d_relu_and_add_relu(s, p, g):
    x, w, b = rand(2, 4, 7, 7), rand(8, 4 // g, 3, 3), rand(8)
    conv = F.conv2d(T(x), T(w), T(b), s, p, 1, g)
    other = rand(*conv.shape)
    hp = dict(stride=[s, s], padding=[p, p], dilation=[1, 1], groups=g)
    both(K.conv2d_relu, F.relu(conv).numpy(), x, w, b, *hp.values())
    exp = F.relu(conv + T(other)).numpy()
    both(K.conv2d_add_relu, exp, x, w, b, other, *hp.values())
    spec = K.conv2d_relu_matcher(node("srcore::conv2d_relu", input="<var>", weight=w, bias=b, **hp))
    assert spec.args == (0,)
    both(spec.fn, F.relu(conv).numpy(), x)
    spec = K.conv2d_add_relu_matcher(node("srcore::conv2d_add_relu", input="<var>", weight=w, bias=b,
                                          other="<var>", **hp))
    assert spec.args == (0, 3)
    both(spec.fn, exp, x, other)
    assert K.conv2d_relu_matcher(node("srcore::conv2d_relu", input="<var>", weight="<var>", bias=b, **hp)) \
        is K.conv2d_relu
    assert K.conv2d_add_relu_matcher(node("srcore::conv2d_add_relu", input="<var>", weight=w, bias=b,
                                          other="<var>", **{**hp, "groups": "<var>"})) is K.conv2d_add_relu


@pytest.mark.parametrize("alpha", [1, 0.5])
def test_add_relu(alpha):
    a, b = rand(3, 4), rand(4)
    both(K.add_relu, F.relu(torch.add(T(a), T(b), alpha=alpha)).numpy(), a, b, alpha=alpha)


def test_decl_matches_srcore_yaml():
    from srcore_cpu.decl import fused as D
    yaml_text = (Path(srcore.__file__).parent / "ops" / "srcore.yaml").read_text()
    for k in D.KERNELS:
        assert f"func: {k.op}(" in yaml_text
        for ref in (k.impl, k.matcher):
            if ref:
                mod, _, attr = ref.partition(":")
                assert callable(getattr(__import__(mod, fromlist=[attr]), attr))


def _node_2d(op, x, **args):
    """Like ``node``, but the input's type says it is 2-D (what shape propagation gives the matcher)."""
    from srcore.ir.types import TensorType
    from srcore.plugin import ArgInfo, NodeInfo
    info = node(op, input="<var>", **args)
    first = ArgInfo("input", TensorType(str(x.dtype), x.shape), False, None)
    return NodeInfo(info.op, None, (first, *info.args[1:]), ())


def _flat_cases():
    from srcore_cpu.kernels import fused_elementwise as FE, linalg
    return [("aten::linear", linalg.linear_matcher, lambda t: t, {}),
            ("srcore::linear_relu", K.linear_relu_matcher, F.relu, {}),
            ("srcore::linear_tanh", FE.linear_tanh_matcher, torch.tanh, {}),
            ("srcore::linear_sigmoid", FE.linear_sigmoid_matcher, torch.sigmoid, {}),
            ("srcore::linear_gelu", K.linear_gelu_matcher, F.gelu, {"approximate": "none"})]


@pytest.mark.parametrize("op,matcher,act,extra", _flat_cases(), ids=lambda c: c if isinstance(c, str) else "")
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_flat_2d_path(op, matcher, act, extra, with_bias, dtype):
    """A 2-D input gets the one-frame kernel; it matches torch with and without ``out=``, and
    falls back to ``np.matmul`` when ``np.dot`` refuses the ``out`` (not C-contiguous)."""
    x, w = rand(3, 6, dtype=dtype), rand(5, 6, dtype=dtype)
    b = rand(5, dtype=dtype) if with_bias else None
    exp = act(F.linear(T(x), T(w), T(b))).numpy()
    spec = matcher(_node_2d(op, x, weight=w, bias=b, **extra))
    assert spec.fn.__name__ == "linear_2d"
    both(spec.fn, exp, x)
    strided = np.full((5, 3), np.nan, dtype).T
    assert spec.fn(x, out=strided) is strided
    np.testing.assert_allclose(strided, exp, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,matcher,act,extra", [
    ("srcore::linear_silu", K.linear_silu_matcher, F.silu, {}),
    ("srcore::linear_gelu", K.linear_gelu_matcher, F.gelu, {"approximate": "none"}),
    ("srcore::linear_gelu", K.linear_gelu_matcher, lambda t: F.gelu(t, approximate="tanh"), {"approximate": "tanh"}),
])
@pytest.mark.parametrize("rank", [2, 3])
def test_linear_act_large_float32_output_uses_the_compiled_pass(op, matcher, act, extra, rank, monkeypatch):
    """A float32 output of at least MIN_ELEMENTS elements gets its activation from jit_pointwise
    (one compiled pass) instead of the numpy form; same values as torch, into a strided ``out`` too."""
    from srcore.ir.types import TensorType
    from srcore.plugin import NodeInfo
    from srcore_cpu.kernels import jit_pointwise as JP, pointwise_match

    x = rand(*((2, 64, 96) if rank == 3 else (128, 96)))
    x.reshape(-1, 96)[:3, 0] = [np.nan, 40.0, -40.0]     # NaN and saturated rows
    w, b = rand(160, 96) * np.float32(0.3), rand(160)
    exp = act(F.linear(T(x), T(w), T(b))).numpy()
    calls, real = [], JP.make_pointwise

    def spy(kernel, *a, **k):
        calls.append(kernel)
        return real(kernel, *a, **k)
    monkeypatch.setattr(JP, "make_pointwise", spy)
    info = node(op, input="<var>", weight=w, bias=b, **extra)
    out_type = TensorType("float32", exp.shape)
    assert out_type.shape is not None and np.prod(exp.shape) >= pointwise_match.MIN_ELEMENTS
    spec = matcher(NodeInfo(info.op, None, info.args, (out_type,)))
    key = "aten::silu" if op.endswith("silu") else f"gelu:{extra['approximate']}"
    assert calls == [JP.KERNELS[key][0]]
    both(spec.fn, exp, x, tol=2e-5)
    strided = np.full(exp.shape[::-1], np.nan, np.float32).T
    assert spec.fn(x, out=strided) is strided
    np.testing.assert_allclose(strided, exp, rtol=2e-5, atol=2e-5)
    small = matcher(NodeInfo(info.op, None, info.args, (TensorType("float32", (2, 160)),)))
    float64 = matcher(NodeInfo(info.op, None, info.args, (TensorType("float64", exp.shape),)))
    assert isinstance(small, Specialized) and isinstance(float64, Specialized) and len(calls) == 1

"""Activation kernels vs torch.nn.functional, out=None and preallocated out, and the matcher."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.testing import check_kernel, node_info  # noqa: E402
from srcore_cpu.kernels import activation as A  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

F = torch.nn.functional
RNG = np.random.default_rng(1)


def rand(*shape, dtype="float32", scale=3.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


CASES = [  # (kernel, reference, extra args, kernel kwargs)
    (A.relu, F.relu, (), {}),
    (A.relu6, F.relu6, (), {}),
    (A.hardtanh, F.hardtanh, (), {}),
    (A.hardtanh, lambda x, lo, hi: F.hardtanh(x, lo, hi), (-2.0, 0.5), {}),
    (A.threshold, F.threshold, (0.5, -7.0), {}),
    (A.sigmoid, torch.sigmoid, (), {}),
    (A.silu, F.silu, (), {}),
    (A.gelu, F.gelu, (), {}),
    (A.gelu, lambda x: F.gelu(x, approximate="tanh"), (), {"approximate": "tanh"}),
    (A.hardsigmoid, F.hardsigmoid, (), {}),
    (A.hardswish, F.hardswish, (), {}),
    (A.leaky_relu, F.leaky_relu, (), {}),
    (A.leaky_relu, F.leaky_relu, (0.3,), {}),
    (A.elu, F.elu, (), {}),
    (A.elu, lambda x, a, s, i: torch.ops.aten.elu(x, a, s, i), (0.7, 1.5, 2.0), {}),
    (A.softplus, F.softplus, (), {}),
    (A.softplus, F.softplus, (2.0, 3.0), {}),
    (A.mish, F.mish, (), {}),
    (A.log_sigmoid, F.logsigmoid, (), {}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel,ref,args,kw", CASES, ids=[f"{c[0].__name__}{i}" for i, c in enumerate(CASES)])
def test_activation(kernel, ref, args, kw, dtype):
    x = rand(3, 5, 7, dtype=dtype)
    x.flat[:4] = [0.0, 20.5, -30.0, 3.0]  # edges: zero, softplus threshold, saturation, hardswish knee
    check_kernel(kernel, ref, x, *args, **kw)


@pytest.mark.parametrize("kernel,ref", [(A.relu, F.relu), (A.sigmoid, torch.sigmoid), (A.gelu, F.gelu)])
def test_nan_and_0d(kernel, ref):
    x = np.array([np.nan, -1.0, 1.0], np.float32)
    check_kernel(kernel, ref, x)
    r = check_kernel(kernel, ref, np.array(-0.5, np.float32))
    assert isinstance(r, np.ndarray) and r.shape == ()


@pytest.mark.parametrize("slope", [0.0, 0.01, 1.0, 1.5, -0.5, -2.0])
def test_leaky_relu_every_slope_with_nan_and_inf(slope):
    """``max(x, s * x)`` for ``s <= 1``, ``min`` above: the same as torch's ``x if x > 0 else s * x``
    for slopes above one and negative slopes too, NaN and infinities included."""
    x = rand(4, 9)
    x.flat[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    check_kernel(A.leaky_relu, F.leaky_relu, x, slope)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_relu_family_on_ints(dtype):
    x = rand(4, 4, dtype=dtype)
    check_kernel(A.relu, F.relu, x)
    check_kernel(A.hardtanh, lambda t, a, b: F.hardtanh(t, a, b), x, -2, 2)
    check_kernel(A.sigmoid, torch.sigmoid, x)  # float32 result


def test_gelu_bad_mode():
    with pytest.raises(ValueError, match="approximate"):
        A.gelu(rand(2), approximate="fast")


def test_matcher():
    t = TensorType("float32", (2, 3))
    x = rand(2, 3)
    relu = A.activation_matcher(node_info("aten::relu", self=t, outputs=(t,)))
    out = np.empty((2, 3), np.float32)
    assert relu.args == (0,) and relu.fn(x, out=out) is out
    np.testing.assert_array_equal(out, F.relu(torch.from_numpy(x)).numpy())
    sig = A.activation_matcher(node_info("aten::sigmoid", self=t, outputs=(t,)))
    np.testing.assert_allclose(sig.fn(x), torch.sigmoid(torch.from_numpy(x)).numpy(), rtol=1e-6)
    i = TensorType("int64", (2, 3))
    # otherwise the generic kernel
    assert A.activation_matcher(node_info("aten::relu", self=i, outputs=(i,))) is A.relu
    assert A.activation_matcher(node_info("aten::sigmoid", self=i, outputs=(t,))) is A.sigmoid
    assert A.activation_matcher(node_info("aten::relu", self=t, outputs=(TensorType("float32", ()),))) is A.relu


def test_check_kernel_by_op_name():
    """An op name resolves through the installed plugins' srcore_kernels (the out kernel first)."""
    pytest.importorskip("srcore_cpu.kernels.activation")
    from importlib.metadata import entry_points

    if not any(ep.name == "cpu" for ep in entry_points(group="srcore.plugins")):
        pytest.skip("srcore-cpu is not installed")
    check_kernel("aten::relu", F.relu, shapes=[(3, 4)])
    check_kernel("aten::gelu", lambda x: F.gelu(x, approximate="tanh"), shapes=[(5,)], input_dtype="float64",
                 approximate="tanh")


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("lo,hi", [(-0.5, 0.5), (0.0, 0.0), (-2.5, 1.5), (-2, 3)])
def test_hardtanh_relu6_int(dtype, lo, hi):
    # conformance regression: float bounds on an int tensor are truncated to ints (torch), not a casting error
    x = np.arange(-8, 10, dtype=dtype).reshape(3, 6)
    check_kernel(A.hardtanh, lambda t, a, b: torch.ops.aten.hardtanh(t, a, b), x, lo, hi)
    check_kernel(A.relu6, torch.ops.aten.relu6, x)


@pytest.mark.parametrize("lambd", [0.5, 0.0, 1.3])
def test_shrinks_prelu_rrelu_match_torch(lambd):
    """softshrink, hardshrink, prelu (per channel and shared), rrelu in eval: no kernel before."""
    from srcore.errors import KernelError
    from srcore_cpu.kernels import activation as A

    F = torch.nn.functional
    x = (np.random.default_rng(16).standard_normal((2, 3, 4)) * 2).astype(np.float32)
    x[0, 0, :3] = [np.nan, lambd, -lambd]
    check_kernel(A.softshrink, lambda t, *_: F.softshrink(t, lambd), x, lambd)
    check_kernel(A.hardshrink, lambda t, *_: F.hardshrink(t, lambd), x, lambd)
    w = np.array([0.25, -0.5, 2.0], np.float32)
    check_kernel(A.prelu, F.prelu, x, w)
    check_kernel(A.prelu, F.prelu, x, w[:1])
    check_kernel(A.prelu, F.prelu, x[0, 0], w[:1])
    check_kernel(A.rrelu, lambda t, *_: F.rrelu(t, 0.1, 0.3, training=False), x, 0.1, 0.3, False)
    with pytest.raises(KernelError, match="channel size"):
        A.prelu(x, np.ones(4, np.float32))
    with pytest.raises(RuntimeError, match="channel size"):   # torch: a 1-D input is one channel
        F.prelu(torch.from_numpy(x[0, 0]), torch.ones(4))
    with pytest.raises(KernelError, match="channel size"):
        A.prelu(x[0, 0], np.ones(4, np.float32))

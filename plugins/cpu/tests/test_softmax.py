"""softmax kernels vs torch: softmax/log_softmax (.int with dtype, _softmax, _log_softmax), matchers."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.plugin import Specialized  # noqa: E402
from cpu_kernel_util import node  # noqa: E402
from srcore_cpu.kernels import softmax as K  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)
aten = torch.ops.aten
T = torch.from_numpy


def rand(*shape, dtype=np.float32):
    return np.asarray(RNG.standard_normal(shape) * 5, dtype=dtype)


def both(fn, exp, *args):
    tol = 1e-5 if exp.dtype == np.float32 else 1e-12
    r = fn(*args)
    assert r.dtype == exp.dtype and r.shape == exp.shape
    np.testing.assert_allclose(r, exp, rtol=tol, atol=tol)
    buf = np.full(exp.shape, np.nan, exp.dtype)
    assert fn(*args, out=buf) is buf
    np.testing.assert_allclose(buf, exp, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape,dim", [((3, 7), -1), ((3, 7), 0), ((2, 3, 4), 1), ((5,), 0), ((), 0),
                                       ((0, 3), 1), ((2, 0), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_log_softmax(shape, dim, dtype):
    x = rand(*shape, dtype=dtype)
    both(K.softmax, aten.softmax(T(x), dim).numpy(), x, dim)
    both(K.log_softmax, aten.log_softmax(T(x), dim).numpy(), x, dim)
    both(K._softmax, aten._softmax(T(x), dim, False).numpy(), x, dim, False)
    both(K._log_softmax, aten._log_softmax(T(x), dim, False).numpy(), x, dim, False)


def test_stable_for_large_inputs():
    x = np.array([[1000.0, 1001.0, -1000.0], [-np.inf, 0.0, 1.0]], np.float32)
    both(K.softmax, aten.softmax(T(x), 1).numpy(), x, 1)
    both(K.log_softmax, aten.log_softmax(T(x), 1).numpy(), x, 1)


def test_dtype_argument():
    x = rand(3, 4)
    both(K.softmax, aten.softmax(T(x), 1, torch.float64).numpy(), x, 1, 7)
    both(K.log_softmax, aten.log_softmax(T(x), 1, torch.float64).numpy(), x, 1, 7)
    x64 = rand(3, 4, dtype=np.float64)
    both(K.softmax, aten.softmax(T(x64), 0, torch.float32).numpy(), x64, 0, 6)


@pytest.mark.parametrize("op,fn,ref,generic,_generic", [
    ("aten::softmax.int", K.softmax_matcher, aten.softmax, K.softmax, K._softmax),
    ("aten::log_softmax.int", K.log_softmax_matcher, aten.log_softmax, K.log_softmax, K._log_softmax)])
def test_matchers(op, fn, ref, generic, _generic):
    spec = fn(node(op, self="<var>", dim=-1, dtype=None))
    assert isinstance(spec, Specialized) and spec.args == (0,)
    x = rand(4, 6)
    both(spec.fn, ref(T(x), -1).numpy(), x)
    assert fn(node(op, self="<var>", dim="<var>", dtype=None)) is generic
    assert fn(node(op, self="<var>", dim=1, dtype=7)) is generic
    spec2 = fn(node(op.replace(".int", "").replace("aten::", "aten::_"), self="<var>", dim=0, half_to_float=False))
    both(spec2.fn, ref(T(x), 0).numpy(), x)
    _op = op.replace(".int", "").replace("aten::", "aten::_")
    assert fn(node(_op, self="<var>", dim=0, half_to_float=True)) is _generic


def test_decl():
    from srcore_cpu.decl import softmax as D
    assert {k.op for k in D.KERNELS} == {"aten::softmax.int", "aten::log_softmax.int", "aten::_softmax",
                                         "aten::_log_softmax"}
    for k in D.KERNELS:
        for ref in (k.impl, k.matcher):
            mod, _, attr = ref.partition(":")
            assert callable(getattr(__import__(mod, fromlist=[attr]), attr))

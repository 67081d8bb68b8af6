"""softmax kernels vs torch: softmax/log_softmax (.int with dtype, _softmax, _log_softmax), matchers."""
from __future__ import annotations

import math

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


# --- the compiled last-dim softmax (jit_softmax.py) ---------------------------------------------

def _f32_node(shape, dim=-1, op="aten::softmax.int"):
    from srcore.ir.types import TensorType
    from srcore.testing import node_info

    t = TensorType("float32", shape)
    return node_info(op, self=t, dim=dim, dtype=None, outputs=(t,))


@pytest.fixture
def compiled_calls(monkeypatch):
    """The row counts the compiled kernel ran on (a spy on ``jit_softmax.Softmax``), at one intra-op
    thread (no split timed: ``test_row_split.py`` checks the split's bits)."""
    from srcore_cpu.kernels import jit_softmax, row_split

    monkeypatch.setattr(row_split._par, "intra_op_threads", lambda: 1)
    calls = []

    class Spy(jit_softmax.Softmax):
        def __call__(self, x2, out2):
            calls.append(x2.shape)
            return super().__call__(x2, out2)
    monkeypatch.setattr(jit_softmax, "Softmax", Spy)
    return calls


@pytest.mark.parametrize("shape", [(1, 4, 128, 128), (3, 64, 37), (2, 4096)])
def test_compiled_softmax_matches_torch(shape, compiled_calls):
    spec = K.softmax_matcher(_f32_node(shape))
    x = rand(*shape)
    both(spec.fn, torch.softmax(T(x).double(), -1).float().numpy(), x)
    # in place (the planner may hand the input's buffer as the output)
    y = x.copy()
    assert spec.fn(y, out=y) is y
    np.testing.assert_allclose(y, torch.softmax(T(x), -1).numpy(), rtol=1e-5, atol=1e-6)
    assert compiled_calls and all(c == (math.prod(shape[:-1]), shape[-1]) for c in compiled_calls)


def test_compiled_softmax_special_values_as_torch(compiled_calls):
    x = rand(8, 40)
    x[0, 3] = np.nan             # NaN row: all NaN
    x[1] = -np.inf               # every key masked: NaN (0 / 0)
    x[2, 7] = np.inf             # +inf: NaN (inf - inf)
    x[3, :20] = -np.inf          # partly masked: zeros there
    x[4] = 1e4                   # far from zero: the max keeps exp in range
    x[5, 39] = 80.0              # the max in the tail past the last full vector
    x[6] = 0.0
    x[6, 9] = 95.0               # exp(-95): subnormal results, as torch's
    x[7, :30] -= 10000.0         # BERT's additive mask: 0 there
    spec = K.softmax_matcher(_f32_node((128, 40)))
    want = torch.softmax(T(x), -1).numpy()
    for inplace in (False, True):
        xs = np.tile(x, (16, 1))
        got = spec.fn(xs, out=xs if inplace else None)[:8]
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=3e-44)    # ~20 subnormal ulps
    assert compiled_calls == [(128, 40)] * 2


def test_compiled_softmax_leaves_other_nodes_and_arrays_to_numpy(compiled_calls, monkeypatch):
    from srcore_cpu.kernels import tactic

    # a small node times numpy's kernel against the compiled one at its first call (late_compiled.py):
    # numpy's wins here (pinned: tests do not depend on timing)
    monkeypatch.setattr(tactic, "fastest", lambda cands, args, **kw: "numpy")
    for n in (_f32_node((16, 16)), _f32_node((64, 128), dim=0)):       # small; not the last dim
        x = rand(*n.output_types[0].shape)
        both(K.softmax_matcher(n).fn, torch.softmax(T(x), n.const("dim")).numpy(), x)
    x = rand(64, 128)   # (log-softmax has a compiled kernel of its own, jit_softmax.LogSoftmax)
    both(K.log_softmax_matcher(_f32_node((64, 128), op="aten::log_softmax.int")).fn,
         torch.log_softmax(T(x), -1).numpy(), x)
    assert compiled_calls == []
    spec = K.softmax_matcher(_f32_node((64, 128)))
    x = rand(128, 64).T                                    # non-contiguous: numpy's kernel, same result
    both(spec.fn, torch.softmax(T(np.ascontiguousarray(x)), -1).numpy(), x)
    x64 = rand(64, 128, dtype=np.float64)
    both(spec.fn, torch.softmax(T(x64), -1).numpy(), x64)
    assert compiled_calls == []

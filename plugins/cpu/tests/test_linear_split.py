"""Constant-weight linears split by rows with the bias add and activation in each part
(``srcore_cpu/kernels/linear_split.py``): results against torch for odd row counts, more threads
than rows, every activation form the fused linears pass; other inputs go to the one kernel; the
matchers take the split only where the (injected) load-time timing says so, and at one thread
nothing is built or timed."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore.ir.types import TensorType
from srcore.plugin import Specialized
from srcore.testing import node_info
from srcore_cpu.kernels import fused, linalg, linear_split as LS, row_split as RS
from srcore_cpu.kernels.pointwise_match import compiled_inplace

pytestmark = pytest.mark.one_pass   # kernel calls

TOL = dict(rtol=2e-5, atol=2e-5)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _torch_linear(x, w, b, act=None):
    y = F.linear(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b))
    return (y if act is None else act(y)).numpy()


def _acts():
    """(act_ as _linear_fast takes it, torch's activation): relu_, a ufunc, a compiled GELU, and a
    function that returns a new array instead of writing in place."""
    gelu = compiled_inplace("gelu:none", TensorType("float32", (64, 1024)), approximate="none")
    return [(None, None), (linalg.relu_, torch.relu), (np.tanh, torch.tanh), (gelu, F.gelu),
            (lambda o: o * 2.0, lambda t: t * 2.0)]


@settings(max_examples=30, deadline=None)
@given(lead=st.lists(st.integers(1, 9), min_size=1, max_size=3), k=st.integers(1, 40), n=st.integers(1, 40),
       threads=st.sampled_from([2, 3, 4]), bias=st.booleans(), which=st.integers(0, 4))
def test_rows_split_matches_torch(lead, k, n, threads, bias, which):
    act_, ref = _acts()[which]
    in_shape = tuple(lead) + (k,)
    w, b, x = _rand(n, k, seed=1), (_rand(n, seed=2) if bias else None), _rand(*in_shape, seed=3)
    one_calls = []

    def one(input, out=None):
        one_calls.append(1)
        return np.asarray(_torch_linear(input, w, b, ref)) if out is None else np.copyto(out, _torch_linear(
            input, w, b, ref)) or out
    fn = LS.make_rows(linalg.transposed(w), b, act_, in_shape, threads, one)
    rows = int(np.prod(lead))
    if rows < 2 * threads:          # 1 row, or more threads than two rows each: no split
        assert fn is None
        return
    want = _torch_linear(x, w, b, ref)
    np.testing.assert_allclose(fn(x), want, **TOL)
    out = np.full(in_shape[:-1] + (n,), np.nan, np.float32)
    assert fn(x, out=out) is out
    np.testing.assert_allclose(out, want, **TOL)
    assert one_calls == []


def test_rows_split_hands_other_inputs_to_the_one_kernel():
    w, b = _rand(24, 16), _rand(24)
    seen = []

    def one(input, out=None):
        seen.append(input.shape)
        return linalg.linear(input, w, b, out=out)
    fn = LS.make_rows(linalg.transposed(w), b, None, (2, 5, 16), 2, one)
    x = _rand(2, 5, 16)
    for arg, out in [(_rand(3, 5, 16), None),                       # another shape
                     (_rand(2, 5, 32)[..., ::2], None),             # not contiguous
                     (x.astype(np.float64), None),                  # another dtype
                     (x, np.empty((2, 5, 48), np.float32)[..., ::2])]:   # a strided out
        got = fn(arg, out=out)
        np.testing.assert_allclose(got, _torch_linear(np.asarray(arg, np.float32), w, b), **TOL)
    assert len(seen) == 4
    assert LS.make_rows(linalg.transposed(w), b, None, (3, 16), 2, one) is None     # 3 rows, 2 threads


def _linear_node(shape, w, b, op="aten::linear", **extra):
    return node_info(op, input=TensorType("float32", shape), weight=w, bias=b, **extra,
                     outputs=(TensorType("float32", shape[:-1] + (w.shape[0],)),))


@pytest.mark.parametrize("pays", [True, False])
@pytest.mark.parametrize("op", ["aten::linear", "srcore::linear_gelu", "srcore::linear_relu"])
@pytest.mark.parametrize("shape", [(1, 128, 256), (128, 256)])
def test_matchers_take_the_split_only_where_it_timed_faster(monkeypatch, pays, op, shape):
    timed = []
    monkeypatch.setattr(RS, "split_pays", lambda one, split, args, timer=None: timed.append(split.what) or pays)
    monkeypatch.setattr(LS._par, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(linalg, "_mkl_gemm", lambda shape, wT: None)   # (the one kernel on numpy's BLAS)
    monkeypatch.setenv("SRCORE_CPU_NATIVE_SPLIT", "0")   # (its candidates: test_native_team.py)
    w, b = _rand(1024, 256, seed=4), _rand(1024, seed=5)
    extra = {"approximate": "none"} if op == "srcore::linear_gelu" else {}
    matcher = {"aten::linear": linalg.linear_matcher, "srcore::linear_gelu": fused.linear_gelu_matcher,
               "srcore::linear_relu": fused.linear_relu_matcher}[op]
    spec = matcher(_linear_node(shape, w, b, op, **extra))
    assert isinstance(spec, Specialized)
    assert len(timed) == 1 and timed[0].startswith("linear_rows:bias:")
    assert (spec.fn.__qualname__ == "make_rows.<locals>.linear_rows") == pays
    ref = {"aten::linear": None, "srcore::linear_gelu": F.gelu, "srcore::linear_relu": torch.relu}[op]
    x = _rand(*shape, seed=6)
    np.testing.assert_allclose(spec.fn(x), _torch_linear(x, w, b, ref), rtol=1e-4, atol=1e-4)


def test_nothing_is_timed_at_one_thread_small_products_or_switched_off(monkeypatch):
    monkeypatch.setattr(RS, "split_pays", lambda *a, **k: pytest.fail("timed"))
    w, b = _rand(1024, 256), _rand(1024)
    monkeypatch.setattr(LS._par, "intra_op_threads", lambda: 1)
    assert "linear_rows" not in linalg.linear_matcher(_linear_node((128, 256), w, b)).fn.__qualname__
    monkeypatch.setattr(LS._par, "intra_op_threads", lambda: 2)
    small = _linear_node((4, 256), w, b)        # 1M multiply-adds < MIN_MACS
    assert "linear_rows" not in linalg.linear_matcher(small).fn.__qualname__
    monkeypatch.setenv("SRCORE_CPU_LINEAR_ROWS", "0")
    assert "linear_rows" not in linalg.linear_matcher(_linear_node((128, 256), w, b)).fn.__qualname__


def test_rows_split_runs_its_parts_on_the_part_pool(monkeypatch):
    calls = []
    real = LS._par.run_parts
    monkeypatch.setattr(LS._par, "run_parts", lambda fn, parts, threads: (calls.append((parts, threads)),
                                                                          real(fn, parts, threads))[1])
    w, b = _rand(64, 32), _rand(64)
    fn = LS.make_rows(linalg.transposed(w), b, linalg.relu_, (7, 32), 3, None)
    x = _rand(7, 32)
    np.testing.assert_allclose(fn(x), _torch_linear(x, w, b, torch.relu), **TOL)
    assert calls == [(3, 3)]


@pytest.mark.parametrize("which", range(5))
def test_the_splits_fallback_matches_torch_on_any_input(which):
    act_, ref = _acts()[which]
    w, b = _rand(24, 16), _rand(24)
    fn = LS.plain(linalg.transposed(w), b, act_)
    for x in (_rand(3, 16), _rand(2, 5, 32)[..., ::2], _rand(16)):
        np.testing.assert_allclose(fn(x), _torch_linear(np.ascontiguousarray(x), w, b, ref), **TOL)


def test_rows_split_called_from_two_threads_at_once():
    """Two runtimes' calls at once: one gets the part pool, the other runs its parts itself; both right."""
    import threading

    w, b = _rand(256, 64, seed=7), _rand(256, seed=8)
    fn = LS.make_rows(linalg.transposed(w), b, linalg.relu_, (33, 64), 2, None)
    xs = [_rand(33, 64, seed=s) for s in (9, 10)]
    wants = [_torch_linear(x, w, b, torch.relu) for x in xs]
    bad = []

    def run(i):
        for _ in range(30):
            if not np.allclose(fn(xs[i]), wants[i], **TOL):
                bad.append(i)
    ts = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == []

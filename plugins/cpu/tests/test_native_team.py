"""Products split over the cpu plugin's native team (``srcore_cpu/kernels/native_team.py``: parts
that call numpy's OpenBLAS from compiled code without the GIL): a constant-weight linear's row and
column splits and a batched matmul's (attention's heads through transposed views) against torch
over shapes; the worker asleep and woken, a worker descheduled, two callers at once, other inputs
to the fallback; and the switch that turns it off. Two threads forced."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore_cpu.kernels import linalg, linear_split as LS, native_team as NT, split_gemm as SG

pytestmark = [pytest.mark.one_pass,
              pytest.mark.skipif(NT.sgemm_address() is None, reason="numpy's BLAS is not an ILP64 OpenBLAS")]

TOL = dict(rtol=2e-5, atol=3e-5)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _torch_linear(x, w, b, act=None):
    y = F.linear(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b))
    return (y if act is None else act(y)).numpy()


def _natives(w, b, in_shape, threads=2, act_=None):
    wT = linalg.transposed(w)
    return LS.native_candidates(wT, b, in_shape, threads, LS.plain(wT, b, act_), act_)


def _acts():
    """(act_ as the fused linears pass it, torch's activation): every epilogue a part compiles."""
    from srcore.ir.types import TensorType
    from srcore_cpu.kernels.pointwise_match import compiled_inplace

    big = TensorType("float32", (64, 1024))
    return [(None, None), (linalg.relu_, torch.relu), (np.tanh, torch.tanh),
            (compiled_inplace("gelu:none", big, approximate="none"), F.gelu),
            (compiled_inplace("gelu:tanh", big, approximate="tanh"), lambda t: F.gelu(t, approximate="tanh")),
            (compiled_inplace("aten::silu", big), F.silu)]


@settings(max_examples=60, deadline=None)
@given(lead=st.lists(st.integers(1, 40), min_size=1, max_size=3), k=st.integers(1, 70), n=st.integers(1, 90),
       threads=st.sampled_from([2, 3]), bias=st.booleans(), which=st.integers(0, 5))
def test_linear_splits_match_torch(lead, k, n, threads, bias, which):
    act_, act = _acts()[which]
    in_shape = tuple(lead) + (k,)
    w, b, x = _rand(n, k, seed=1), (_rand(n, seed=2) if bias else None), _rand(*in_shape, seed=3)
    want = _torch_linear(x, w, b, act)
    rows = int(np.prod(lead))
    natives = _natives(w, b, in_shape, threads, act_)
    assert ("native_rows" in natives) == (rows >= 2 * threads)
    assert ("native_cols" in natives) == (n // 16 >= 2 * threads)
    for name, fn in natives.items():
        np.testing.assert_allclose(fn(x), want, **TOL, err_msg=name)
        out = np.full(want.shape, np.nan, np.float32)
        assert fn(x, out=out) is out
        np.testing.assert_allclose(out, want, **TOL, err_msg=name)


def test_linear_splits_hand_other_inputs_to_the_fallback():
    w, b = _rand(64, 16), _rand(64)
    x = _rand(2, 8, 16)
    for name, fn in _natives(w, b, (2, 8, 16)).items():
        for arg, out in [(_rand(3, 8, 16), None), (_rand(2, 8, 32)[..., ::2], None), (x.astype(np.float64), None),
                         (x, np.empty((2, 8, 128), np.float32)[..., ::2])]:
            got = fn(arg, out=out)
            np.testing.assert_allclose(got, _torch_linear(np.asarray(arg, np.float32), w, b), **TOL, err_msg=name)


def _heads(t, heads):   # (b, t, d) -> (b, heads, t, d / heads), a transposed view as attention makes it
    b_, t_, d = t.shape
    return t.reshape(b_, t_, heads, d // heads).transpose(0, 2, 1, 3)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 3), heads=st.integers(1, 5), t=st.integers(1, 40), dh=st.integers(1, 24),
       threads=st.sampled_from([2, 3]), form=st.sampled_from(["qk", "pv", "plain", "broadcast"]))
def test_batched_matmul_matches_torch_on_attention_views(batch, heads, t, dh, threads, form):
    q, k = _rand(batch, t, heads * dh, seed=4), _rand(batch, t, heads * dh, seed=5)
    if form == "qk":       # q @ k^T: both operands transposed views, b's last axis not contiguous
        a, b = _heads(q, heads), _heads(k, heads).swapaxes(-1, -2)
    elif form == "pv":     # probs @ v: a contiguous, b a view
        a, b = _rand(batch, heads, t, t, seed=6), _heads(k, heads)
    elif form == "plain":
        a, b = _rand(batch, heads, t, dh, seed=7), _rand(batch, heads, dh, t, seed=8)
    else:                  # a batch broadcast against a matrix
        a, b = _rand(batch, heads, t, dh, seed=9), _rand(dh, t, seed=10)
    fn = SG.native_matmul(a.shape, b.shape, threads)
    want = torch.matmul(torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))).numpy()
    np.testing.assert_allclose(fn(a, b), want, **TOL)
    out = np.full(want.shape, np.nan, np.float32)
    assert fn(a, b, out=out) is out
    np.testing.assert_allclose(out, want, **TOL)


def test_batched_matmul_reads_no_block_without_a_contiguous_axis():
    a = _rand(2, 8, 12)[:, ::2, ::2]          # neither axis of a's matrices contiguous: np.matmul
    b = _rand(2, 6, 5)
    fn = SG.native_matmul(a.shape, b.shape, 2)
    np.testing.assert_allclose(fn(a, b), np.matmul(a, b), **TOL)


def test_a_sleeping_worker_is_woken_and_a_late_one_never_waited_for():
    """Spin of 1 us: the worker sleeps between the calls, each call wakes it (or runs every part on
    the caller when it comes late); every result right."""
    team = NT.Team(2, spin_us=1)
    w, b = _rand(48, 32, seed=11), _rand(48, seed=12)
    wT = linalg.transposed(w)
    parts = [(lo * 32 * 4, wT.ctypes.data, lo * 48 * 4, b.ctypes.data, 8, 48, 32, 32, 48, 48, NT.NO_TRANS,
              NT.NO_TRANS, 0) for lo in range(0, 64, 8)]
    gemm = NT.Gemm(parts, NT.sgemm_address(), team)
    for i in range(20):
        x, out = _rand(64, 32, seed=i), np.full((64, 48), np.nan, np.float32)
        gemm(x.ctypes.data, 0, out.ctypes.data)
        np.testing.assert_allclose(out, _torch_linear(x, w, b), **TOL)
        time.sleep(0.002)
    assert team._sleeping == [True] or team._sleeping == [False]


def test_two_callers_at_once_both_right():
    """Two runtimes' calls at once: one gets the team, the other runs its parts alone."""
    w, b = _rand(96, 64, seed=13), _rand(96, seed=14)
    fn = _natives(w, b, (33, 64))["native_rows"]
    xs = [_rand(33, 64, seed=s) for s in (15, 16)]
    wants = [_torch_linear(x, w, b) for x in xs]
    bad = []

    def run(i):
        for _ in range(200):
            if not np.allclose(fn(xs[i]), wants[i], **TOL):
                bad.append(i)
    ts = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == []


def test_an_activation_it_does_not_compile_gets_no_native_split():
    assert _natives(_rand(64, 32), None, (16, 32), act_=lambda o: o * 2.0) == {}


def test_turned_off_or_one_thread_no_team(monkeypatch):
    assert NT.team(1) is None
    monkeypatch.setenv("SRCORE_CPU_NATIVE_SPLIT", "0")
    assert NT.team(2) is None
    assert _natives(_rand(64, 32), None, (16, 32)) == {}
    assert SG.native_matmul((4, 16, 8), (4, 8, 16), 2) is None


def test_the_linear_matcher_keeps_what_timed_fastest(monkeypatch):
    """At two threads an aten::linear's kernel is one of its timed candidates (one thread, the
    Python row split, the native splits): the injected timing's pick, and right."""
    from srcore.ir.types import TensorType
    from srcore.testing import node_info
    from srcore_cpu.kernels import tactic

    monkeypatch.setattr(LS._par, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(linalg, "_mkl_gemm", lambda shape, wT: None)
    w, b, x = _rand(256, 256, seed=17), _rand(256, seed=18), _rand(1, 128, 256, seed=19)
    node = node_info("aten::linear", input=TensorType("float32", (1, 128, 256)), weight=w, bias=b,
                     outputs=(TensorType("float32", (1, 128, 256)),))
    monkeypatch.setenv("SRCORE_CPU_LINEAR_ROWS", "0")   # (the part pool's split alone is off: natives stay)
    seen = []
    monkeypatch.setattr(tactic, "fastest", lambda cands, args, key=None, **kw: seen.append(sorted(cands)) or "one")
    linalg.linear_matcher(node)
    assert seen == [["native_cols", "native_rows", "one"]]
    monkeypatch.delenv("SRCORE_CPU_LINEAR_ROWS")
    for pick in ("one", "split", "native_rows", "native_cols"):
        seen = []
        monkeypatch.setattr(tactic, "fastest", lambda cands, args, key=None, **kw: seen.append(sorted(cands)) or pick)
        fn = linalg.linear_matcher(node).fn
        assert seen == [["native_cols", "native_rows", "one", "split"]]
        assert (getattr(fn, "what", "") or getattr(getattr(fn, "__wrapped__", None), "what", "")).endswith(
            pick) == pick.startswith("native")
        np.testing.assert_allclose(fn(x), _torch_linear(x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("native_wins", [True, False])
def test_the_matmul_matcher_keeps_the_native_split_where_it_timed_faster(monkeypatch, native_wins):
    """bert's ``q @ k^T`` at two threads: the native split against the Python parts' split (the
    injected timing's pick), then that against numpy's threaded matmul as before; right either way."""
    import threadpoolctl
    from srcore.ir.types import TensorType
    from srcore.testing import node_info
    from srcore_cpu.kernels import tactic

    monkeypatch.setattr(SG, "_choices", {})
    monkeypatch.setattr(tactic, "fastest", lambda cands, args, key=None, **kw: "native" if native_wins else "split")
    monkeypatch.setattr(tactic, "split_vs_blas", lambda split, blas, **kw: (split(), blas(), (1.0, 1.0))[-1])
    a_shape, b_shape = (1, 4, 128, 64), (1, 4, 64, 128)
    node = node_info("aten::matmul", self=TensorType("float32", a_shape), other=TensorType("float32", b_shape),
                     outputs=(TensorType("float32", (1, 4, 128, 128)),))
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        fn = linalg.matmul_matcher(node).fn
    assert (getattr(fn, "__wrapped__", fn).__name__ == "native_matmul") == native_wins
    q, k = _rand(1, 128, 256, seed=20), _rand(1, 128, 256, seed=21)
    a, b = _heads(q, 4), _heads(k, 4).swapaxes(-1, -2)
    np.testing.assert_allclose(fn(a, b), torch.matmul(torch.from_numpy(q.reshape(1, 128, 4, 64).transpose(0, 2, 1, 3)),
                                                     torch.from_numpy(k.reshape(1, 128, 4, 64).transpose(0, 2, 3, 1))
                                                     ).numpy(), **TOL)


def test_a_forked_child_runs_the_parents_kernels_right():
    """Kernels built before a fork: in the child (none of the parent's workers) they run on the
    child's own team, right."""
    import os

    w, b = _rand(96, 64, seed=22), _rand(96, seed=23)
    fn = _natives(w, b, (40, 64))["native_rows"]
    x = _rand(40, 64, seed=24)
    fn(x)   # (the parent's team exists and has run)
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: its result's bytes into the pipe
        try:
            y = np.ascontiguousarray(fn(x), np.float32).tobytes()
            os.write(wfd, y)
        finally:
            os._exit(0)
    os.close(wfd)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    got = np.frombuffer(data, np.float32).reshape(40, 96)
    np.testing.assert_allclose(got, _torch_linear(x, w, b), **TOL)

"""The OpenBLAS team (kernels/blas_team.py) and the engine's choice between it and the OpenMP pool
at more than one intra-op thread (tactics/choose.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.conv import ConvSpec, conv_tactic_builders
from srcore_trt_like.conv import gemm as conv_gemm
from srcore_trt_like.kernels import blas_team
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.tactics import choose

pytestmark = pytest.mark.one_pass


@given(st.integers(1, 20000))
@settings(max_examples=60, deadline=None)
def test_parts_cover_the_columns_in_quanta(n):
    parts = blas_team.parts(n)
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert all(a % blas_team.PART_QUANTUM == 0 and b > a for a, b in parts)
    assert len(parts) <= blas_team.TARGET_PARTS


@pytest.mark.parametrize("shape", [(64, 300, 1000), (2, 5, 96, 130)])
def test_split_gemm_is_bit_identical_on_any_team(shape):
    """The parts depend on the weight alone: 1, 2 or 3 threads give the same bits, close to float64."""
    assert parallel._set_local(), "numpy's OpenBLAS must take a per-thread count (>= 0.3.27)"
    rng = np.random.default_rng(0)
    *lead, k, n = shape
    x = rng.standard_normal((*lead, k), np.float32)
    w = rng.standard_normal((n, k), np.float32)
    gemm = blas_team.SplitGemm(w, 3)
    outs = []
    for team in (1, 2, 3):
        out = np.full((*lead, n), np.nan, np.float32)
        gemm._run(x.reshape(-1, k), out.reshape(-1, n), team)
        outs.append(out)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    ref = x.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(outs[0], ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    before = dict(parallel.COUNTS)
    out = np.empty((*lead, n), np.float32)
    for _ in range(3):                  # through the governor: the first call alone, then the team
        gemm(x, out)
        np.testing.assert_array_equal(out, outs[0])
    assert parallel.COUNTS["solo"] > before["solo"] and parallel.COUNTS["team"] > before["team"]


class _TwoPhases(blas_team.TeamParts):
    """A tactic of two phases of 4 parts: the first a short transform (its team costs more than it
    saves), the second a long product (its team halves it)."""

    def __init__(self):
        self._run = self._body
        self._init_team(2)
        self.phase_ran: list[list[int]] = [[], []]

    def _body(self, x, out, residual):
        for k in range(2):
            self._parts(self._fns[k], 4)


def test_each_phase_runs_on_the_team_only_where_its_own_timing_pays(monkeypatch):
    """Injected durations (no wall clock): phase 0 alone 100, on the team 300; phase 1 alone 1000,
    on the team 500. After the first (measuring) calls, phase 0 runs on the calling thread and
    phase 1 on the team, in the same call."""
    now = [0]
    alone, teamed = (100, 1000), (300, 500)
    t = _TwoPhases()
    t._fns = [lambda i, k=k: now.__setitem__(0, now[0] + alone[k] // 4) for k in range(2)]

    def fake_run(self, fn, count, size):        # the team: the phase's team duration, no threads
        k = t._fns.index(fn)
        t.phase_ran[k].append(size)
        now[0] += teamed[k]
    monkeypatch.setattr(blas_team.Team, "run", fake_run)
    monkeypatch.setattr(parallel.Governor, "__init__",
                        lambda self, n, clock=None, timed_on_team=True, _init=parallel.Governor.__init__:
                        _init(self, n, lambda: now[0], timed_on_team))
    for _ in range(40):
        t._run(None, None, None)
    assert len(t.governors) == 2
    assert t.governors[0].best == [100, 300] and t.governors[1].best == [1000, 500]
    assert len(t.phase_ran[0]) <= 8            # tried on the team now and then (hold doubling), else alone
    assert len(t.phase_ran[1]) == 39           # every call after the first, on 2 threads
    assert set(t.phase_ran[1]) == {2}


def test_a_worker_that_does_not_run_leaves_every_part_to_the_caller():
    """Parts are taken from a shared counter: with the worker busy elsewhere (as when its core is
    another process's), the caller runs all of them and returns without waiting for it; once free,
    the worker takes its share again."""
    import threading

    t = blas_team.Team(2)
    gate, started = threading.Event(), threading.Event()
    t._queues[0].put((blas_team.conv_team.Claims(1), lambda i: (started.set(), gate.wait(10))))
    assert started.wait(10)
    ran = []
    t.run(lambda i: ran.append((i, threading.get_ident())), 8, 2)
    assert sorted(i for i, _ in ran) == list(range(8))
    assert {tid for _, tid in ran} == {threading.get_ident()}
    gate.set()
    ran.clear()
    worker = threading.Event()

    def part(i):                # the caller's first part waits until the worker has taken one
        if threading.get_ident() != main:
            worker.set()
        elif not worker.is_set():
            worker.wait(10)
        ran.append((i, threading.get_ident()))
    main = threading.get_ident()
    t.run(part, 8, 2)
    assert sorted(i for i, _ in ran) == list(range(8))
    assert len({tid for _, tid in ran}) == 2


def test_team_re_raises_a_workers_error():
    def fn(i):
        if i == 3:
            raise ValueError("part 3")
    with pytest.raises(ValueError, match="part 3"):
        blas_team.team(2).run(fn, 4, 2)
    blas_team.team(2).run(lambda i: None, 4, 2)     # the worker is still there


def _gemm_net(m=64, k=512, n=1024):
    net = Network()
    x, y = net.new_tensor((m, k)), net.new_tensor((m, n))
    w = np.random.default_rng(1).standard_normal((n, k)).astype(np.float32)
    net.layers.append(Layer("gemm", [x], [y], {"weight": w}))
    assert m * k * n >= parallel.PARALLEL_MIN_WORK
    return net


@pytest.mark.parametrize("team_faster", [True, False])
def test_the_pool_timed_fastest_is_chosen(monkeypatch, team_faster):
    """At 2 threads a large GEMM is timed on both pools; the engine keeps the pool (and the tactic)
    that timed fastest. Timings are stubbed (the real ones are the benchmarks' business), each
    candidate checked to be the real kernel on the real layer."""
    monkeypatch.setattr(parallel, "count", lambda: 2)
    fake = {"numpy_split": 1.0 if team_faster else 3.0, "numpy": 2.0, "mkl_packed": 2.5, "mkl_split": 2.2,
            "packed_sgemm_split": 2.7, "packed_sgemm16_split": 2.8}
    timed = []

    def rank(cands, layer, net, seed=0):
        timed.append([c.name for c in cands])
        return sorted(((c, fake[c.name]) for c in cands), key=lambda p: p[1])
    monkeypatch.setattr(choose, "rank", rank)
    net = _gemm_net()
    (step,) = choose.choose_tactics(net, {"timing_cache": False})
    # each pool timed twice, ABBA: the OpenMP pool's candidates (MKL's alone when MKL is threaded), the team's
    pool, team, team2, pool2 = timed
    assert (pool, team) == (pool2, team2)
    # on the team: its tactic and the one on the calling thread (never slower than 1 thread), no MKL
    assert team == ["numpy_split", "numpy"] and "numpy_split" not in pool
    best = {p: min(names, key=fake.get) for p, names in (("pool", pool), ("team", team))}
    assert step.tactic == (best["team"] if fake[best["team"]] < fake[best["pool"]] else best["pool"])
    assert (step.tactic == "numpy_split") == team_faster
    x = np.random.default_rng(2).standard_normal((64, 512)).astype(np.float32)
    out = np.empty((64, 1024), np.float32)
    step.fn(x, out)
    np.testing.assert_allclose(out, x @ net.layers[0].attrs["weight"].T, rtol=1e-4, atol=1e-3)


def test_a_load_spike_in_one_pass_does_not_choose_the_pool(monkeypatch):
    """The pools are timed in two ABBA passes and each candidate keeps its best: a pass in which the
    faster pool's block was disturbed (here the team's first, 4x its time) does not hand the engine
    to the slower pool, and the winner's tactic is the one fastest over both passes."""
    monkeypatch.setattr(parallel, "count", lambda: 2)
    split = {"packed_sgemm_split": 2.6, "packed_sgemm16_split": 2.6}    # (the packed SGEMM's, on the pool)
    passes = iter([{"numpy": 2.0, "mkl_packed": 2.5, "mkl_split": 2.5, **split},    # pool
                   {"numpy_split": 4.0, "numpy": 8.0},                              # team, disturbed
                   {"numpy_split": 1.0, "numpy": 2.2},                              # team
                   {"numpy": 2.1, "mkl_packed": 1.9, "mkl_split": 1.9, **split}])   # pool
    seen = []

    def rank(cands, layer, net, seed=0):
        times = next(passes)
        seen.append(sorted(c.name for c in cands))
        return sorted(((c, times[c.name]) for c in cands), key=lambda p: p[1])
    monkeypatch.setattr(choose, "rank", rank)
    assert choose.POOL_PASSES == (choose.POOL, choose.BLAS, choose.BLAS, choose.POOL)
    (step,) = choose.choose_tactics(_gemm_net(), {"timing_cache": False})
    assert len(seen) == 4 and step.tactic == "numpy_split"


def test_a_governed_candidate_reaches_its_team_before_it_is_timed(monkeypatch):
    """At 2 threads a governed kernel runs its first call on the calling thread alone (Governor): the
    builder calls each candidate once before best_times (whose own warm-up is then the team's first
    run), so no timed round pays the team's start; at 1 thread nothing extra runs."""
    from srcore_trt_like.tactics.records import Candidate, Kernel

    calls = []

    def build():
        gov = parallel.Governor(parallel.count())     # as a real tactic is built

        def fn(x, out):
            calls.append(gov.team())
            out[...] = x @ w.T
        return Kernel(fn)
    net = _gemm_net()
    w = net.layers[0].attrs["weight"]
    before_timing = []
    real = choose.best_times
    monkeypatch.setattr(choose, "best_times", lambda fns, **kw: (before_timing.append(list(calls)), real(fns, **kw))[1])
    for threads, expect in ((2, [1]), (1, [])):
        monkeypatch.setattr(parallel, "count", lambda threads=threads: threads)
        calls.clear()
        before_timing.clear()
        choose.rank([Candidate("governed", build)], net.layers[0], net)
        assert before_timing == [expect]          # the solo call, then best_times' calls on the team
        assert calls[len(expect):] == [threads] * (len(calls) - len(expect))


def test_one_thread_offers_no_team_and_a_stored_team_tactic_restores(monkeypatch):
    net = _gemm_net()
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert "numpy_split" not in [c.name for c in choose.candidates(net.layers[0], net)]
    monkeypatch.setattr(parallel, "count", lambda: 2)
    (step,) = choose.choose_tactics(net, {}, chosen=[("numpy_split", {})])
    assert step.tactic == "numpy_split"


CONVS = [ConvSpec((1, 24, 13, 11), 40, 3, 1, 1, relu=True, residual=True),    # winograd + im2col (planned)
         ConvSpec((2, 8, 70, 70), 36, 3, 2, 1, relu=True)]                   # im2col by row chunks


@pytest.mark.parametrize("spec", CONVS)
def test_team_conv_tactics_are_bit_identical_on_any_team(spec, monkeypatch):
    """The BLAS conv tactics on the team: the same bits on 1 or 2 threads, and torch's conv."""
    import torch

    monkeypatch.setattr(parallel, "count", lambda: 2)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_WORK", 0)
    monkeypatch.setattr(conv_gemm, "COLS_CAP_BYTES", 40000)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(spec.x_shape, np.float32)
    w = (rng.standard_normal(spec.weight_shape) / np.sqrt(np.prod(spec.weight_shape[1:]))).astype(np.float32)
    b = rng.standard_normal(spec.out_channels).astype(np.float32)
    res = rng.standard_normal(spec.out_shape, np.float32) if spec.residual else None
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                     spec.stride, spec.padding, spec.dilation).numpy()
    ref = np.maximum(ref + (res if res is not None else 0), 0)
    team = [(name, build) for name, build in conv_tactic_builders(spec, w, b) if name.endswith("_team")]
    assert {n for n, _ in team} >= {"im2col_gemm_team"}
    for name, build in team:
        t = build()
        outs = []
        for size in (1, 2, 1, 2):
            monkeypatch.setattr(parallel.Governor, "team", lambda self, size=size: size)  # every phase's team
            out = np.full(t.out_shape, np.nan, np.float32)
            t(x, out, res)
            outs.append(out)
        assert len(t.governors) >= 2, name        # a governor per phase (gather / transforms, products, ...)
        for out in outs[1:]:
            np.testing.assert_array_equal(out, outs[0], err_msg=name)
        np.testing.assert_allclose(outs[0], ref, rtol=1e-4, atol=2e-4 * np.abs(ref).max(), err_msg=name)


def test_every_candidate_of_a_team_engine_keeps_openblas_on_one_thread(monkeypatch):
    """On the team's engine every candidate of a contested layer (the team's, and those on the calling
    thread, the plain numpy conv among them) calls numpy's BLAS with OpenBLAS at one thread: a
    threaded OpenBLAS call leaves its worker spinning ~0.1 s on the core the team needs (resnet_small
    at 2 threads: 40 ms of CPU per 50 ms call on that worker, and the team's governors ran every team
    tactic on the caller). Seen from inside each np.matmul, with numpy's real OpenBLAS at 2 threads."""
    from threadpoolctl import ThreadpoolController, threadpool_limits

    ctl = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas" and "numpy" in str(c.filepath)]
    assert ctl and parallel._set_local(), "numpy's OpenBLAS with a settable count is a test dependency"
    spec = ConvSpec((1, 64, 28, 28), 64, 3, 1, 1, relu=True)
    assert spec.macs >= parallel.PARALLEL_MIN_WORK
    rng = np.random.default_rng(4)
    net = Network()
    tx, ty = net.new_tensor(spec.x_shape), net.new_tensor(spec.out_shape)
    w = (0.1 * rng.standard_normal(spec.weight_shape)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    net.layers.append(Layer("conv", [tx], [ty], dict(weight=w, bias=b, stride=(1, 1), padding=(1, 1),
                                                     dilation=(1, 1), groups=1, relu=True, residual=False)))
    seen: list[int] = []
    matmul = np.matmul

    def spy(*args, **kwargs):
        seen.append(ctl[0].num_threads)
        return matmul(*args, **kwargs)
    x = rng.standard_normal(spec.x_shape, np.float32)
    with threadpool_limits(2, user_api="blas"):
        assert parallel.count() == 2
        pools = choose._Pools(net, {})
        assert pools.contested
        cands = pools.candidates(net.layers[0], choose.BLAS)
        assert "numpy" in [c.name for c in cands]
        monkeypatch.setattr(np, "matmul", spy)
        for c in cands:
            seen.clear()
            out = np.empty(spec.out_shape, np.float32)
            c.build().fn(x, out)
            assert all(n == 1 for n in seen), (c.name, seen)
        assert ctl[0].num_threads == 2        # the user's count is back after the calls


def test_real_timing_at_two_threads_keeps_the_faster_pool(monkeypatch, caplog):
    """Timed for real at 2 threads: the team's candidate runs on its team while it is timed, and the
    engine's tactic is on the pool the log reports as faster."""
    import logging
    import re

    monkeypatch.setattr(parallel, "count", lambda: 2)
    before = parallel.COUNTS["team"]
    with caplog.at_level(logging.INFO, logger="srcore.trt_like"):
        (step,) = choose.choose_tactics(_gemm_net(), {"timing_cache": False})
    assert parallel.COUNTS["team"] > before
    (msg,) = [r.getMessage() for r in caplog.records if "large enough to split" in r.getMessage()]
    pool_ms, team_ms = map(float, re.findall(r"([\d.]+) ms", msg))
    # on the team's engine: its tactic or the one on the calling thread; the team's never on the pool's
    pool = ("numpy", "mkl_packed", "mkl_split", "packed_sgemm_split", "packed_sgemm16_split")
    assert step.tactic in (("numpy_split", "numpy") if team_ms < pool_ms else pool), \
        (msg, step.tactic)


def test_a_forked_child_makes_its_own_team():
    import os

    blas_team.team(2).run(lambda i: None, 2, 2)             # the parent's team exists
    pid = os.fork()
    if pid == 0:                                            # child: would hang on the parent's queues
        try:
            seen = []
            blas_team.team(2).run(seen.append, 4, 2)
            os._exit(0 if sorted(seen) == [0, 1, 2, 3] else 1)
        finally:
            os._exit(2)
    import signal
    import time

    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:   # a child stuck on dead workers: kill, fail
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the parent's team")
        time.sleep(0.01)
    assert os.WEXITSTATUS(done[1]) == 0


def test_numpys_blas_count_is_left_as_found_by_the_team_and_by_overlapping_callers():
    """numpy's OpenBLAS count can be the process's (``openblas_set_num_threads_local`` in its pthreads
    build): a team's parts on one OpenBLAS thread, and two threads whose one-thread regions overlap
    (entered A, B, left A, B: a plain save/restore per thread put B's saved 1 back), leave it as
    the user set it, and with it the intra-op count later tactics are built for."""
    import threading

    from threadpoolctl import threadpool_limits

    assert parallel._set_local(), "numpy's OpenBLAS must take a per-thread count (>= 0.3.27)"
    a = np.ones((64, 64), np.float32)
    with threadpool_limits(2, user_api="blas"):
        assert parallel.count() == 2
        blas_team.team(2).run(lambda i: a @ a, 4, 2)
        assert parallel._blas_threads() == 2
        a_in, b_in = threading.Event(), threading.Event()

        def first():
            a_in.set()
            assert b_in.wait(10)
        thread_a = threading.Thread(target=parallel.on_caller(first))
        thread_a.start()
        assert a_in.wait(10)

        def second():
            b_in.set()
            thread_a.join(10)       # A leaves its region while B is in its own
        parallel.on_caller(second)()
        assert parallel._blas_threads() == 2 and parallel.count() == 2

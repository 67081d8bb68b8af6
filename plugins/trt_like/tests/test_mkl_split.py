"""MKL's packed GEMM split by weight columns over numba's OpenMP team (kernels/mkl_split.py): results
against float64, the same bits on any team, concurrent calls, and when the builder offers it."""
from __future__ import annotations

import os

import numpy as np
import pytest

from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.kernels import blas_team
from srcore_trt_like.kernels import mkl as mkl_gemm
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.kernels.mkl_split import SplitPackedGemm
from srcore_trt_like.tactics import choose
from srcore_trt_like.tactics import mkl as mkl_tactics
from _shared import run_in_threads

lib = mkl_gemm.library()
pytestmark = [pytest.mark.one_pass,
              pytest.mark.skipif(lib is None, reason="the optional mkl package is not installed")]


@pytest.mark.parametrize("m,n,k", [(7, 200, 33), (64, 1000, 300), (1, 130, 1)])
def test_split_matches_float64_with_the_same_bits_alone_and_on_the_team(m, n, k):
    """Column blocks of 64s (the last one short), each MKL's packed product on one thread: the output's
    columns all land where they belong, and the bits do not depend on the team that ran them."""
    rng = np.random.default_rng(n)
    w = rng.standard_normal((n, k), dtype=np.float32)
    x = rng.standard_normal((m, k), dtype=np.float32)
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    outs = []
    for team in (1, 2):
        gemm = SplitPackedGemm(lib, w, m, 2)
        assert len(gemm.packed) == len(blas_team.parts(n)) > 1
        gemm.governor.hold = 10**9 if team == 1 else 0
        before = dict(parallel.COUNTS)
        out = np.full((m, n), np.nan, np.float32)
        gemm(x, out)
        assert parallel.COUNTS["team" if team > 1 else "solo"] == before["team" if team > 1 else "solo"] + 1
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[1], want, rtol=0, atol=4 * k * np.finfo(np.float32).eps * np.abs(want).max() + 1e-6)


def test_concurrent_calls_of_one_split_gemm_agree():
    """An engine may be called from several Python threads at once: the kernel keeps no per-call state."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((320, 96), dtype=np.float32)
    gemm = SplitPackedGemm(lib, w, 24, 2)
    xs = [rng.standard_normal((24, 96), dtype=np.float32) for _ in range(4)]
    want = [(x.astype(np.float64) @ w.T.astype(np.float64)) for x in xs]

    def work(t):
        out = np.empty((24, 320), np.float32)
        for i in range(40):
            j = (t + i) % len(xs)
            gemm(xs[j], out)
            np.testing.assert_allclose(out, want[j], rtol=1e-5, atol=1e-4)
    run_in_threads(work, 3)


def _gemm_layer(n, k=512, m=64):
    net = Network()
    x, y = net.new_tensor((m, k)), net.new_tensor((m, n))
    layer = Layer("gemm", [x], [y], {"weight": np.random.default_rng(2).standard_normal((n, k)).astype(np.float32)})
    net.layers.append(layer)
    return layer, net


def test_offered_above_one_thread_for_large_weights_of_several_blocks(monkeypatch):
    """At one thread only MKL's plain packed GEMM; at two the split too, for a product of at least
    PARALLEL_MIN_WORK multiply-adds whose weight has more than one 64-column block, and the plain one
    then stays on one MKL thread; neither stores a layout (a plan loaded packs its weights again)."""
    layer, net = _gemm_layer(1024)
    assert 64 * 512 * 1024 >= parallel.PARALLEL_MIN_WORK
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert [c.name for c in mkl_tactics.gemm_candidates(layer, net)] == ["mkl_packed"]
    monkeypatch.setattr(parallel, "count", lambda: 2)
    plain, split = mkl_tactics.gemm_candidates(layer, net)
    assert (plain.name, split.name, split.blas) == ("mkl_packed", "mkl_split", "mkl")
    assert plain.build().keep._threads == 1
    for n, m in ((64, 1024), (256, 16)):       # one block; several, but a small product (its tail)
        small, small_net = _gemm_layer(n, m=m)
        assert [c.name for c in mkl_tactics.gemm_candidates(small, small_net)] == ["mkl_packed"]
    x = np.random.default_rng(3).standard_normal((64, 512)).astype(np.float32)
    built = split.build()
    # nothing stored to restore: MKL's packed blocks are valid only where MKL wrote them
    assert built.layout == {} and split.restore is None and plain.restore is None
    a = np.empty((64, 1024), np.float32)
    built.fn(x, a)
    np.testing.assert_allclose(a, x @ layer.attrs["weight"].T, rtol=1e-4, atol=1e-3)


def test_an_engine_with_the_split_keeps_openblas_on_the_caller(monkeypatch):
    """A split GEMM threads on the OpenMP pool: the engine's OpenBLAS candidates run on the calling
    thread (OpenBLAS's own workers spin after a threaded call, on the core the team needs)."""
    layer, net = _gemm_layer(1024)
    monkeypatch.setattr(parallel, "count", lambda: 2)
    monkeypatch.setattr(choose, "_one_blas", lambda options: "mkl")
    pools = choose._Pools(net, {})
    assert pools.on_caller is parallel.on_caller


def test_openmp_workers_spin_briefly_unless_the_user_chose_a_policy():
    assert os.environ["GOMP_SPINCOUNT"] and os.environ["OMP_WAIT_POLICY"]     # set before libgomp loaded
    for given, want in (({}, {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": str(parallel.SPIN_COUNT)}),
                        ({"OMP_WAIT_POLICY": "ACTIVE"}, {"OMP_WAIT_POLICY": "ACTIVE"}),
                        ({"GOMP_SPINCOUNT": "7"}, {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "7"})):
        env = dict(given)
        parallel.wait_policy(env)
        assert env == want

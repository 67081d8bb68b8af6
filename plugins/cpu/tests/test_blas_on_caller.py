"""One team at more than one thread: the cpu plugin's unsplit products run numpy's BLAS on the calling
thread alone (``parallel.blas_on_caller``), never on OpenBLAS's own workers, whose spin after a
threaded call took the core the part pool's worker needs."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import threadpoolctl
import torch
import torch.nn.functional as F

from srcore.ir.types import TensorType
from srcore.plugin import ArgInfo, NodeInfo
from srcore.plugin import clock
from srcore_cpu.kernels import conv as C
from srcore_cpu.kernels import linalg as L
from srcore_cpu.kernels import parallel as P
from srcore_cpu.kernels import tactic

#: kernels called directly, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

TOL = dict(rtol=1e-4, atol=1e-4)


def _numpy_blas():
    ctl = P._blas_controller()
    if ctl is None:
        pytest.skip("numpy's BLAS not controllable here")
    return ctl


def _count(ctl) -> int:
    return P._count_fns(ctl)[0]()


def test_on_caller_policy_follows_the_intra_op_threads(monkeypatch):
    _numpy_blas()
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADED_BLAS", raising=False)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert not P.blas_on_caller()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        assert P.blas_on_caller()
        monkeypatch.setenv("SRCORE_CPU_THREADED_BLAS", "1")
        assert not P.blas_on_caller()


def test_on_caller_holds_one_blas_thread_while_it_runs_and_restores_the_count():
    ctl = _numpy_blas()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        seen = []
        held = P.on_caller(lambda x, out=None: (seen.append((_count(ctl), P.blas_threads())), x + 1)[1])
        assert held(1) == 2 and held(2, out=None) == 3
        assert seen == [(1, 2), (1, 2)]      # one thread inside, the user's count still reported
        assert _count(ctl) == 2
        with pytest.raises(ZeroDivisionError):
            P.on_caller(lambda: 1 / 0)()
        assert _count(ctl) == 2
        # nested in a part run (one shared hold), then the part run's own exit restores it
        P.PartPool(2).run(lambda i: seen.append((_count(ctl), held(i))), 2)
        assert _count(ctl) == 2 and all(c == 1 for c, _ in seen[2:])


def test_split_is_timed_against_the_product_on_one_blas_thread_interleaved(monkeypatch):
    """``split_vs_blas`` under the policy: the BLAS candidate runs held at one thread, the rounds
    alternate, and nothing waits for or notes OpenBLAS's worker (none was woken)."""
    ctl = _numpy_blas()
    log = []
    monkeypatch.setattr(P, "wait_blas_idle", lambda: log.append("wait"))
    monkeypatch.setattr(P, "note_threaded_blas", lambda: log.append("note"))
    monkeypatch.setattr(clock, "thread_delays", lambda: None)   # every round clean: no retries (tactic._retry_taken)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        t_split, t_blas = tactic.split_vs_blas(lambda: log.append(("split", _count(ctl))),
                                               lambda: log.append(("blas", _count(ctl))), rounds=3, budget_s=None)
    assert "wait" not in log and "note" not in log
    assert log[:2] == [("split", 2), ("blas", 1)]            # warm-ups, then alternating rounds
    assert log[2:] == [("split", 2), ("blas", 1)] * 3
    assert t_split >= 0 and t_blas >= 0


def test_unsplit_winograd_conv_runs_on_one_blas_thread_and_matches_torch(monkeypatch):
    """A Winograd 3x3 conv built at 2 intra-op threads and run unsplit: numpy's BLAS held at one
    thread during it (the winograd products see count 1), the result torch's."""
    ctl = _numpy_blas()
    monkeypatch.delenv("SRCORE_CPU_THREADED_BLAS", raising=False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 32, 28, 28), dtype=np.float32)
    w = rng.standard_normal((32, 32, 3, 3), dtype=np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    seen = []
    real = C._wg.conv3x3
    monkeypatch.setattr(C._wg, "conv3x3", lambda *a, **k: (seen.append(_count(ctl)), real(*a, **k))[1])
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        conv = C.make_conv(2, w, b, 1, 1, 1, 1)          # no static shape: no timing, the plain paths
        y = conv(x)
        assert _count(ctl) == 2
    assert seen and all(c == 1 for c in seen)
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=5e-4)


def _node(op, other, a_shape, b_shape, dtype="float32"):
    return NodeInfo(op, None, (ArgInfo("self", TensorType(dtype, a_shape), False, None),
                               ArgInfo(other, TensorType(dtype, b_shape), False, None)), ())


def test_unsplit_products_are_held_only_where_blas_could_thread(monkeypatch):
    """matmul's matcher at 2 threads where the split lost: numpy's product on one BLAS thread,
    torch's result; a product OpenBLAS runs on one thread by itself (under 2^18 multiply-adds) is not
    wrapped; at one thread nothing is."""
    ctl = _numpy_blas()
    monkeypatch.setenv("SRCORE_CPU_SPLIT_GEMM", "0")
    monkeypatch.delenv("SRCORE_CPU_THREADED_BLAS", raising=False)
    rng = np.random.default_rng(1)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        big = L.matmul_matcher(_node("aten::matmul", "other", (4, 128, 64), (4, 64, 128)))
        small = L.matmul_matcher(_node("aten::matmul", "other", (4, 16, 16), (4, 16, 16)))
        assert big is not L.matmul and big.__wrapped__ is L.matmul and small is L.matmul
        seen = []
        monkeypatch.setattr(np, "matmul", functools.partial(_counting_matmul, seen, ctl))
        a = rng.standard_normal((4, 128, 64), dtype=np.float32)
        bb = rng.standard_normal((4, 64, 128), dtype=np.float32)
        got = big(a, bb)
        assert seen == [1]
    monkeypatch.undo()
    np.testing.assert_allclose(got, torch.matmul(torch.from_numpy(a), torch.from_numpy(bb)).numpy(), **TOL)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert L.matmul_matcher(_node("aten::matmul", "other", (4, 128, 64), (4, 64, 128))) is L.matmul


_MATMUL = np.matmul


def _counting_matmul(seen, ctl, *a, **k):
    seen.append(_count(ctl))
    return _MATMUL(*a, **k)


def test_a_split_conv_path_holds_the_products_it_leaves_on_the_caller(monkeypatch):
    """A 1x1 conv of 2 output channels whose timed choice is the other paths split on the part pool
    (``other@2``, forced here): its product cannot split (fewer than 2 x 2 output channels) and runs
    whole on the caller, on one BLAS thread (unheld it ran numpy's threaded OpenBLAS, whose worker then
    spun beside the part pool: unet_small's head at 2 threads); torch's result."""
    ctl = _numpy_blas()
    monkeypatch.delenv("SRCORE_CPU_THREADED_BLAS", raising=False)
    monkeypatch.setattr(C, "_other_choice", lambda t, simd_best=None: "other@2" if "other@2" in t else None)
    monkeypatch.setattr(C, "SIMD_MARGIN", 0.0)   # (the SIMD conv never preferred: the split other path runs)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 16, 24, 24), dtype=np.float32)
    w = rng.standard_normal((2, 16, 1, 1), dtype=np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if P.intra_op_threads() < 2:
            pytest.skip("one intra-op thread here")
        conv = C.make_conv(2, w, b, 1, 0, 1, 1, input_shape=x.shape)
        conv(x)                                   # (the deferred timing's second pass, then the choice)
        assert getattr(conv, "tactic", None) == "other@2"
        seen = []
        monkeypatch.setattr(np, "matmul", functools.partial(_counting_matmul, seen, ctl))
        y = conv(x)
        monkeypatch.setattr(np, "matmul", _MATMUL)
        assert _count(ctl) == 2
    assert seen and all(c == 1 for c in seen), seen
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(y, ref, **TOL)

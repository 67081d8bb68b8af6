"""The plan's thread choice (``tactics/thread_plan.py``): which split steps run on the calling thread,
decided on whole-sequence timings. The choice logic runs on a fake timer (no test depends on real
timing); an engine at 2 intra-op threads with its split steps pinned gives the team's bits and torch's
result, and a serialized plan keeps the pins."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.tactics import thread_plan
from srcore_trt_like.tactics.thread_plan import SequenceTimes, decide, pick


def fake_timer(base: dict[int, float], team: dict[int, float], solo: dict[int, float], after_solo: float = 0.0):
    """Sequence times of a model: each step's time, a split step's on its team or pinned, and a split
    step on its team right after a pinned one paying ``after_solo`` (its worker gone to sleep)."""
    calls = []

    def timer(variants):
        calls.append(dict(variants))
        out = {}
        n = max([*base, *team]) + 1
        for name, pinned in variants.items():
            steps, prev_pinned = [], False
            for k in range(n):
                if k in team:
                    t = solo[k] if k in pinned else team[k] + (after_solo if prev_pinned else 0.0)
                    prev_pinned = k in pinned
                else:
                    t = base.get(k, 0.0)
                steps.append(t)
            out[name] = SequenceTimes(tuple(steps), sum(steps), 21)
        return out
    return timer, calls


def test_splits_that_lose_in_the_sequence_run_on_the_caller():
    timer, calls = fake_timer({0: 10, 2: 10, 4: 5}, team={1: 50, 3: 30, 5: 20}, solo={1: 40, 3: 45, 5: 35})
    pinned, times, enough = decide([1, 3, 5], timer)
    assert pinned == {1} and enough
    assert times == {"team": 125, "solo": 145, "mixed": 115}
    assert [set(v) for v in calls] == [{"team", "solo"}, {"team", "solo", "mixed"}]


def test_every_split_kept_when_each_wins_and_every_one_pinned_when_each_loses():
    timer, calls = fake_timer({0: 10}, team={1: 20, 2: 20}, solo={1: 40, 2: 40})
    assert decide([1, 2], timer)[0] == frozenset()
    assert len(calls) == 1      # the greedy mix is the team sequence: not timed again
    timer, _ = fake_timer({0: 10}, team={1: 50, 2: 50}, solo={1: 40, 2: 40})
    assert decide([1, 2], timer)[0] == {1, 2}


def test_a_mix_that_loses_as_a_whole_is_not_kept():
    # step 2 looks faster pinned, but then step 3's team run pays the wake-up: the mixed sequence loses
    timer, _ = fake_timer({0: 10}, team={2: 30, 3: 30}, solo={2: 29, 3: 60}, after_solo=20)
    pinned, times, _ = decide([2, 3], timer)
    assert times["mixed"] > times["team"] and pinned == frozenset()


def test_fewer_splits_win_within_the_margin():
    variants = {"team": (frozenset(), 100.0), "solo": (frozenset({1, 2}), 101.4), "mixed": (frozenset({1}), 99.5)}
    assert pick(variants, 2) == "solo"
    variants["solo"] = (frozenset({1, 2}), 102.0)
    assert pick(variants, 2) == "mixed"
    assert pick({"team": (frozenset(), 90.0), "solo": (frozenset({1}), 100.0)}, 1) == "team"


def test_not_cached_without_enough_clean_sequences():
    def timer(variants):
        return {name: SequenceTimes((0.0, 2.0 if pinned else 1.0), 2.0 if pinned else 1.0, 2)
                for name, pinned in variants.items()}
    pinned, _, enough = decide([1], timer)
    assert pinned == frozenset() and not enough


def _mobile_block():
    nn = torch.nn
    torch.manual_seed(3)
    m = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.Hardswish(), nn.Conv2d(16, 32, 1), nn.ReLU(),
                      nn.Conv2d(32, 32, 3, 1, 1, groups=32), nn.ReLU(), nn.Conv2d(32, 75, 1)).eval()
    return m, torch.randn(1, 3, 38, 30)


def test_an_engine_at_two_threads_with_its_splits_pinned(monkeypatch):
    """Split twins forced (``exclude_tactics``) at 2 intra-op threads; the thread choice, on a fake timer that
    finds every split losing, runs them on the caller: the team's bits, torch's result, the pins in
    ``describe()``, and a serialized plan restores them."""
    from threadpoolctl import threadpool_limits

    import srcore
    from srcore_trt_like.builder.plan import Plan
    from srcore_trt_like.options import CONV_TACTICS
    from srcore_trt_like.serialize import dump_plan
    from srcore_trt_like.store import restore_plan

    m, x = _mobile_block()
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    split = {"dense_tile_nchw16c_omp", "pointwise_sgemm_omp", "pointwise_nchw16c_omp", "depthwise_nchw16c_omp"}
    opts = {"nchwc": True, "nchwc_split": True, "timing": False,
            "exclude_tactics": [t for t in CONV_TACTICS if t not in split]}
    with threadpool_limits(2):
        if parallel.count() < 2:
            pytest.skip("one intra-op thread here")
        sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"), engine_options=opts))
        (report,) = sm.partition.engines
        engine = report.engine.engine
        ((shapes, plan),) = engine.plans.items()
        want = plan.run(x.numpy())
        steps = plan.steps

        def loses(variants):   # every split slower on its team than on the caller
            n = len(steps)
            return {name: SequenceTimes(tuple(1.0 if k in pinned else 2.0 for k in range(n)),
                                        float(n + n - len(pinned)), 21) for name, pinned in variants.items()}
        pinned, choice = thread_plan.choose_threads(plan.net, steps, {"timing": True, "timing_cache": False},
                                                    timer=loses)
        assert choice is not None and len(choice.split) == 4, [s.tactic for s in steps]
        assert set(choice.pinned) == set(choice.split)
        assert all(pinned[k].tactic.endswith("@1t") for k in choice.split)
        tactics = {s.tactic.removesuffix("@1t") for k, s in enumerate(pinned) if k in choice.split}
        assert tactics <= split and {"dense_tile_nchw16c_omp", "depthwise_nchw16c_omp"} <= tactics
        solo = Plan(plan.net, pinned)
        before = dict(parallel.COUNTS)
        got = [solo.run(x.numpy()).copy() for _ in range(3)]
        assert parallel.COUNTS["pinned"] > before["pinned"] and parallel.COUNTS["team"] == before["team"]
        assert all(np.array_equal(g, want) for g in got)
        # a serialized plan names its pinned steps and restores them pinned
        meta, arrays = dump_plan(solo, shapes, opts)
        back = restore_plan(meta, arrays, opts, "test", "test plan")
        assert [s.tactic for s in back.steps] == [s.tactic for s in pinned]
        before = dict(parallel.COUNTS)
        assert np.array_equal(back.run(x.numpy()), want)
        assert parallel.COUNTS["team"] == before["team"]
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_option_off_and_one_thread_leave_the_plan_alone(monkeypatch):
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert thread_plan.choose_threads(None, ["s"], {"thread_plan": False}) == (["s"], None)
    assert thread_plan.choose_threads(None, ["s"], {"timing": False}) == (["s"], None)
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert thread_plan.choose_threads(None, ["s"], {}) == (["s"], None)

"""The builder's timing (:func:`best_times`): a one-thread layer's candidates are charged their
thread's own time (not the time another process held the core, but any time they sleep), with
enough calls a round; a threaded layer's rounds while a core was taken are re-run, and a choice
still timed so is not trusted (not kept in the timing cache)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from srcore.plugin import clock
from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.errors import TacticSpecError
from srcore_trt_like.kernels import threads
from srcore_trt_like.tactics import choose, timing, timing_cache
from srcore_trt_like.tactics.records import Candidate, Kernel
from srcore_trt_like.tactics.timing import best_times, clock_for

pytestmark = pytest.mark.one_pass


def _burn(us: float) -> None:
    """Use ``us`` microseconds of this thread's CPU time (however long that takes)."""
    end = time.thread_time_ns() + int(us * 1e3)
    while time.thread_time_ns() < end:
        pass


class _Counted:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self):
        self.calls += 1
        self.fn()


class _FakeThread:
    """Clocks of a thread whose calls say how long they ran, waited for a core and slept (ns)."""

    def __init__(self, monkeypatch, schedstat=True):
        self.wall = self.cpu = self.delay = 0
        monkeypatch.setattr(clock, "WALL_CLOCK", lambda: self.wall)
        monkeypatch.setattr(clock, "CPU_CLOCK", lambda: self.cpu)
        monkeypatch.setattr(clock, "run_delay", (lambda: self.delay) if schedstat else (lambda: None))

    def call(self, run, wait_for_core=0, sleep=0):
        def call():
            self.cpu += run
            self.delay += wait_for_core
            self.wall += run + wait_for_core + sleep
        return call


def test_one_thread_layers_are_timed_on_the_thread_more_threads_in_wall_time():
    assert clock_for(1) == "cpu" and clock_for(2) == "wall"
    with pytest.raises(TacticSpecError, match="clock"):
        best_times([lambda: None], clock="process")


@pytest.mark.parametrize("schedstat", [True, False])
def test_time_the_core_was_held_elsewhere_is_not_charged(monkeypatch, schedstat):
    th = _FakeThread(monkeypatch, schedstat)
    # the faster candidate waits 0.7 ms for its core on every call
    fast, slow = th.call(300_000, wait_for_core=700_000), th.call(500_000)
    assert best_times([fast, slow], clock="cpu", bandwidth=None) == pytest.approx([300e-6, 500e-6])
    assert best_times([fast, slow], clock="wall", bandwidth=None) == pytest.approx([1000e-6, 500e-6])


@pytest.mark.parametrize("schedstat", [True, False])
def test_a_candidate_that_sleeps_is_charged_its_sleep(monkeypatch, schedstat):
    th = _FakeThread(monkeypatch, schedstat)
    sleeper, busy = th.call(20_000, sleep=980_000), th.call(300_000)
    assert best_times([sleeper, busy], clock="cpu", bandwidth=None) == pytest.approx([1000e-6, 300e-6])


@pytest.mark.real_clock     # what the real thread clock charges: scaled readings would not say
def test_a_real_sleep_does_not_win_on_the_cpu_clock():
    sleeper, busy = best_times([lambda: time.sleep(1e-3), lambda: _burn(300)], clock="cpu", bandwidth=None)
    # the sleep's reading is its wall time less the clock's own cost: a hair under 1 ms on a loaded machine
    assert sleeper >= 0.9e-3 > busy >= 300e-6


# a 1 µs call's timed warm-up can be stretched by an interrupt on a loaded machine: at least 16 calls
@pytest.mark.real_clock     # how many real calls fill a round: scaled readings would not say
@pytest.mark.parametrize("us, calls_per_round", [(3000, (1, 1)), (100, (8, 10)), (1, (16, timing.MAX_CALLS))])
def test_short_calls_run_several_times_a_round(us, calls_per_round):
    call = _Counted(lambda: _burn(us))
    (t,) = best_times([call], rounds=3, clock="cpu", bandwidth=None)
    assert t >= us * 1e-6
    warm = 1 if calls_per_round == (1, 1) else 2          # a short call runs once more, timed
    lo, hi = calls_per_round
    assert lo <= (call.calls - warm) / 3 <= hi and (call.calls - warm) % 3 == 0


def test_close_candidates_race_on_and_a_noisy_phase_does_not_pick_the_slow_one(monkeypatch):
    th = _FakeThread(monkeypatch)
    # the direct kernel (0.8 ms) ran its first three rounds in a phase twice as slow; the slow
    # candidate (2.3 ms) did not; a far one (5 ms) is not re-run
    direct, blas, far = _Counted(lambda: None), _Counted(th.call(2_300_000)), _Counted(th.call(5_000_000))
    fast, slowed = th.call(800_000), th.call(2_400_000)
    direct.fn = lambda: (slowed if direct.calls <= 1 + timing.ROUNDS else fast)()
    times = best_times([direct, blas, far], clock="cpu", bandwidth=None)
    assert times == pytest.approx([800e-6, 2300e-6, 5000e-6])
    assert direct.calls == blas.calls == 1 + timing.ROUNDS + timing.RACE_ROUNDS
    assert far.calls == 1 + timing.ROUNDS


def test_a_failing_candidate_is_last_or_raises():
    def bad():
        raise ValueError("no")

    assert best_times([bad, lambda: _burn(10)], skip_failures=True, clock="cpu")[0] == float("inf")
    with pytest.raises(ValueError, match="no"):
        best_times([bad], clock="cpu")


class _FakeTeam:
    """The wall clock and the per-thread ``run_delay`` of a process whose threaded calls say how
    long they ran and how long their second thread waited for its core (ns); no real pauses."""

    def __init__(self, monkeypatch, schedstat=True):
        self.wall = 0
        self.delay = {"caller": 0, "worker": 0}
        self.pauses = []
        monkeypatch.setattr(clock, "WALL_CLOCK", lambda: self.wall)
        monkeypatch.setattr(clock, "thread_delays", (lambda: dict(self.delay)) if schedstat else (lambda: None))
        monkeypatch.setattr(timing.time, "sleep", self.pauses.append)

    def call(self, run, worker_waits=()):
        """A call of ``run`` ns; its i-th call's worker first waits ``worker_waits[i]`` ns (then 0)."""
        waits = iter(worker_waits)

        def call():
            wait = next(waits, 0)
            self.delay["worker"] += wait
            self.wall += run + wait
        return call


def test_a_round_while_the_second_core_was_taken_is_re_run(monkeypatch):
    """The split candidate's worker waits for its core through every regular round (warm-ups, 3
    rounds); one pause later the core is free: the split is charged its clean round and wins, and
    the re-timing is reported, trusted."""
    team = _FakeTeam(monkeypatch)
    split = team.call(300_000, worker_waits=[900_000] * 5)
    one = team.call(500_000)
    with timing.watch() as found:
        times = best_times([split, one], clock="wall", bandwidth=None, min_round=0)
    assert times == pytest.approx([300e-6, 500e-6])
    assert found == [timing.Taken(candidates=2, retried=1, untrusted=0)] and timing.trusted(found)
    assert team.pauses == [timing.RETRY_PAUSES_S[0]]


def test_a_core_taken_through_every_retry_leaves_the_choice_untrusted(monkeypatch):
    """The split's worker never gets its core: the one-thread candidate wins on the wall clock as
    before, after every retry, and the choice is not trusted; a waiting *winner* alone would not matter."""
    team = _FakeTeam(monkeypatch)
    split, one = team.call(300_000, worker_waits=[900_000] * 99), team.call(500_000)
    with timing.watch() as found:
        times = best_times([split, one], clock="wall", bandwidth=None, min_round=0)
    assert times == pytest.approx([1200e-6, 500e-6])
    assert found == [timing.Taken(2, len(timing.RETRY_PAUSES_S), 1)] and not timing.trusted(found)
    assert team.pauses == list(timing.RETRY_PAUSES_S)
    # the fastest waited every round: its time is an upper bound that still beats the other
    team = _FakeTeam(monkeypatch)
    fast, slow = team.call(100_000, worker_waits=[50_000] * 99), team.call(500_000)
    with timing.watch() as found:
        assert best_times([fast, slow], clock="wall", bandwidth=None, min_round=0) == pytest.approx([150e-6, 500e-6])
    assert timing.trusted(found) and found[0].retried == len(timing.RETRY_PAUSES_S)


@pytest.mark.parametrize("schedstat", [True, False])
def test_clean_rounds_or_no_schedstat_time_as_before(monkeypatch, schedstat):
    """A wait under TAKEN of a round is noise, and where the kernel reports no run delay nothing can
    be judged: no retry, nothing reported (the wall time stands)."""
    team = _FakeTeam(monkeypatch, schedstat)
    small = int(300_000 * timing.TAKEN / 2)
    split, one = team.call(300_000, worker_waits=[small if schedstat else 900_000] * 99), team.call(500_000)
    with timing.watch() as found:
        best_times([split, one], clock="wall", bandwidth=None, min_round=0)
    assert found == [] and team.pauses == []


def test_one_thread_rounds_are_never_retried(monkeypatch):
    """On the calling thread's own clock another thread's wait is not in the time: nothing to judge."""
    team = _FakeTeam(monkeypatch)
    monkeypatch.setattr(clock, "CPU_CLOCK", lambda: team.wall)
    monkeypatch.setattr(clock, "run_delay", lambda: 0)
    with timing.watch() as found:
        best_times([team.call(300_000, worker_waits=[900_000] * 99)], clock="cpu", bandwidth=None, min_round=0)
    assert found == [] and team.pauses == []


def test_a_held_off_governor_runs_on_its_team_while_timed():
    """A governed kernel held on the calling thread after a wait runs on its team while the builder
    times it (what is timed is the split), and is held again after the timing."""
    gov = threads.Governor(2)
    gov.hold = 4
    with threads.timing_on_team():
        assert [gov.team() for _ in range(3)] == [2, 2, 2]
    assert gov.hold == 4 and gov.team() == 1


def test_an_untrusted_choice_is_taken_but_not_cached(monkeypatch, tmp_path, caplog):
    """choose_tactics takes the winner of a layer timed while a core was taken (after re-timing)
    but keeps it out of the timing cache and says so; a trusted one is cached."""
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(timing_cache, "_tags", {})
    monkeypatch.setattr(timing_cache, "_caches", {})
    net = Network()
    tx, ty = net.new_tensor((4, 8)), net.new_tensor((4, 8))
    net.inputs, net.outputs = [tx], [ty]
    net.layers.append(Layer("relu", [tx], [ty], {}))
    worker_waits = {}

    def rank(cands, layer, net_, seed=0):
        team = _FakeTeam(monkeypatch)
        calls = [team.call(300_000, worker_waits[c.name]) if c.name == "split" else team.call(500_000)
                 for c in cands]
        times = best_times(calls, clock="wall", bandwidth=None, min_round=0)
        return sorted(zip(cands, times), key=lambda p: p[1])

    def relu(x, out):
        np.maximum(x, 0, out=out)
    cands = [Candidate("one", lambda: Kernel(relu)), Candidate("split", lambda: Kernel(relu))]
    monkeypatch.setattr(choose, "candidates", lambda layer, net_: cands)
    monkeypatch.setattr(choose, "rank", rank)
    for waits, winner, cached in (([900_000] * 99, "one", None), ([900_000] * 5, "split", "split")):
        worker_waits["split"] = waits
        monkeypatch.setattr(timing_cache, "_caches", {})
        caplog.clear()
        with caplog.at_level("INFO", logger="srcore.trt_like"):
            (step,) = choose.choose_tactics(net, {}, name="t")
        assert step.tactic == winner
        names = ["one", "split", f"memory_tolerance={choose.MEMORY_TOLERANCE}"]
        key = timing_cache.layer_key(net.layers[0], net, names)
        assert timing_cache.get().lookup(key) == cached
        untrusted = 1 if cached is None else 0
        assert "1 layer(s) timed while a core was taken" in caplog.text
        assert f"{untrusted} choice(s) still timed so are not kept in the timing cache" in caplog.text


def test_the_wait_is_summed_over_the_threads_alive_before_and_after(monkeypatch):
    """``wall_ns_waited``: each thread's run delay over the calls, a thread that started meanwhile
    left out (its delay so far is not this round's); None without schedstat."""
    reads = iter([{"1": 50, "2": 0, "3": 7}, {"1": 150, "2": 300, "4": 999}])
    wall = iter([0, 1000])
    monkeypatch.setattr(clock, "thread_delays", lambda: next(reads))
    monkeypatch.setattr(clock, "WALL_CLOCK", lambda: next(wall))
    assert clock.wall_ns_waited(lambda: None, 2) == (500.0, pytest.approx(0.4))
    monkeypatch.setattr(clock, "thread_delays", lambda: None)
    wall = iter([0, 1000])
    assert clock.wall_ns_waited(lambda: None, 1) == (1000.0, None)


def test_this_process_threads_are_read():
    import os
    import threading

    if not os.path.exists("/proc/self/task"):
        pytest.skip("no /proc")
    seen = clock.thread_delays()
    if seen is None:
        pytest.skip("the kernel reports no schedstat")
    assert str(threading.get_native_id()) in seen and all(d >= 0 for d in seen.values())


def test_a_phase_governor_keeps_its_choice_while_timed():
    """A phase of a multi-phase team tactic (``blas_team.TeamParts``) chooses team or caller by its
    own timing, in the builder's timing too."""
    gov = threads.Governor(2, timed_on_team=False)
    gov.hold = 2
    with threads.timing_on_team():
        assert [gov.team() for _ in range(3)] == [1, 1, 2]


def test_a_round_run_held_on_the_caller_is_re_run_on_the_team(monkeypatch):
    """A governed split held on the calling thread after a wait runs there through the regular
    rounds (its time: the one-thread run's, and no thread waits): those rounds are not clean, and
    the re-run, on the team, gives the split's own time; the split wins, trusted."""
    team = _FakeTeam(monkeypatch)
    gov = threads.Governor(2)
    gov.hold, gov.backoff = 10**6, threads.MAX_HOLD

    def region():
        team.wall += 300_000 if threads._tls.n == 2 else 500_000
    monkeypatch.setattr(threads, "use", lambda n: setattr(threads._tls, "n", n))
    split, one = (lambda: gov.run(region)), team.call(400_000)
    with timing.watch() as found:
        times = best_times([split, one], clock="wall", bandwidth=None, min_round=0)
    assert times == pytest.approx([300e-6, 400e-6])
    assert found == [timing.Taken(2, 1, 0)] and gov.hold > 0      # held again once the timing is over


def test_a_small_layer_whose_rank_loaded_code_is_ranked_again(monkeypatch):
    """A rank that took more CPU than :data:`choose.RERANK_CPU_S` (its candidates' code loaded or
    compiled in it) of a small layer is timed again: a candidate slow only while the process
    loaded code (its first calls) wins the second timing; a steady one won the first."""
    monkeypatch.setattr(choose, "RERANK_CPU_S", 0.04)
    monkeypatch.setattr(threads, "count", lambda: 1)   # (a one-thread layer: its own CPU time)
    net = Network()
    tx, ty = net.new_tensor((4, 8)), net.new_tensor((4, 8))
    net.inputs, net.outputs = [tx], [ty]
    layer = Layer("relu", [tx], [ty], {})
    net.layers.append(layer)
    calls = {"n": 0}

    def loads(x, out):   # the first call loads (60 ms), the next few run beside it (slow)
        calls["n"] += 1
        _burn(60_000 if calls["n"] == 1 else 40 if calls["n"] <= 8 else 4)

    def steady(x, out):
        _burn(15)
    cands = [Candidate("loads", lambda: Kernel(loads)), Candidate("steady", lambda: Kernel(steady))]
    ranked = choose.rank(cands, layer, net)
    assert [c.name for c, _ in ranked] == ["loads", "steady"], ranked
    monkeypatch.setattr(choose, "RERANK_CPU_S", 1e9)   # (never again: the first timing stands)
    calls["n"] = 0
    again = choose.rank(cands, layer, net)
    assert [c.name for c, _ in again] == ["steady", "loads"], (again, calls)


def test_untrusted_builds_decide_on_their_pooled_evidence(monkeypatch, tmp_path, caplog):
    """A layer timed while a core was taken in build after build: each build picks by every
    candidate's least time over the builds so far (not its own timing alone), and after
    EVIDENCE_BUILDS builds that choice is kept as the winner (timing is faked)."""
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(timing_cache, "_tags", {})
    monkeypatch.setattr(timing_cache, "_caches", {})
    monkeypatch.setattr(timing_cache, "EVIDENCE_BUILDS", 3)
    monkeypatch.setattr(timing, "trusted", lambda found: False)
    net = Network()
    tx, ty = net.new_tensor((4, 8)), net.new_tensor((4, 8))
    net.inputs, net.outputs = [tx], [ty]
    net.layers.append(Layer("relu", [tx], [ty], {}))

    def relu(x, out):
        np.maximum(x, 0, out=out)
    cands = [Candidate("one", lambda: Kernel(relu)), Candidate("split", lambda: Kernel(relu))]
    monkeypatch.setattr(choose, "candidates", lambda layer, net_: cands)
    builds = iter([{"one": 1.0, "split": 2.0}, {"one": 1.5, "split": 0.8}, {"one": 0.9, "split": 1.2}])
    timed = []

    def rank(cands_, layer, net_, seed=0):
        times = next(builds)
        timed.append(times)
        return sorted(((c, times[c.name]) for c in cands_), key=lambda p: p[1])
    monkeypatch.setattr(choose, "rank", rank)
    key = timing_cache.layer_key(net.layers[0], net, ["one", "split", f"memory_tolerance={choose.MEMORY_TOLERANCE}"])
    # build 3 alone would pick "one" (0.9 < 1.2); pooled, split's 0.8 of build 2 stands
    for winner, kept in (("one", None), ("split", None), ("split", "split")):
        monkeypatch.setattr(timing_cache, "_caches", {})     # a new process: the evidence comes from the file
        (step,) = choose.choose_tactics(net, {}, name="t")
        assert (step.tactic, timing_cache.get().lookup(key)) == (winner, kept)
    monkeypatch.setattr(timing_cache, "_caches", {})
    (step,) = choose.choose_tactics(net, {}, name="t")        # the kept winner: not timed again
    assert step.tactic == "split" and len(timed) == 3

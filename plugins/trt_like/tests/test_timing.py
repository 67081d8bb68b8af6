"""The builder's timing (:func:`best_times`): a one-thread layer's candidates are charged their
thread's own time (not the time another process held the core, but any time they sleep), with
enough calls a round."""
from __future__ import annotations

import time

import pytest

from srcore.plugin import clock
from srcore_trt_like.errors import TacticSpecError
from srcore_trt_like.tactics import timing
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


def test_a_real_sleep_does_not_win_on_the_cpu_clock():
    sleeper, busy = best_times([lambda: time.sleep(1e-3), lambda: _burn(300)], clock="cpu", bandwidth=None)
    assert sleeper >= 1e-3 > busy >= 300e-6


@pytest.mark.parametrize("us, calls_per_round", [(3000, (1, 1)), (100, (8, 10)), (1, (timing.MAX_CALLS,) * 2)])
def test_short_calls_run_several_times_a_round(us, calls_per_round):
    call = _Counted(lambda: _burn(us))
    (t,) = best_times([call], rounds=3, clock="cpu", bandwidth=None)
    assert t >= us * 1e-6
    warm = 1 if calls_per_round == (1, 1) else 2          # a short call runs once more, timed
    lo, hi = calls_per_round
    assert lo <= (call.calls - warm) / 3 <= hi and (call.calls - warm) % 3 == 0


def test_a_failing_candidate_is_last_or_raises():
    def bad():
        raise ValueError("no")

    assert best_times([bad, lambda: _burn(10)], skip_failures=True, clock="cpu")[0] == float("inf")
    with pytest.raises(ValueError, match="no"):
        best_times([bad], clock="cpu")

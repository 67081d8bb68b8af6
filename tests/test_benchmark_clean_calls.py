"""``benchmarks.clean_calls``: which calls count as clean, the rounds, the medians; on stand-in clocks."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from srcore import clock

pytestmark = pytest.mark.one_pass   # a benchmark harness: independent of the executor and planner

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package of the checkout, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks.clean_calls import CleanTally, NoSchedstat, clean_medians  # noqa: E402


def test_a_call_is_clean_below_the_wait_fraction():
    t = CleanTally(max_wait=0.02)
    assert t.add("a", 1000, 19) and not t.add("a", 1000, 20) and t.add("a", 3000, 0)
    assert not t.add("a", 500, 400)
    assert t.count("a") == 2 and t.seen["a"] == 4 and t.summary("a") == "2/4 clean, all 1"
    assert t.all_median_us("a") == pytest.approx(1.0)     # of 500, 1000, 1000, 3000 ns, clean or not
    assert t.median_us("a") == pytest.approx(2.0)        # (1000 + 3000) / 2 ns
    assert t.median_us("b") != t.median_us("b")          # nan: no clean call
    with pytest.raises(NoSchedstat):
        t.add("a", 1000, None)


def test_call_waited_reads_the_threads_around_the_call_only(monkeypatch):
    """One call's wall time from the clock reads around it; the wait summed over the threads alive
    at both delay reads (a new thread has no baseline); None without schedstat."""
    events = []
    reads = iter([{"1": 10, "2": 5}, {"1": 40, "2": 5, "9": 77}])
    wall = iter([100, 1100])

    def delays():
        events.append("delays")
        return next(reads)

    def wall_clock():
        events.append("wall")
        return next(wall)

    monkeypatch.setattr(clock, "thread_delays", delays)
    monkeypatch.setattr(clock, "WALL_CLOCK", wall_clock)
    assert clock.call_waited(lambda: events.append("call")) == (1000, 30)
    assert events == ["delays", "wall", "call", "wall", "delays"]
    monkeypatch.setattr(clock, "thread_delays", lambda: None)
    wall = iter([0, 7])
    assert clock.call_waited(lambda: None) == (7, None)


def test_rounds_rotate_and_run_on_until_each_key_has_its_clean_calls():
    """Stand-in timer: "fast" is clean every call; "slow" only every third. The rounds rotate the
    order and continue past ``rounds`` until "slow" has ``min_clean`` clean calls."""
    order, n_slow = [], [0]

    def timed(fn):
        key = fn()
        order.append(key)
        if key == "slow":
            n_slow[0] += 1
            return 2000, 0 if n_slow[0] % 3 == 0 else 500
        return 1000, 10

    calls = {"fast": lambda: "fast", "slow": lambda: "slow"}
    tally = clean_medians(calls, rounds=2, min_clean=4, timed=timed, calls_per_round=2)
    # rounds of 2 calls each: slow's 3rd, 6th, 9th, 12th calls are clean -> 6 rounds
    assert order[:8] == ["fast", "fast", "slow", "slow", "slow", "slow", "fast", "fast"]
    assert tally.seen == {"fast": 12, "slow": 12} and tally.count("slow") == 4
    assert tally.median_us("fast") == pytest.approx(1.0) and tally.median_us("slow") == pytest.approx(2.0)


def test_rounds_stop_at_the_cap_without_enough_clean_calls():
    tally = clean_medians({"a": lambda: None}, rounds=2, min_clean=5, max_rounds=3,
                          timed=lambda fn: (1000, 1000), calls_per_round=4)
    assert tally.seen == {"a": 12} and tally.count("a") == 0


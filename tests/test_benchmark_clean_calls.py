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


def test_a_call_is_kept_when_clean_and_warm():
    t = CleanTally(max_wait=0.02)
    assert t.add("a", 1000, 19) and not t.add("a", 1000, 20) and t.add("a", 3000, 0)
    assert not t.add("a", 500, 400)
    assert t.add("a", 9000, 0, warm=False)               # clean, but after a switch: not kept
    assert t.count("a") == 2 and t.seen["a"] == 5 and t.summary("a") == "2/5 kept, all 1"
    assert t.median_us("a") == pytest.approx(2.0)        # (1000 + 3000) / 2 ns
    assert t.all_median_us("a") == pytest.approx(1.0)    # of 500, 1000, 1000, 3000, 9000 ns
    assert t.median_us("b") != t.median_us("b")          # nan: no kept call
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


class Machine:
    """Stand-in clocks: each call of a key advances the wall clock by its duration and thread "1"'s
    run delay by the wait scripted for that call; ``gap_wait`` is added between calls (at the read
    that opens the next call)."""

    def __init__(self, durations, waits, gap_waits=()):
        self.now, self.delay = 0, 0
        self.durations, self.waits = durations, {k: list(v) for k, v in waits.items()}
        self.gap_waits = list(gap_waits)
        self.order, self.opening = [], True

    def delays(self):
        if self.opening and self.gap_waits:
            self.delay += self.gap_waits.pop(0)
        self.opening = not self.opening
        return {"1": self.delay}

    def wall(self):
        return self.now

    def call(self, key):
        def run():
            self.order.append(key)
            self.now += self.durations[key]
            w = self.waits[key]
            self.delay += w.pop(0) if w else 0
        return run


def test_rounds_rotate_keep_warm_clean_calls_and_run_on_until_enough():
    """"fast" is clean every call, "slow" waits on every third: a call after a waited one is clean
    but not kept, and a round's first call is never kept. The rounds rotate the order and run past
    ``rounds`` until "slow" has ``min_clean`` kept calls."""
    m = Machine({"fast": 1000, "slow": 2000}, {"fast": [], "slow": [0, 0, 500] * 20})
    calls = {"fast": m.call("fast"), "slow": m.call("slow")}
    tally = clean_medians(calls, rounds=2, min_clean=4, delays=m.delays, wall_clock=m.wall, calls_per_round=3)
    assert m.order[:9] == ["fast"] * 3 + ["slow"] * 6 and m.order[9:12] == ["fast"] * 3
    # each round of 3: slow's 1st call is the round's first, its 2nd kept, its 3rd waited -> 1 a round
    assert tally.seen == {"fast": 12, "slow": 12} and tally.count("slow") == 4 and tally.count("fast") == 8
    assert tally.median_us("fast") == pytest.approx(1.0) and tally.median_us("slow") == pytest.approx(2.0)


def test_a_wait_between_two_calls_makes_the_second_cold():
    m = Machine({"a": 1000}, {"a": []}, gap_waits=[0, 0, 0, 300, 0])
    tally = clean_medians({"a": m.call("a")}, rounds=1, min_clean=0, delays=m.delays, wall_clock=m.wall,
                          calls_per_round=5)
    # call 1: first of the round; call 4: 300 ns waited before it (30 %: not warm)
    assert tally.seen == {"a": 5} and tally.count("a") == 3


def test_rounds_stop_at_the_cap_without_enough_kept_calls():
    m = Machine({"a": 1000}, {"a": [1000] * 99})
    tally = clean_medians({"a": m.call("a")}, rounds=2, min_clean=5, max_rounds=3, delays=m.delays,
                          wall_clock=m.wall, calls_per_round=4)
    assert tally.seen == {"a": 12} and tally.count("a") == 0


def test_a_sequence_counts_only_if_no_thread_waited_through_it(monkeypatch):
    """``sequence_profile.in_sequence``: each runner's steps run in order per sequence, the runners
    alternating; a sequence whose threads waited (thread "1"'s delay grew between the reads around
    it) is counted but its layer times are not kept."""
    from benchmarks.sequence_profile import in_sequence

    ran, delay = [], [0]
    reads = iter([0, 0, 0, 10**9, 0, 0, 0, 0])      # delay added at each read: runner b's 1st sequence waited

    def delays():
        delay[0] += next(reads)
        return {"1": delay[0]}

    monkeypatch.setattr(clock, "thread_delays", delays)
    steps = {r: [(None, lambda r=r, i=i: ran.append(f"{r}{i}"), ()) for i in range(2)] for r in "ab"}
    kept, counts = in_sequence(steps, sequences=2)
    assert ran == ["a0", "a1", "b0", "b1"] * 2
    assert counts == {"a": [2, 2], "b": [1, 2]}
    assert [len(ts) for ts in kept["a"]] == [2, 2] and [len(ts) for ts in kept["b"]] == [1, 1]

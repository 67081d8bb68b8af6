"""The cpu plugin's load-time choices (:mod:`srcore_cpu.kernels.tactic`) are timed on the core's clock
(``srcore.plugin.clock``): at one intra-op thread a candidate is charged its thread's own time (its
CPU time and any time it sleeps or blocks, not the time another process held the core), at more
threads wall time."""
from __future__ import annotations

import time

import pytest

from srcore.plugin import KernelError, clock
from srcore_cpu.kernels import tactic

pytestmark = pytest.mark.one_pass


def _burn(us: float) -> None:
    """Use ``us`` microseconds of this thread's CPU time (however long that takes)."""
    end = time.thread_time_ns() + int(us * 1e3)
    while time.thread_time_ns() < end:
        pass


class _FakeThread:
    """Clocks of a thread whose calls say how long they ran, waited for a core and slept (ns)."""

    def __init__(self, monkeypatch, schedstat=True):
        self.wall = self.cpu = self.delay = 0
        monkeypatch.setattr(clock, "WALL_CLOCK", lambda: self.wall)
        monkeypatch.setattr(clock, "CPU_CLOCK", lambda: self.cpu)
        monkeypatch.setattr(clock, "run_delay", (lambda: self.delay) if schedstat else (lambda: None))
        # the process's threads' waits (wall-time rounds' cleanliness): this thread's
        monkeypatch.setattr(clock, "thread_delays", (lambda: {"0": self.delay}) if schedstat else (lambda: None))

    def call(self, run, wait_for_core=0, sleep=0):
        def call():
            self.cpu += run
            self.delay += wait_for_core
            self.wall += run + wait_for_core + sleep
        return call


def test_one_thread_choices_on_the_thread_clock_more_threads_on_the_wall(monkeypatch):
    monkeypatch.setenv("SRCORE_CPU_THREADS", "1")
    assert tactic.default_clock() == "cpu"
    monkeypatch.setenv("SRCORE_CPU_THREADS", "2")
    assert tactic.default_clock() == "wall"
    with pytest.raises(KernelError, match="clock"):
        tactic.timings({"a": lambda: None}, (), clock="process")


@pytest.mark.parametrize("schedstat", [True, False])
def test_time_the_core_was_held_elsewhere_is_not_charged(monkeypatch, schedstat):
    th = _FakeThread(monkeypatch, schedstat)
    # the faster candidate waits 0.7 ms for its core on every call (another process had it)
    cands = {"fast": th.call(300_000, wait_for_core=700_000), "slow": th.call(500_000)}
    assert tactic.timings(cands, (), clock="cpu") == pytest.approx({"fast": 300e-6, "slow": 500e-6})
    assert tactic.fastest(cands, (), clock="cpu") == "fast"
    assert tactic.fastest(cands, (), clock="wall") == "slow"


@pytest.mark.parametrize("schedstat", [True, False])
def test_a_candidate_that_sleeps_is_charged_its_sleep(monkeypatch, schedstat):
    th = _FakeThread(monkeypatch, schedstat)
    cands = {"sleeper": th.call(20_000, sleep=980_000), "busy": th.call(300_000)}
    assert tactic.timings(cands, (), clock="cpu") == pytest.approx({"sleeper": 1000e-6, "busy": 300e-6})


@pytest.mark.real_clock     # what the real thread clock charges: scaled readings would not say
def test_a_real_sleep_does_not_win_at_one_thread(monkeypatch):
    monkeypatch.setenv("SRCORE_CPU_THREADS", "1")
    cands = {"sleeper": lambda: time.sleep(1e-3), "busy": lambda: _burn(300)}
    t = tactic.timings(cands, (), rounds=3)
    assert t["sleeper"] >= 1e-3 > t["busy"] >= 300e-6
    assert tactic.fastest(cands, (), rounds=3) == "busy"


def test_a_failing_candidate_is_dropped():
    def bad(x):
        raise ValueError(x)

    assert tactic.fastest({"bad": bad, "ok": lambda x: None}, (1,), clock="cpu") == "ok"
    assert tactic.timings({"bad": bad}, (1,), clock="cpu") == {}


def test_two_stages_clear_losers_get_one_round(monkeypatch):
    """A candidate CLEAR-times slower than the best after the first round gets no more rounds; the
    close ones get them all (and the faster of those still wins)."""
    th = _FakeThread(monkeypatch)
    runs = {"a": 0, "b": 0, "slow": 0}

    def counted(name, ns):
        inner = th.call(ns)

        def call():
            runs[name] += 1
            inner()
        return call
    cands = {"a": counted("a", 100_000), "b": counted("b", 110_000), "slow": counted("slow", 400_000)}
    assert tactic.fastest(cands, (), rounds=5, budget_s=1.0, clock="cpu") == "a"
    assert runs == {"a": 6, "b": 6, "slow": 2}          # warm-up + 5 rounds; warm-up + 1 round
    runs.update(a=0, b=0, slow=0)
    del cands["b"]
    tactic.timings(cands, (), rounds=5, budget_s=1.0, clock="cpu")
    assert runs == {"a": 2, "b": 0, "slow": 2}          # one candidate left: timing stops


def test_split_timed_while_openblas_sleeps_then_threaded_blas(monkeypatch):
    """``split_vs_blas``: the split's rounds first, after OpenBLAS's worker went to sleep, then the
    threaded BLAS's, cut short when the first round is CLEAR either way; then noted as threaded."""
    monkeypatch.setenv("SRCORE_CPU_THREADED_BLAS", "1")   # the threaded-BLAS timing (not the one-team default)
    from srcore_cpu.kernels import parallel

    th = _FakeThread(monkeypatch)
    log = []
    monkeypatch.setattr(parallel, "wait_blas_idle", lambda: log.append("wait"))
    monkeypatch.setattr(parallel, "note_threaded_blas", lambda: log.append("note"))

    def call(name, ns):
        inner = th.call(ns)

        def run():
            log.append(name)
            inner()
        return run
    t = tactic.split_vs_blas(call("split", 100_000), call("blas", 120_000), rounds=3, budget_s=None)
    assert t == pytest.approx((100e-6, 120e-6))
    assert log == ["wait"] + ["split"] * 4 + ["blas"] * 4 + ["note"]
    log.clear()
    tactic.split_vs_blas(call("split", 100_000), call("blas", 400_000), rounds=3, budget_s=None)
    assert log == ["wait"] + ["split"] * 4 + ["blas"] * 2 + ["note"]


def test_wait_blas_idle_waits_out_the_spin_once(monkeypatch):
    """Right after a threaded BLAS timing the next split sleeps the rest of BLAS_SPIN_S; after
    that, or with no threaded timing since, it does not sleep."""
    monkeypatch.setenv("SRCORE_CPU_THREADED_BLAS", "1")   # the threaded-BLAS timing (not the one-team default)
    from srcore_cpu.kernels import parallel

    now, slept = [100.0], []
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(time, "sleep", lambda s: (slept.append(s), now.__setitem__(0, now[0] + s)))
    parallel.note_threaded_blas()
    now[0] += 0.02
    parallel.wait_blas_idle()
    parallel.wait_blas_idle()
    assert slept == [pytest.approx(parallel.BLAS_SPIN_S - 0.02)]


def test_threaded_blas_candidates_timed_after_the_others_on_the_wall_clock(monkeypatch):
    """``timings(..., threaded_blas=...)`` on the wall clock: the other candidates' rounds all come
    first, after OpenBLAS's worker went to sleep, the threaded-BLAS ones after, then noted; every
    candidate keeps its own best. On the cpu clock the rounds stay interleaved, with no wait."""
    from srcore_cpu.kernels import parallel

    th = _FakeThread(monkeypatch)
    log = []
    monkeypatch.setattr(parallel, "wait_blas_idle", lambda: log.append("wait"))
    monkeypatch.setattr(parallel, "note_threaded_blas", lambda: log.append("note"))

    def call(name, ns):
        inner = th.call(ns)

        def run():
            log.append(name)
            inner()
        return run
    cands = {"blas": call("blas", 100_000), "split": call("split", 90_000), "one": call("one", 110_000)}
    t = tactic.timings(cands, (), rounds=2, budget_s=1.0, clock="wall", threaded_blas={"blas"})
    assert t == pytest.approx({"blas": 100e-6, "split": 90e-6, "one": 110e-6})
    assert log[0] == "wait" and log[-1] == "note"
    assert set(log[1:7]) == {"split", "one"} and log[7:10] == ["blas"] * 3
    log.clear()
    tactic.timings(cands, (), rounds=2, budget_s=1.0, clock="cpu", threaded_blas={"blas"})
    assert "wait" not in log and log[:3] == ["blas", "split", "one"]


def test_millisecond_candidates_warm_up_before_their_rounds(monkeypatch):
    """A candidate whose first call takes WARM_LONG_S or more is called again up to WARM_S / WARM_CALLS
    before its rounds, its slow first calls not counted (a slow mode that lasts two calls no longer
    loses it the choice); a short candidate gets one warm-up call."""
    th = _FakeThread(monkeypatch)
    calls = {"slow_start": 0, "steady": 0, "short": 0}

    def cand(name, times_ns):
        def run():
            i = calls[name]
            calls[name] += 1
            th.call(times_ns[min(i, len(times_ns) - 1)])()
        return run
    cands = {"slow_start": cand("slow_start", [2_000_000, 2_000_000, 1_000_000]),
             "steady": cand("steady", [1_200_000]), "short": cand("short", [100_000_000 // 1000])}
    t = tactic.timings(cands, (), rounds=1, budget_s=1.0, clock="cpu")
    assert min(t, key=t.get) == "short"
    del cands["short"]
    calls.update(slow_start=0, steady=0)
    t = tactic.timings(cands, (), rounds=1, budget_s=1.0, clock="cpu")
    assert t == pytest.approx({"slow_start": 1e-3, "steady": 1.2e-3})
    assert calls == {"slow_start": 3, "steady": 5, "short": 2}   # warm-up to 4 ms or 4 calls, then 1 round


def test_two_passes_threaded_blas_candidates_of_every_kernel_after_all_the_others(monkeypatch):
    """``tactic.deferred``: each kernel's part-pool / one-thread candidates are timed as it is built
    (after the wait for OpenBLAS's worker, which nothing woke since), the threaded-BLAS ones of all the
    queued kernels only at the first call of any of them (each after its ``before``), then one note;
    each ``finish`` gets all its candidates' times and chooses as :func:`timings` would have; a kernel
    dropped before that is not timed; later calls time nothing."""
    import gc

    from srcore_cpu.kernels import parallel

    th = _FakeThread(monkeypatch)
    log = []
    monkeypatch.setattr(parallel, "wait_blas_idle", lambda: log.append("wait"))
    monkeypatch.setattr(parallel, "note_threaded_blas", lambda: log.append("note"))

    def call(name, ns):
        inner = th.call(ns)

        def run(*args):
            log.append(name)
            inner()
        return run

    def build(tag, blas_ns):
        cands = {"split": call(f"{tag}.split", 90_000), "blas": call(f"{tag}.blas", blas_ns)}

        def finish(best):
            way = min(best, key=best.get)
            log.append(f"{tag}.finish {sorted(best)}")
            chosen = call(f"{tag}.run {way}", 1)
            chosen.tactic = way
            return chosen
        return tactic.deferred(cands, lambda: (), {"blas"}, finish, before=lambda: log.append(f"{tag}.before"),
                               rounds=2, budget_s=1.0)
    a = build("a", 80_000)
    dropped = build("d", 80_000)
    b = build("b", 120_000)
    assert log == ["wait"] + ["a.split"] * 3 + ["wait"] + ["d.split"] * 3 + ["wait"] + ["b.split"] * 3
    assert a.tactic is None and a.chosen is None
    del dropped
    gc.collect()
    log.clear()
    b(1)                                        # the first call of any of them: the second pass, in order
    assert log == (["a.before"] + ["a.blas"] * 3 + ["a.finish ['blas', 'split']"]
                   + ["b.before"] + ["b.blas"] * 3 + ["b.finish ['blas', 'split']", "note", "b.run split"])
    assert (a.tactic, b.tactic) == ("blas", "split")
    log.clear()
    a(1)
    b(1)
    assert log == ["a.run blas", "b.run split"]


def test_a_loser_whose_rounds_all_waited_for_a_core_gets_more_rounds_after_pauses(monkeypatch):
    """Wall clock: a candidate that lost with every round run while a core was taken (a split whose
    second part waited) is timed again after each of RETRY_PAUSES_S until it has a clean round; a
    clean loser or the winner is not. Under load that kept nearly every 2-thread split on one thread."""
    th = _FakeThread(monkeypatch)
    slept = []
    monkeypatch.setattr(tactic.time, "sleep", slept.append)
    calls = {"split": 0, "one": 0}

    def split():
        calls["split"] += 1
        # its first 6 calls (warm-up, 3 rounds, the first retry's two) wait 2/3 of their time for a core
        th.call(40_000, wait_for_core=80_000)() if calls["split"] <= 6 else th.call(60_000)()

    def one():
        calls["one"] += 1
        th.call(100_000)()
    t = tactic.timings({"split": split, "one": one}, (), rounds=3, budget_s=1.0, clock="wall")
    assert t == pytest.approx({"split": 60e-6, "one": 100e-6})
    # warm-up + 3 rounds = 4 calls; each retry an untimed call and a round: the second retry's is clean
    assert calls == {"split": 4 + 2 + 2, "one": 4}
    assert slept == list(tactic.RETRY_PAUSES_S[:2])
    assert tactic.fastest({"split": split, "one": one}, (), rounds=3, budget_s=1.0, clock="wall") == "split"
    slept.clear()
    assert tactic.fastest({"one": one, "split2": th.call(120_000)}, (), rounds=3, budget_s=1.0, clock="wall") == "one"
    assert slept == []                                    # a clean loser: no retry


def test_split_vs_blas_retries_a_split_that_only_ran_while_a_core_was_taken(monkeypatch):
    from srcore_cpu.kernels import parallel

    th = _FakeThread(monkeypatch)
    monkeypatch.setattr(tactic.time, "sleep", lambda s: None)
    monkeypatch.setattr(parallel, "blas_on_caller", lambda: True)
    monkeypatch.setattr(parallel, "on_caller", lambda fn: fn)
    n = [0]

    def split():
        n[0] += 1
        th.call(300_000, wait_for_core=500_000)() if n[0] <= 5 else th.call(300_000)()
    t_split, t_blas = tactic.split_vs_blas(split, th.call(500_000), rounds=3, budget_s=None)
    assert (t_split, t_blas) == pytest.approx((300e-6, 500e-6))

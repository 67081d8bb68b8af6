"""The timing-chaos plugin (``tests/_chaos.py``) perturbs what it claims to: the core clock's readings
are scaled, the ``time`` of the modules that read it directly is warped, and trt_like's timings are
reported untrusted, so the timing cache does not keep them."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import _chaos
from srcore import clock

pytestmark = pytest.mark.one_pass


def _chaos_for(monkeypatch, **kw) -> _chaos.Chaos:
    return _chaos.Chaos(_chaos.Settings("7", **kw))


def test_the_core_clock_is_scaled_within_the_spread(monkeypatch):
    monkeypatch.setattr(clock, "per_call_ns", lambda call, n, which: 1000.0)
    monkeypatch.setattr(clock, "wall_ns_waited", lambda call, n: (1000.0, 0.25))
    chaos = _chaos_for(monkeypatch, spread=4.0)
    chaos.install_clock(monkeypatch)
    got = [clock.per_call_ns(lambda: None, 1, "cpu") for _ in range(200)]
    # the same factors, drawn again from the same seed
    again = _chaos.Chaos(_chaos.Settings("7", spread=4.0))
    assert got == [1000.0 * again.factor() for _ in range(200)]
    assert all(250.0 <= g <= 4000.0 for g in got) and min(got) < 500 and max(got) > 2000
    assert chaos.counts.scaled == 200
    ns, waited = clock.wall_ns_waited(lambda: None, 1)
    assert ns != 1000.0 and waited == 0.25


def test_a_test_that_fakes_the_clock_or_is_marked_real_clock_reads_it_unscaled(monkeypatch):
    """The timing code's own unit tests fake ``WALL_CLOCK`` / ``CPU_CLOCK`` / ``run_delay``: their
    readings pass as they are; a ``real_clock`` test (``active`` off) gets the real clock's."""
    chaos = _chaos_for(monkeypatch)
    chaos.install_clock(monkeypatch)
    now = [0]

    def call():
        now[0] += 1000
    with monkeypatch.context() as mp:
        mp.setattr(clock, "WALL_CLOCK", lambda: now[0])
        assert clock.per_call_ns(call, 4, "wall") == 1000.0 and chaos.counts.scaled == 0
    chaos.active = False        # (the clock's own sources again)
    clock.per_call_ns(lambda: None, 1, "wall")
    assert chaos.counts.scaled == 0
    chaos.active = True
    clock.per_call_ns(lambda: None, 1, "wall")
    assert chaos.counts.scaled == 1


def test_the_plugins_see_the_scaled_clock(monkeypatch):
    """The cpu plugin and trt_like read ``srcore.plugin.clock``, the same module: patched for them too."""
    from srcore.plugin import clock as plugin_clock

    chaos = _chaos_for(monkeypatch)
    chaos.install_clock(monkeypatch)
    assert plugin_clock.per_call_ns.chaos is chaos


def test_a_warped_clock_scales_each_interval_and_never_goes_back():
    readings = iter([10.0, 11.0, 13.0, 13.0, 20.0])
    chaos = _chaos.Chaos(_chaos.Settings("3", spread=8.0))
    fake = lambda: next(readings)            # noqa: E731
    fake.__name__ = "perf_counter"
    warped = chaos.warped(fake)
    got = [warped() for _ in range(5)]
    ref = _chaos.Chaos(_chaos.Settings("3", spread=8.0))
    f = [ref.factor() for _ in range(4)]     # one per reading after the first (the third's interval is 0)
    want = [10.0, 10.0 + 1.0 * f[0], 10.0 + f[0] + 2.0 * f[1], 10.0 + f[0] + 2.0 * f[1],
            10.0 + f[0] + 2.0 * f[1] + 7.0 * f[3]]
    assert got == pytest.approx(want)
    assert got[1] != 11.0 and all(b >= a for a, b in zip(got, got[1:]))


def test_the_direct_time_readers_get_a_warped_time(monkeypatch):
    from srcore.partition import short

    chaos = _chaos_for(monkeypatch)
    done = chaos.install_time(monkeypatch)
    assert "srcore.partition.short" in done and "srcore.int8.gemm" in done
    assert short.time.process_time is not __import__("time").process_time
    assert short.time.sleep is __import__("time").sleep            # the rest passes through
    t0 = short.time.perf_counter()        # (the first reading is the real one)
    short.time.perf_counter()
    assert chaos.counts.warped == 1 and short.time.perf_counter() >= t0


def test_trt_like_timings_are_reported_untrusted_and_so_not_trusted(monkeypatch):
    pytest.importorskip("srcore_trt_like")
    from srcore_trt_like.tactics import timing

    calls = [lambda: None, lambda: sum(range(100))]
    for p, trusted in ((1.0, False), (0.0, True)):
        with monkeypatch.context() as mp:
            chaos = _chaos_for(mp, untrusted=p)
            assert chaos.install_untrusted(mp)
            with timing.watch() as found:
                timing.best_times(calls, rounds=1, clock="cpu")    # the cpu clock: clean by construction
            assert timing.trusted(found) == trusted and chaos.counts.untrusted == (not trusted)
            with timing.watch() as found:          # one candidate: nothing to distrust
                timing.best_times(calls[:1], rounds=1, clock="cpu")
            assert timing.trusted(found)
            mp.setattr(clock, "thread_delays", lambda: None)   # a test faking the clock: left alone
            with timing.watch() as found:
                timing.best_times(calls, rounds=1, clock="cpu")
            assert timing.trusted(found)


@pytest.mark.parametrize("text, want", [
    ("5", _chaos.Settings("5")),
    ("abc, spread=2, untrusted=0.1", _chaos.Settings("abc", 2.0, 0.1)),
])
def test_settings_parse(text, want):
    assert _chaos.Settings.parse(text) == want


@pytest.mark.parametrize("text", ["", ",spread=2", "1,spread=0.5", "1,untrusted=2", "1,speed=2", "1,spread=x"])
def test_bad_settings_are_named(text):
    with pytest.raises(_chaos.ChaosSettingError, match="SRCORE_TEST_CHAOS"):
        _chaos.Settings.parse(text)


def test_the_clock_is_scaled_exactly_when_the_variable_is_set():
    """In the suite's own run (no variable) srcore's clock is its own; the run below sets it."""
    assert hasattr(clock.per_call_ns, "chaos") == bool(os.environ.get(_chaos.ENV, "").strip())


def test_the_variable_turns_the_plugin_on_for_a_session():
    """A pytest session started with ``SRCORE_TEST_CHAOS`` (the root conftest registers the plugin)
    runs its tests with the clock scaled and says so in its header and summary."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, SRCORE_TEST_CHAOS="11,untrusted=0.2")
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                          "tests/test_chaos.py::test_the_clock_is_scaled_exactly_when_the_variable_is_set"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "srcore timing chaos: seed 11, spread 8.0, untrusted 0.2" in out.stdout
    assert "1 passed" in out.stdout

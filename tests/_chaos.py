"""Timing chaos: a pytest plugin (opt-in, ``SRCORE_TEST_CHAOS=SEED``) that makes every timing srcore
and its plugins decide by unreliable, as on a loaded CI machine, to find the tests that depend on it.

Tactic choices are made by timing on the machine (docs/testing.md, "Timing chaos"): which tactic
wins, whether a choice is kept in trt_like's timing cache and so what a rebuild picks, whether a
short tail or an OpenVINO segment stays an engine. On a loaded machine any of them can come out
otherwise, and a test that asserts a winner, assumes a rebuild hits the cache, or compares timings
fails there (CI went red when a rebuild re-timed an untrusted choice and a layout key changed).
Under this plugin:

- every reading of the core's candidate clock (``srcore.clock``: ``per_call_ns``,
  ``wall_ns_waited``, ``call_waited``; the cpu plugin's load-time tactics, its jit and MKL choices,
  trt_like's builder, ``srcore.conv``'s transposed conv) is multiplied by a random factor,
  log-uniform in ``[1/spread, spread]``;
- the modules that time with :mod:`time` directly (the short-tail trial in
  ``srcore.partition.short``, the int8 GEMM's path choice in ``srcore.int8.gemm``, OpenVINO's
  comparison with the next backends in ``srcore_openvino.engine``) see a ``time`` whose
  ``perf_counter`` / ``process_time`` / ``thread_time`` advance by each interval since their last
  reading times a fresh random factor (monotonic, so budgets and loops still end);
- each of trt_like's ``best_times`` is reported *untrusted* with probability ``untrusted`` (a
  ``Taken`` with an untrusted candidate, what a core taken through every retry gives): the choice
  is used but not kept in the timing cache, so the next build times it again.

Results must be right whatever wins; a test may still pin what it needs (``timing.trusted``
forced true, a faked ``rank`` / ``best_times``): those patches sit on top of the chaos and win.
A test that fakes the clock's sources (``srcore.clock.WALL_CLOCK``, ``CPU_CLOCK``, ``run_delay``,
``thread_delays``: the timing code's own unit tests, deterministic by construction) gets its fake
readings unscaled and no timing reported untrusted,
and a test marked ``real_clock`` (it checks what the clock charges on real readings, a sleep or a
busy loop) gets no chaos at all.
The random stream is seeded per test from the seed and the test's id, so a test's draws do not
depend on the tests before it; the number of draws still depends on real timings (rounds cut
short by a budget), so a failure is likely, not certain, to repeat with the same seed.

``SRCORE_TEST_CHAOS`` is ``SEED`` or ``SEED,spread=S,untrusted=P`` (defaults 8 and 0.5).
"""
from __future__ import annotations

import functools
import importlib
import math
import os
import random
import time as _time
import types
from typing import Any, Callable

import attrs
import pytest

ENV = "SRCORE_TEST_CHAOS"
#: the modules that time candidates with :mod:`time` itself (their ``time`` global is replaced)
TIME_MODULES = ("srcore.partition.short", "srcore.int8.gemm", "srcore_openvino.engine")
#: what srcore.clock reads: a test that replaces one fakes the clock, and gets no chaos from it
_SOURCES = ("WALL_CLOCK", "CPU_CLOCK", "run_delay", "thread_delays")
#: the clocks of :mod:`time` those modules read that are warped (the rest pass through)
WARPED = ("perf_counter", "perf_counter_ns", "process_time", "process_time_ns", "thread_time", "thread_time_ns")


class ChaosSettingError(ValueError):
    """A malformed ``SRCORE_TEST_CHAOS``."""


@attrs.frozen
class Settings:
    seed: str
    #: timings are scaled by a factor log-uniform in [1/spread, spread]
    spread: float = 8.0
    #: probability that one of trt_like's best_times is reported untrusted
    untrusted: float = 0.5

    @classmethod
    def parse(cls, text: str) -> "Settings":
        seed, *rest = [p.strip() for p in text.split(",")]
        if not seed:
            raise ChaosSettingError(f"{ENV}={text!r}: no seed")
        kw: dict[str, float] = {}
        for part in rest:
            key, sep, value = part.partition("=")
            if not sep or key not in ("spread", "untrusted"):
                raise ChaosSettingError(f"{ENV}={text!r}: {part!r} is not spread=S or untrusted=P")
            try:
                kw[key] = float(value)
            except ValueError:
                raise ChaosSettingError(f"{ENV}={text!r}: {key} must be a number, got {value!r}") from None
        made = cls(seed, **kw)
        if not made.spread >= 1 or not 0 <= made.untrusted <= 1:
            raise ChaosSettingError(f"{ENV}={text!r}: spread must be >= 1 and untrusted in [0, 1]")
        return made


@attrs.define
class Counts:
    """What the chaos did (for the plugin's own test and the session summary)."""

    scaled: int = 0        # clock readings scaled
    warped: int = 0        # readings of a warped time function
    untrusted: int = 0     # best_times reported untrusted


class Chaos:
    """The perturbations of one session (or one test of the plugin): :meth:`install` patches through
    ``patch`` (a :class:`pytest.MonkeyPatch`), :meth:`reseed` restarts the random stream."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.counts = Counts()
        self._log_spread = math.log(settings.spread)
        #: off for a test marked ``real_clock``
        self.active = True
        from srcore import clock

        self._sources = tuple((name, getattr(clock, name)) for name in _SOURCES)   # as srcore has them

    def reseed(self, key: str) -> None:
        self.rng.seed(f"{self.settings.seed}:{key}")   # str seeds hash with sha512: stable across runs

    def factor(self) -> float:
        return math.exp(self.rng.uniform(-self._log_spread, self._log_spread))

    # -- the core's clock -----------------------------------------------------------------------
    def _real_sources(self) -> bool:
        """Whether the clock reads what it read when installed (a test faking it is left alone)."""
        from srcore import clock

        return all(getattr(clock, name) is was for name, was in self._sources)

    def scaled(self, fn: Callable[..., Any], pick: Callable[[Any, float], Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def chaotic(*args, **kwargs):
            got = fn(*args, **kwargs)
            if not (self.active and self._real_sources()):
                return got
            self.counts.scaled += 1
            return pick(got, self.factor())
        chaotic.chaos = self   # (marks the wrapper)
        return chaotic

    def install_clock(self, patch: pytest.MonkeyPatch) -> None:
        from srcore import clock

        patch.setattr(clock, "per_call_ns", self.scaled(clock.per_call_ns, lambda ns, f: ns * f))
        # (ns per call, fraction waited): the wait is a fraction of the same wall time, unscaled
        patch.setattr(clock, "wall_ns_waited", self.scaled(clock.wall_ns_waited, lambda r, f: (r[0] * f, r[1])))
        patch.setattr(clock, "call_waited", self.scaled(
            clock.call_waited, lambda r, f: (int(r[0] * f), None if r[1] is None else int(r[1] * f))))

    # -- modules that read time.* ----------------------------------------------------------------
    def warped(self, fn: Callable[[], float]) -> Callable[[], float]:
        """``fn`` (a clock) whose every interval between two readings is scaled by a fresh factor
        (the first reading passes as it is)."""
        state: list = []          # [last real reading, last value returned]
        integer = fn.__name__.endswith("_ns")

        def reading():
            real = fn()
            if not state:
                state[:] = [real, real]
                return real
            f = 1.0
            if self.active:
                self.counts.warped += 1
                f = self.factor()
            value = state[1] + (real - state[0]) * f
            state[:] = [real, value]
            return int(value) if integer else value
        reading.__name__ = fn.__name__
        return reading

    def time_module(self) -> types.SimpleNamespace:
        """A stand-in for :mod:`time` with the :data:`WARPED` clocks warped, the rest as they are."""
        ns = types.SimpleNamespace(**{k: getattr(_time, k) for k in dir(_time) if not k.startswith("__")})
        for name in WARPED:
            setattr(ns, name, self.warped(getattr(_time, name)))
        return ns

    def install_time(self, patch: pytest.MonkeyPatch, modules=TIME_MODULES) -> list[str]:
        done = []
        for name in modules:
            try:
                mod = importlib.import_module(name)
            except ImportError:      # a plugin that is not installed here
                continue
            patch.setattr(mod, "time", self.time_module())
            done.append(name)
        return done

    # -- trt_like's trusted timings --------------------------------------------------------------
    def install_untrusted(self, patch: pytest.MonkeyPatch) -> bool:
        try:
            from srcore_trt_like.tactics import timing
        except ImportError:
            return False
        real = timing._best_times

        @functools.wraps(real)
        def best_times(calls, *args, **kwargs):
            out = real(calls, *args, **kwargs)
            # (a test that fakes the clock checks the trust logic itself: nothing added to it)
            if self.active and self._real_sources() and len(calls) > 1 \
                    and self.rng.random() < self.settings.untrusted:
                self.counts.untrusted += 1
                taken = timing.Taken(len(calls), len(timing.RETRY_PAUSES_S), 1)
                for found in getattr(timing._seen, "stack", ()):
                    found.append(taken)
            return out
        patch.setattr(timing, "_best_times", best_times)
        return True

    def install(self, patch: pytest.MonkeyPatch) -> None:
        self.install_clock(patch)
        self.install_time(patch)
        self.install_untrusted(patch)


# -- the pytest plugin (registered by the root conftest.py) ------------------------------------------
_KEY = pytest.StashKey[tuple]()


def settings_from_env() -> Settings | None:
    text = os.environ.get(ENV, "").strip()
    return Settings.parse(text) if text else None


def pytest_configure(config: pytest.Config) -> None:
    settings = settings_from_env()
    if settings is None:
        return
    chaos, patch = Chaos(settings), pytest.MonkeyPatch()
    chaos.install(patch)
    config.stash[_KEY] = (chaos, patch)


def pytest_report_header(config: pytest.Config) -> str | None:
    if _KEY in config.stash:
        s = config.stash[_KEY][0].settings
        return f"srcore timing chaos: seed {s.seed}, spread {s.spread}, untrusted {s.untrusted} ({ENV})"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _KEY in item.config.stash:   # before any fixture: module fixtures built here use this test's stream
        chaos = item.config.stash[_KEY][0]
        chaos.reseed(item.nodeid)
        chaos.active = item.get_closest_marker("real_clock") is None


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if _KEY in config.stash:
        c = config.stash[_KEY][0].counts
        terminalreporter.write_line(f"srcore timing chaos: {c.scaled} clock readings scaled, {c.warped} time "
                                    f"readings warped, {c.untrusted} timings reported untrusted")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _KEY in config.stash:
        config.stash[_KEY][1].undo()

"""Which split layers of a plan run on their team, chosen by timing the whole sequence at build.

Each layer's tactic is timed alone, back to back: its team awake, its data in its cores' caches. In
the engine's sequence a split layer may pay a worker's wake-up after a stretch of one-thread layers
and its activations crossing between the cores, so a 2-thread engine built from per-layer winners
can be slower than its layers on one thread (mobilenet_v3 on a 2-vCPU AMD EPYC: 2.50 ms against
2.26 ms at one thread). So, at more than one intra-op thread, after the tactics are chosen, the
plan's *split steps* (those whose kernels launch governed regions, found by running them once) are
timed in sequence three ways, the sequences alternating on the same inputs: every split on its
team (``team``), every split step on the calling thread (``solo``: the same kernels, the same
bits, :func:`..kernels.threads.run_solo`), and the greedy mix (``mixed``: on the caller only the
steps whose solo time in the sequence beat their team time). The fastest sequence (median of the
clean ones) wins, the one with fewer split steps within :data:`MARGIN` of it. A step run on the
caller has its tactic named ``<tactic>@1t`` (``describe()``, serialized plans); the decision goes
into the timing cache keyed by the plan's layers and tactics. Engine option ``thread_plan=false``
keeps every split on its team (as before 2026-11-29). Timing is injectable (``timer``), so the
choice is tested without clocks (``tests/test_thread_plan.py``).
"""
from __future__ import annotations

import gc
import hashlib
import logging
import statistics
import time
from typing import Callable

import attrs
import numpy as np

from srcore.plugin import clock as _clock

from ..builder.network import Network
from ..builder.plan import Plan, Step
from ..kernels import threads as _threads
from . import timing_cache
from .choose import SOLO
from .timing import random_input

log = logging.getLogger("srcore.trt_like")

#: a sequence with more split steps must be faster than one with fewer by more than this fraction
MARGIN = 0.02
#: clean sequences per variant (after one warm-up sequence each); at most ``ATTEMPTS`` x this run
SEQUENCES = 21
ATTEMPTS = 4
#: a sequence is clean when the process's threads waited for a core less than this fraction of it
MAX_WAIT = 0.02


@attrs.frozen
class SequenceTimes:
    """One variant's sequences: each step's median (s), the whole sequence's median (s), clean count."""

    steps: tuple[float, ...]
    total: float
    clean: int


@attrs.frozen
class ThreadChoice:
    """The plan's thread choice: its split steps, those run on the caller, and the timings (s)."""

    split: tuple[int, ...]
    pinned: tuple[int, ...]
    times: dict = attrs.field(factory=dict, eq=False)
    how: str = "timed"

    def describe(self) -> str:
        times = ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in self.times.items())
        return (f"thread plan: {len(self.split)} split step(s), {len(self.pinned)} on the calling thread"
                f"{': ' + times if times else ''} [{self.how}]")


Timer = Callable[[dict[str, frozenset]], dict[str, SequenceTimes]]


def decide(split: list[int], timer: Timer) -> tuple[frozenset, dict[str, float], bool]:
    """The steps to run on the caller, each variant's sequence time, and whether every variant had
    enough clean sequences (the choice may be cached). ``timer`` maps variants (name -> pinned steps)
    to their :class:`SequenceTimes`."""
    variants = {"team": frozenset(), "solo": frozenset(split)}
    got = timer(variants)
    team, solo = got["team"], got["solo"]
    # pinning one step also moves its neighbours' times (the next split finds the worker asleep):
    # the greedy mix is a guess from the two pure sequences, kept only if its own sequence wins
    mixed = frozenset(i for i in split if solo.steps[i] < team.steps[i])
    if mixed not in variants.values():
        variants["mixed"] = mixed
        got = timer(variants)
    best = pick({name: (variants[name], got[name].total) for name in variants}, len(split))
    enough = all(t.clean >= SEQUENCES // 3 for t in got.values())
    return variants[best], {name: got[name].total for name in variants}, enough


def pick(variants: dict[str, tuple[frozenset, float]], n_split: int) -> str:
    """The variant to keep: the fastest, unless one with more steps on the caller (fewer splits) is
    within :data:`MARGIN` of it (the less it splits, the less it depends on the other core)."""
    fastest = min(t for _, t in variants.values())
    within = [name for name, (pinned, t) in variants.items() if t <= fastest * (1 + MARGIN)]
    return max(within, key=lambda name: (len(variants[name][0]), -variants[name][1]))


def split_steps(calls: list[tuple[int, Callable, tuple]]) -> list[int]:
    """The steps whose kernels launch governed regions (a team's split), each run once."""
    out = []
    for k, fn, args in calls:
        before = _threads.COUNTS["team"] + _threads.COUNTS["solo"]
        fn(*args)
        if _threads.COUNTS["team"] + _threads.COUNTS["solo"] != before:
            out.append(k)
    return out


def sequence_timer(calls: list[tuple[int, Callable, tuple]], sequences: int = SEQUENCES) -> Timer:
    """The real timer: each variant's sequence of ``calls`` (step index, kernel, arguments), its pinned
    steps through :func:`..kernels.threads.run_solo`, variants alternating, each step timed in wall
    time; a sequence counts when the process's threads waited for a core less than :data:`MAX_WAIT`."""
    def timer(variants: dict[str, frozenset]) -> dict[str, SequenceTimes]:
        seqs = {name: [(k, _threads.run_solo(fn) if k in pinned else fn, args) for k, fn, args in calls]
                for name, pinned in variants.items()}
        kept: dict[str, list[list[int]]] = {name: [] for name in seqs}
        every: dict[str, list[list[int]]] = {name: [] for name in seqs}
        for seq in seqs.values():   # warm-up: a pinned kernel's first solo region, scratch
            _run(seq)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            for attempt in range(ATTEMPTS * sequences):
                names = list(seqs)
                r = attempt % len(names)
                for name in names[r:] + names[:r]:
                    # once untimed: the sequence before was another variant's, whose solo stretches let
                    # the team's workers fall asleep; back-to-back calls of one plan find them spinning
                    _run(seqs[name])
                    d0 = _clock.thread_delays()
                    times = _run(seqs[name])
                    waited = _clock.delay_between(d0, _clock.thread_delays())
                    every[name].append(times)
                    if waited is None or waited < MAX_WAIT * sum(times):
                        kept[name].append(times)
                if all(len(v) >= sequences for v in kept.values()):
                    break
        finally:
            if gc_was:
                gc.enable()
        out = {}
        index = {k: i for i, (k, _, _) in enumerate(calls)}
        for name in seqs:
            rows = kept[name] if len(kept[name]) >= 3 else every[name]
            per = [statistics.median(col) * 1e-9 for col in zip(*rows)]
            steps = [0.0] * (max(index) + 1 if index else 0)
            for k, i in index.items():
                steps[k] = per[i]
            out[name] = SequenceTimes(tuple(steps), statistics.median(sum(r) for r in rows) * 1e-9,
                                      len(kept[name]))
        return out
    return timer


def _run(seq) -> list[int]:
    times = [0] * len(seq)
    clock = time.perf_counter_ns
    for i, (_, fn, args) in enumerate(seq):
        t = clock()
        fn(*args)
        times[i] = clock() - t
    return times


def pin(steps: list[Step], pinned) -> list[Step]:
    """``steps`` with those at the indices ``pinned`` on the calling thread (tactic ``<name>@1t``)."""
    return [attrs.evolve(s, tactic=s.tactic + SOLO, fn=_threads.run_solo(s.fn)) if k in pinned else s
            for k, s in enumerate(steps)]


def choose_threads(net: Network, steps: list[Step], options: dict, name: str = "engine",
                   timer: Timer | None = None) -> tuple[list[Step], ThreadChoice | None]:
    """``steps`` with the split steps that lose in the sequence on the calling thread, and the choice
    (None: one intra-op thread, timing off, option ``thread_plan=false``, or no split step)."""
    if (not options.get("thread_plan", True) or not options.get("timing", True)
            or _threads.count() <= 1):
        return steps, None
    try:
        calls = _calls(net, steps)
        with np.errstate(all="ignore"):
            split = split_steps(calls)
    except Exception as exc:  # noqa: BLE001 - a layer that fails on random data: keep the plan as built
        log.debug("%s: thread plan not timed: %s", name, exc)
        return steps, None
    if not split:
        return steps, None
    cache = timing_cache.get() if options.get("timing_cache", True) else None
    key = "threads:" + hashlib.sha256("|".join(f"{_layer_key(s, net)}:{s.tactic}" for s in steps).encode()).hexdigest()[:24]
    known = _parse(cache.lookup(key)) if cache is not None else None
    if known is not None and known <= set(split):
        choice = ThreadChoice(tuple(split), tuple(sorted(known)), how="timing cache")
    else:
        with np.errstate(all="ignore"):
            pinned, times, enough = decide(split, timer or sequence_timer(calls))
        choice = ThreadChoice(tuple(split), tuple(sorted(pinned)), times,
                              "timed" if enough else "timed while a core was taken: not cached")
        if cache is not None and enough:
            cache.store(key, "pin:" + ",".join(map(str, choice.pinned)))
            cache.save()
    log.info("%s: %s", name, choice.describe())
    return pin(steps, set(choice.pinned)), choice


def _calls(net: Network, steps: list[Step]) -> list[tuple[int, Callable, tuple]]:
    """``(step index, kernel, arguments)`` of the steps with a kernel, on private buffers and random inputs."""
    rng = np.random.default_rng(0)
    xs = [random_input(net.tensors[t], rng) for t in net.inputs]
    index = {id(s): k for k, s in enumerate(steps)}
    return [(index[id(step)], fn, args) for step, fn, args in Plan(net, steps).step_calls(*xs)]


def _layer_key(step: Step, net: Network) -> str:
    try:
        return timing_cache.layer_key(step.layer, net, [])
    except Exception:  # noqa: BLE001 - a layer whose attributes do not key (a compiled segment's): its kind
        return step.layer.kind


def _parse(value: str | None) -> set[int] | None:
    if not value or not value.startswith("pin:"):
        return None
    try:
        return {int(v) for v in value[4:].split(",") if v}
    except ValueError:
        return None

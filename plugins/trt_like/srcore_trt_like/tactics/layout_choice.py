"""Whether each run of NCHW16c layers (``builder/layout.py``) keeps the layout: chosen by timing at
build, never by rule. Every layer gets its tactics in NCHW first; then the runs are blocked and
their layers get theirs (the other layers' steps are kept); each run is then timed end to end in
both layouts (its layers' chosen kernels in order, on private buffers, :func:`.timing.best_times`)
and keeps the faster. The decision goes into the timing cache (keyed by the run's layers and the
tactics chosen for them), so a rebuild does not time it again, unless it was timed while a core was
taken (:mod:`.timing`). Engine option ``nchwc``: true or
false forces the layout on or off; unset, it is timed (with ``timing=False``: on).

**At more than one intra-op thread** a run is not timed alone but in the engine's sequence
(:func:`time_in_engine`): every step of the engine, with the run's layers in one layout or the
other, called back to back as a served model is, the two plans' rounds alternating. Alone, a run
timed without the threads the layers around it leave spinning: resnet_small's 13-layer 28x28-7x7
run timed 18.6 ms NCHW16c against 76.3 ms NCHW alone (2 threads, load 10, Sapphire Rapids VM), and
the engine it made ran at 19-21 ms, three busy threads on two cores, where the NCHW plan ran at
15.5-16.9 (docs/performance.md). Each round also counts the process's threads that wanted a core
(``srcore.clock.wall_ns_busy``: on one or waiting for one; other processes do not add to it): a
plan that keeps more of them busy than there are cores (by :data:`OVER`) loses to one that does
not, whatever its time on a loaded machine (:func:`keeps_blocked`).
"""
from __future__ import annotations

import hashlib
import logging
import os
import statistics
from typing import Any

import attrs
import numpy as np

from srcore.plugin import clock as _clock

from ..builder.layout import apply_nchwc, clear_nchwc, nchwc_runs, nchwc_tensors
from ..builder.network import Layer, Network
from ..builder.plan import Step
from ..kernels import threads as _threads
from . import timing, timing_cache
from .choose import _random, choose_tactics
from .timing import best_times

log = logging.getLogger("srcore.trt_like")

#: a plan whose calls keep more than the cores plus this many threads wanting a core (on average)
#: competes with itself
OVER = 0.5
#: rounds of the in-engine comparison, and the calls of one plan back to back in a round (after
#: one untimed call: the other plan's threads settle)
SEQ_ROUNDS = 5
SEQ_CALLS = 3
#: in-engine times closer than this fraction, with no plan over the cores, are not kept in the cache
CLOSE = 0.05


@attrs.frozen
class RunChoice:
    """One run of layers that could be NCHW16c: its layers, whether it is, and the two timings
    (seconds; None when forced by the ``nchwc`` option or timing is off)."""

    layers: int
    label: str
    blocked: bool
    blocked_s: float | None = None
    nchw_s: float | None = None
    #: mean threads wanting a core during the plans' calls (timed in the engine's sequence only)
    blocked_busy: float | None = None
    nchw_busy: float | None = None

    def describe(self) -> str:
        if self.blocked_s is None:
            times, how = "", "forced"
        else:
            times, how = f": NCHW16c {self.blocked_s * 1e3:.3f} ms, NCHW {self.nchw_s * 1e3:.3f} ms", "timed"
            if self.blocked_busy is not None and self.nchw_busy is not None:
                times += f", busy threads {self.blocked_busy:.2f} / {self.nchw_busy:.2f}"
                how = "timed in sequence"
        layout = "NCHW16c" if self.blocked else "NCHW"
        return f"NCHW16c run of {self.layers} layers ({self.label}) -> {layout}{times} [{how}]"


def choose_layout(net: Network, options: dict[str, Any], name: str = "engine") -> tuple[list[Step], list[RunChoice]]:
    """The network's steps with the NCHW16c runs that won marked (in place) in ``net``, and the choices."""
    force = options.get("nchwc")
    blocked = nchwc_tensors(net) if force is not False else set()
    if not blocked:
        return choose_tactics(net, options, name=name), []
    runs = nchwc_runs(net, blocked)
    if force or not options.get("timing", True):
        choices = [RunChoice(len(ls), _label(net, ls, {}), True) for _, ls in runs]
        apply_nchwc(net, blocked)
        return choose_tactics(net, options, name=name), choices
    shapes = {t: net.shape(t) for t in blocked}
    keys = {id(layer): timing_cache.layer_key(layer, net, []) for _, ls in runs for layer in ls}
    pool: list[str] = []
    plain = choose_tactics(net, options, name=name, pool=pool)
    by_layer = {id(s.layer): s for s in plain}
    in_runs = {id(layer) for _, ls in runs for layer in ls}
    apply_nchwc(net, blocked)
    blocked_steps = choose_tactics(net, options, name=f"{name} (NCHW16c)", pool=pool,
                                   keep={i: s for i, s in by_layer.items() if i not in in_runs})
    by_layer_b = {id(s.layer): s for s in blocked_steps}
    cache = timing_cache.get() if options.get("timing_cache", True) else None
    in_sequence = _threads.count() > 1
    cores = max(1, len(os.sched_getaffinity(0)))
    choices = []
    for tensors, layers in runs:
        a = [by_layer[id(layer)] for layer in layers]
        b = [by_layer_b[id(layer)] for layer in layers]
        key = ("nchwc_seq:" if in_sequence else "nchwc:") + hashlib.sha256("|".join(f"{keys[id(layer)]}:{sa.tactic}:{sb.tactic}"
                                                  for layer, sa, sb in zip(layers, a, b)).encode()).hexdigest()[:24]
        known = _parse(cache.lookup(key)) if cache is not None else None
        note = " (timing cache)"
        bb = bp = None
        if known is not None:
            tb, tp, bb, bp = known
        elif in_sequence:
            now = [by_layer_b[id(s.layer)] for s in blocked_steps]
            (tb, bb), (tp, bp) = time_in_engine(net, now, dict(zip(map(id, layers), a)), tensors, shapes)
            decided = _over(bb, cores) != _over(bp, cores) or abs(tb - tp) > CLOSE * min(tb, tp)
            note = "" if decided else " (too close to call: not cached)"
            if cache is not None and decided:
                cache.store(key, f"{tb!r} {tp!r} {bb!r} {bp!r}")
        else:
            with timing.watch() as found:
                tb, tp = time_run(net, layers, b, a, shapes)
            note = "" if timing.trusted(found) else " (timed while a core was taken: not cached)"
            if cache is not None and not note:
                cache.store(key, f"{tb!r} {tp!r}")
        keep = keeps_blocked(tb, tp, bb, bp, cores)
        choices.append(RunChoice(len(layers), _label(net, layers, shapes), keep, tb, tp, bb, bp))
        log.info("%s: %s%s", name, choices[-1].describe(), note)
        if not keep:
            clear_nchwc(net, tensors, layers, shapes)
            by_layer_b.update((id(layer), s) for layer, s in zip(layers, a))
    if cache is not None:
        cache.save()
    return [by_layer_b[id(s.layer)] for s in blocked_steps], choices


def time_run(net: Network, layers: list[Layer], blocked: list[Step], plain: list[Step],
             shapes: dict[int, tuple]) -> tuple[float, float]:
    """Seconds of the run's ``layers`` with the ``blocked`` steps (``net`` marked) and with the
    ``plain`` ones (its blocked tensors at their NCHW ``shapes``), on the same random inputs."""
    rng = np.random.default_rng(0)
    made = {t for layer in layers for t in layer.outputs}
    given: dict[int, np.ndarray] = {}
    for layer in layers:
        for t in layer.inputs:
            if t not in made and t not in given:
                given[t] = net.constants[t] if t in net.constants else _random(net.tensors[t], rng)

    def calls(steps: list[Step], shape_of) -> list:
        vals = dict(given)
        vals.update((t, np.zeros(shape_of(t), net.tensors[t].storage)) for t in made)
        return [(s.fn, [vals[t] for t in (*s.layer.inputs, *s.layer.outputs)]) for s in steps]

    runs = [calls(blocked, net.shape), calls(plain, lambda t: shapes.get(t, net.shape(t)))]

    def run(seq):
        for fn, args in seq:
            fn(*args)
    with np.errstate(all="ignore"):
        tb, tp = best_times([(lambda seq=seq: run(seq)) for seq in runs], bandwidth=None)
    return tb, tp


def keeps_blocked(blocked_s: float, nchw_s: float, blocked_busy: float | None, nchw_busy: float | None,
                  cores: int) -> bool:
    """Whether a run keeps NCHW16c: a plan keeping more threads busy than ``cores`` (:data:`OVER`)
    loses to one that does not; otherwise the faster wins."""
    over_b, over_p = _over(blocked_busy, cores), _over(nchw_busy, cores)
    if over_b != over_p:
        return over_p
    return blocked_s < nchw_s


def _over(busy: float | None, cores: int) -> bool:
    return busy is not None and busy > cores + OVER


def time_in_engine(net: Network, steps: list[Step], plain: dict[int, Step], tensors: set[int],
                   shapes: dict[int, tuple]) -> tuple[tuple[float, float | None], tuple[float, float | None]]:
    """``(seconds, busy threads)`` per call of the engine's ``steps`` as they are (``net`` marked) and
    with the ``plain`` steps (by layer id) in their layers' places, the run's blocked ``tensors`` at
    their NCHW ``shapes``: each plan called back to back on its own buffers, rounds alternating
    (module doc). Seconds: the best round's mean; busy threads: the rounds' median."""
    rng = np.random.default_rng(0)
    given: dict[int, np.ndarray] = {}

    def calls(seq: list[Step], shape_of) -> list:
        vals = dict(given)
        out = []
        for s in seq:
            for t in s.layer.inputs:
                if t not in vals:
                    vals[t] = given[t] = (net.constants[t] if t in net.constants
                                          else _random(net.tensors[t], rng))
            if s.fn is None:                  # a view: the engine's reshape shares its input's memory
                vals[s.layer.outputs[0]] = vals[s.layer.inputs[0]].reshape(shape_of(s.layer.outputs[0]))
                continue
            for t in s.layer.outputs:
                vals[t] = np.zeros(shape_of(t), net.tensors[t].storage)
            out.append((s.fn, [vals[t] for t in (*s.layer.inputs, *s.layer.outputs)]))
        return out

    seqs = [calls(steps, net.shape),
            calls([plain.get(id(s.layer), s) for s in steps], lambda t: shapes[t] if t in tensors else net.shape(t))]

    def run(seq):
        for fn, args in seq:
            fn(*args)
    ns: list[list[float]] = [[], []]
    busy: list[list[float]] = [[], []]
    with np.errstate(all="ignore"):
        for r in range(SEQ_ROUNDS):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                run(seqs[i])
                t, b = _clock.wall_ns_busy(lambda seq=seqs[i]: run(seq), SEQ_CALLS)
                ns[i].append(t)
                if b is not None:
                    busy[i].append(b)
    return tuple((min(ns[i]) * 1e-9, statistics.median(busy[i]) if busy[i] else None) for i in (0, 1))


def _parse(value: str | None) -> tuple[float, float, float | None, float | None] | None:
    try:
        vals = [float(v) for v in value.split()]
    except (AttributeError, ValueError):
        return None
    if len(vals) == 2:
        return vals[0], vals[1], None, None
    return tuple(vals) if len(vals) == 4 else None


def _label(net: Network, layers: list[Layer], shapes: dict[int, tuple]) -> str:
    first, last = layers[0], layers[-1]
    shape = "x".join(map(str, shapes.get(first.outputs[0], net.shape(first.outputs[0]))))
    return f"{first.kind} -> {shape} .. {last.kind}, {first.source or '?'}"

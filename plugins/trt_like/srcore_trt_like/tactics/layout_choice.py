"""Whether each run of NCHW16c layers (``builder/layout.py``) keeps the layout: chosen by timing at
build, never by rule. Every layer gets its tactics in NCHW first; then the runs are blocked and
their layers get theirs (the other layers' steps are kept); each run is then timed end to end in
both layouts (its layers' chosen kernels in order, on private buffers, :func:`.timing.best_times`)
and keeps the faster. The decision goes into the timing cache (keyed by the run's layers and the
tactics chosen for them), so a rebuild does not time it again, unless it was timed while a core was
taken (:mod:`.timing`). Engine option ``nchwc``: true or
false forces the layout on or off; unset, it is timed (with ``timing=False``: on).
"""
from __future__ import annotations

import hashlib
import logging
from typing import Any

import attrs
import numpy as np

from ..builder.layout import apply_nchwc, clear_nchwc, nchwc_runs, nchwc_tensors
from ..builder.network import Layer, Network
from ..builder.plan import Step
from . import timing, timing_cache
from .choose import _random, choose_tactics
from .timing import best_times

log = logging.getLogger("srcore.trt_like")


@attrs.frozen
class RunChoice:
    """One run of layers that could be NCHW16c: its layers, whether it is, and the two timings
    (seconds; None when forced by the ``nchwc`` option or timing is off)."""

    layers: int
    label: str
    blocked: bool
    blocked_s: float | None = None
    nchw_s: float | None = None

    def describe(self) -> str:
        if self.blocked_s is None:
            times, how = "", "forced"
        else:
            times, how = f": NCHW16c {self.blocked_s * 1e3:.3f} ms, NCHW {self.nchw_s * 1e3:.3f} ms", "timed"
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
    choices = []
    for tensors, layers in runs:
        a = [by_layer[id(layer)] for layer in layers]
        b = [by_layer_b[id(layer)] for layer in layers]
        key = "nchwc:" + hashlib.sha256("|".join(f"{keys[id(layer)]}:{sa.tactic}:{sb.tactic}"
                                                  for layer, sa, sb in zip(layers, a, b)).encode()).hexdigest()[:24]
        known = _parse(cache.lookup(key)) if cache is not None else None
        note = " (timing cache)"
        if known is not None:
            tb, tp = known
        else:
            with timing.watch() as found:
                tb, tp = time_run(net, layers, b, a, shapes)
            kept = timing.trusted(found)
            if cache is not None:   # each layout at its least time over the builds (timing_cache)
                # the evidence is the run's, whichever tactics its layers got: a disturbed layer
                # timing changes them from build to build, and a key naming them never pooled
                # (resnet_small's 18-layer run, 4 builds at load 8-13: timed afresh each time)
                run = "nchwc-run:" + hashlib.sha256("|".join(keys[id(layer)] for layer in layers).encode()).hexdigest()[:24]
                best, builds = cache.merge(run, {"nchwc": tb, "nchw": tp})
                tb, tp = best["nchwc"], best["nchw"]
                kept = kept or builds >= timing_cache.EVIDENCE_BUILDS
            note = "" if kept else " (timed while a core was taken: not cached)"
            if cache is not None and kept:
                cache.store(key, f"{tb!r} {tp!r}")
        keep = tb < tp
        choices.append(RunChoice(len(layers), _label(net, layers, shapes), keep, tb, tp))
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


def _parse(value: str | None) -> tuple[float, float] | None:
    try:
        tb, tp = (float(v) for v in value.split())
        return tb, tp
    except (AttributeError, ValueError):
        return None


def _label(net: Network, layers: list[Layer], shapes: dict[int, tuple]) -> str:
    first, last = layers[0], layers[-1]
    shape = "x".join(map(str, shapes.get(first.outputs[0], net.shape(first.outputs[0]))))
    return f"{first.kind} -> {shape} .. {last.kind}, {first.source or '?'}"

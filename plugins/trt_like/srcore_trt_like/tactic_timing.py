"""Timing candidate tactics on the real shapes, the way the engine builder picks one per layer."""
from __future__ import annotations

import time

import numpy as np

from .errors import TacticSpecError


# Bytes per second at which a layer's weights stream in during a whole-network run. Timing a layer
# on its own leaves its weights in cache; in a network they are not (resnet_small's laid-out weights
# are ~60 MB), and a tactic with larger weights (Winograd's transformed ones: 16/9 or 4x) pays for
# it: measured back to back on this machine, each layer was slower than alone by its weight bytes
# at 10-27 GB/s (resnet's 512-channel 3x3 layer: F(2x2) 2.3 -> 3.4 ms, im2col 2.3 -> 2.65 ms).
WEIGHT_STREAM_BYTES_PER_S = 16e9


def time_tactics(tactics, spec, rounds: int = 3, seed: int = 0,
                 weight_bandwidth: float | None = WEIGHT_STREAM_BYTES_PER_S) -> list[tuple[str, float]]:
    """``[(name, seconds), ...]`` fastest first, each tactic timed on random inputs of ``spec``.

    One warm-up call each (numba cache load, scratch growth), then ``rounds`` rounds in which
    every tactic runs once, the order rotating per round so no tactic always follows the same
    one; a tactic's time is its best round (the least disturbed on a shared machine) plus the time
    its weights take to stream in at ``weight_bandwidth`` bytes/s (``None``: hot timing only; see
    :data:`WEIGHT_STREAM_BYTES_PER_S`). Costs about ``rounds + 1`` calls per tactic.
    """
    if not tactics:
        raise TacticSpecError("time_tactics: no tactics to time")
    names = [t.name for t in tactics]
    if len(set(names)) != len(names):
        raise TacticSpecError(f"time_tactics: tactic names must be unique, got {names}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(spec.x_shape, np.float32)
    out_shape = tactics[0].out_shape
    out = np.empty(out_shape, np.float32)
    residual = rng.standard_normal(out_shape, np.float32) if getattr(spec, "residual", False) else None
    call = (lambda t: t(x, out, residual)) if residual is not None else (lambda t: t(x, out))
    for t in tactics:
        call(t)
    best = [float("inf")] * len(tactics)
    for r in range(max(1, rounds)):
        for k in range(len(tactics)):
            i = (k + r) % len(tactics)
            t0 = time.perf_counter()
            call(tactics[i])
            best[i] = min(best[i], time.perf_counter() - t0)
    if weight_bandwidth:
        best = [b + getattr(t, "weight_bytes", 0) / weight_bandwidth for b, t in zip(best, tactics)]
    return sorted(zip(names, best), key=lambda p: p[1])

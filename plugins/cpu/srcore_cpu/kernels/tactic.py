"""Choosing between kernels by timing them on this machine, at load.

A matcher with two ways to run a node and a static input shape times both on a zero input of that
shape and keeps the faster: interleaved rounds (each candidate once per round, so a slow phase of a
shared machine hits both), each candidate's best round. Used only where the crossover depends on
the machine (e.g. a direct grouped conv against im2col + GEMM at 8-16 channels per group); where
one way wins by an order of magnitude everywhere, the matcher takes it without timing.
"""
from __future__ import annotations

import time


def fastest(candidates: dict, args: tuple, rounds: int = 5, budget_s: float = 0.05):
    """The name of the fastest of ``candidates`` (name -> callable) on ``args``; every candidate runs
    once first (warm-up, and a candidate that raises is dropped). Fewer rounds when one call takes
    more than ``budget_s / rounds``."""
    best = timings(candidates, args, rounds=rounds, budget_s=budget_s)
    return min(best, key=best.get) if best else None


def timings(candidates: dict, args: tuple, rounds: int = 5, budget_s: float = 0.05) -> dict:
    """``{name: best seconds}`` of the candidates that ran (see :func:`fastest`)."""
    best: dict = {}
    for name, fn in candidates.items():
        try:
            t0 = time.perf_counter()
            fn(*args)
            best[name] = time.perf_counter() - t0
        except Exception:  # noqa: BLE001 - a candidate that cannot run this shape is not chosen
            continue
    if len(best) <= 1:
        return best
    rounds = max(1, min(rounds, int(budget_s / max(min(best.values()), 1e-7))))
    for _ in range(rounds):
        for name in list(best):
            t0 = time.perf_counter()
            candidates[name](*args)
            best[name] = min(best[name], time.perf_counter() - t0)
    return best

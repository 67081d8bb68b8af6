"""Winograd tactics on inputs holding NaN or infinity: computed by the direct (im2col) tactic.

Winograd's input transform adds and subtracts the inputs of a whole tile, so one NaN or
infinity reaches every output of its tile (and ``inf - inf`` makes NaNs) where a direct
convolution, and torch, keep it to the outputs whose receptive field holds it. ``max - min``
of the input finds such inputs (not finite exactly then, or when finite extremes overflow,
which only costs the slower path): ~18 us on an 800 KB activation, half of a sum's cost.
"""
from __future__ import annotations

import numpy as np

from .gemm import Im2colGemmTactic


class DirectOnNonFinite:
    """Mixin of the Winograd tactics: ``_keep_direct(weight, bias)`` at construction, then
    ``if self._nonfinite(x): return self._run_direct(x, out, residual)`` first in ``_run``."""

    def _keep_direct(self, weight, bias) -> None:
        # a tuple, not arrays: ``weight_bytes`` counts only the layout the Winograd path reads
        self._direct_args = (np.asarray(weight), bias)
        self._direct = None

    @staticmethod
    def _nonfinite(x) -> bool:
        if x.size == 0:
            return False
        with np.errstate(over="ignore", invalid="ignore"):
            return not np.isfinite(x.max() - x.min())

    def _run_direct(self, x, out, residual) -> None:
        if self._direct is None:   # built on first need (two threads may both build one: harmless)
            self._direct = Im2colGemmTactic(self.spec, *self._direct_args)
        self._direct._run(x, out, residual)

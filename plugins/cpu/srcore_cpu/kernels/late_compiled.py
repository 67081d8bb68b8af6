"""Small nodes: the compiled (numba) kernel or the numpy one, chosen at the first call by timing both.

The compiled kernels' matchers decline nodes below a size floor (``pointwise_match.MIN_ELEMENTS``,
``norm.MIN_ELEMENTS_LAYER_NORM``, ``softmax.MIN_COMPILED``) so that a model made only of small nodes
never imports numba: its cold start stays numpy + scipy. Below the floor the numpy kernel often
still loses to torch, though: a small group norm is ~8 ufunc calls with their temporaries (22 us
against 2.4 compiled on poolformer's (2, 8, 7, 9), torch 5.3; thread CPU time, Sapphire Rapids),
where a one-pass compiled loop costs its call.

So such a node's matcher returns :func:`late` instead of declining: the numpy kernel, with the
compiled one as a candidate. Nothing is imported or compiled at load. At the node's first call
(the load's warm-up run when the module has one; every matcher has run by then, so the order of
the nodes does not matter) numba is looked for in ``sys.modules``: absent (no other node of this
model, nor anything before it, needed it), the numpy kernel is kept for good and the model's cold
start is what it was; present, the compiled kernel is built (numba's on-disk cache) and both are
timed on a sample of the node's static shape (``tactic.fastest`` on the thread's own clock: both
run on the calling thread), and the faster is kept. A failure to build keeps numpy.

``SRCORE_CPU_LATE_COMPILED=0`` keeps the numpy kernels (an A/B of this module).
"""
from __future__ import annotations

import os
import sys
import threading

_lock = threading.Lock()


def numba_loaded() -> bool:
    """Whether numba is imported in this process already (a compiled candidate then costs no import)."""
    return "numba" in sys.modules


def enabled() -> bool:
    return os.environ.get("SRCORE_CPU_LATE_COMPILED", "1") != "0"


def late(numpy_kernel, build, sample, what: str = ""):
    """``kernel(*args, **kw)``: ``numpy_kernel`` until its first call, which chooses for good between
    it and the compiled kernel ``build()`` returns (a callable of the same signature, or None), timed
    on ``sample()``'s arguments when numba is already imported (the module doc); ``kernel.chosen``
    is then the one kept and ``kernel.tactic`` ``"numpy"`` or ``"compiled"`` (None before)."""
    if not enabled():
        return numpy_kernel
    chosen = None

    def choose():
        nonlocal chosen
        with _lock:
            if chosen is None:
                fn, tactic = numpy_kernel, "numpy"
                if numba_loaded():
                    fn, tactic = _timed(numpy_kernel, build, sample)
                kernel.tactic, kernel.chosen = tactic, fn
                chosen = fn
        return chosen

    def kernel(*args, **kw):
        return (chosen or choose())(*args, **kw)
    kernel.chosen = kernel.tactic = None
    kernel.what = what
    kernel.choose = choose
    return kernel


def _timed(numpy_kernel, build, sample):
    from . import tactic as _tactic

    try:
        compiled = build()
        if compiled is None:
            return numpy_kernel, "numpy"
        args = sample()
        # the thread's own clock at any thread count: both run on the calling thread alone (a small
        # node splits nowhere), and the wall clock's retries of a disturbed loser pause up to 0.135 s
        name = _tactic.fastest({"numpy": numpy_kernel, "compiled": compiled}, args, clock="cpu")
    except Exception:  # noqa: BLE001 - a compiled kernel that cannot be built or run here: numpy's stays
        return numpy_kernel, "numpy"
    return (compiled, "compiled") if name == "compiled" else (numpy_kernel, "numpy")

"""The cyclic garbage collector paused while srcore loads (imports its modules, reads a model, builds a
StaticModule).

A load allocates tens of thousands of objects (module bodies, attrs classes, the IR, the registry), and
CPython runs a collection every 700 net allocations: ~20 young and one middle-generation collection on a
small model's cold start, each walking objects numpy's import left behind, ~2-4 ms CPU of it on the Intel
VM of docs/performance.md (benchmarks.cold_start_ab). A load makes little cyclic garbage, so pausing
costs nothing: the collector is disabled for the outermost load in progress (nested and concurrent loads
share the pause) and enabled again when the last one ends, only if it was enabled when the first began
(a program that disabled it keeps it disabled). When it ends, what the load allocated is moved to the
oldest generation (``gc.freeze(); gc.unfreeze()``, unless the program froze objects of its own): it is
long-lived, and a young collection walking all of it right after the pause cost ~1-1.5 ms more (cyclic
garbage among it waits for a full collection). ``SRCORE_NO_GC_PAUSE=1`` turns the pause off,
``SRCORE_NO_GC_PROMOTE=1`` only the move.
"""
from __future__ import annotations

import gc
import os
import threading

__all__ = ["paused"]

_lock = threading.Lock()
_state = {"depth": 0, "disabled": False}
_ON = os.environ.get("SRCORE_NO_GC_PAUSE", "") in ("", "0")
_PROMOTE = _ON and os.environ.get("SRCORE_NO_GC_PROMOTE", "") in ("", "0")


class paused:
    """``with paused(): ...``: the cyclic collector off inside (see the module's docstring)."""

    __slots__ = ()

    def __enter__(self) -> None:
        with _lock:
            if _state["depth"] == 0 and _ON and gc.isenabled():
                gc.disable()
                _state["disabled"] = True
            _state["depth"] += 1

    def __exit__(self, *exc) -> None:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["disabled"]:
                _state["disabled"] = False
                if _PROMOTE and gc.get_freeze_count() == 0:   # (a program's own frozen objects stay frozen)
                    # what the load allocated (modules, classes, the registry, the model: long-lived) joins
                    # the oldest generation at once, as surviving two collections would have put it, instead
                    # of a young collection right after walking all of it (O(1): two list splices)
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()

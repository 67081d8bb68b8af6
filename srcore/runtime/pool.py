"""``RuntimePool``: thread-safe inference with one runtime per concurrent caller (the seed's Mode 2)."""
from __future__ import annotations

import operator
import queue
import threading


class RuntimePool:
    """At most ``size`` runtimes of one StaticModule, lent to callers one at a time.

    ``pool.run(x)`` (or ``pool(x)``) borrows a free runtime (creating one while fewer than
    ``size`` exist, else waiting for one), runs, and gives it back. Safe to call from any
    number of threads; at most ``size`` runs happen at once.
    """

    def __init__(self, module, size: int = 8):
        try:
            n = None if isinstance(size, bool) else operator.index(size)   # ints, numpy ints
        except TypeError:
            n = None
        if n is None or n < 1:
            from ..errors import SrcoreError

            raise SrcoreError(f"RuntimePool size must be a whole number >= 1, got {size!r}")
        size = n
        self.module = module
        self.size = size
        self._free: queue.LifoQueue = queue.LifoQueue()
        self._created = 0
        self._lock = threading.Lock()

    def _borrow(self):
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._created < self.size:
                self._created += 1
                return self._new()
        return self._free.get()

    def _new(self):
        from .static_runtime import StaticRuntime

        return StaticRuntime(self.module)

    def run(self, *args, **kwargs):
        """Run the model on a pooled runtime."""
        rt = self._borrow()
        try:
            return rt(*args, **kwargs)
        finally:
            self._free.put(rt)

    __call__ = run

    @property
    def runtimes_created(self) -> int:
        return self._created

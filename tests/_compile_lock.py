"""pytest plugin: pytest-xdist workers take turns compiling a numba kernel, so the second loads the
first's machine code from numba's on-disk cache instead of compiling it again (docs/testing.md).

Every cached kernel (``cache=True``) is compiled once per cold cache and loaded from disk afterwards:
numba writes its cache files atomically, and a process that compiles a signature first looks in
the cache. But two workers that need the same kernel at the same moment (the first minutes of a
cold pass, when each starts a module that builds trt_like engines or conv kernels) both miss the
cache and both compile it: 2-15 s of CPU each, on a 2-core machine the other worker's share. Here a
worker compiling a cached kernel first holds a lock file named after the kernel (under the
session's cache root, which every worker shares); a worker that asks for the same kernel meanwhile
waits, then finds the first one's code in the cache and loads it.

Only the outermost compile of a thread takes a lock (the kernels it calls compile inside it), so a
thread holds at most one lock and never waits for one while holding another; a wait is bounded
(:data:`WAIT_S`), after which the worker compiles anyway. Kernels numba does not cache (no
``cache=True``) are compiled by each process in any case and take no lock.
"""
from __future__ import annotations

import errno
import hashlib
import os
import threading
import time
from pathlib import Path

try:
    import fcntl
except ImportError:   # not POSIX: no locks (each worker compiles what it misses, as before)
    fcntl = None

#: the longest a worker waits for another's compile of the same kernel before compiling it itself
WAIT_S = 180.0
_POLL_S = 0.05

_local = threading.local()
_installed = False


def _lock_path(root: Path, dispatcher) -> Path | None:
    fn = dispatcher.py_func
    cache = getattr(dispatcher, "_cache", None)
    if cache is None or type(cache).__name__ == "NullCache":
        return None
    key = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
    return root / (hashlib.sha1(key.encode()).hexdigest()[:24] + ".lock")


def _acquire(path: Path) -> int | None:
    """An open descriptor holding ``path``'s exclusive lock, or None (no lock: compile anyway)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                os.close(fd)
                return None
        time.sleep(_POLL_S)


def _compiled(dispatcher, sig) -> bool:
    """Whether ``dispatcher`` holds ``sig`` already (``compile`` returns it at once: no lock)."""
    try:
        from numba.core import sigutils

        args, _ = sigutils.normalize_signature(sig)
        return tuple(args) in dispatcher.overloads
    except Exception:   # numba's own compile reports a bad signature
        return False


def install(root: Path) -> None:
    """Wrap numba's ``Dispatcher.compile`` to take the kernel's lock under ``root`` (once per process)."""
    global _installed
    if _installed or fcntl is None:
        return
    _installed = True
    root.mkdir(parents=True, exist_ok=True)
    from numba.core import dispatcher as numba_dispatcher

    original = numba_dispatcher.Dispatcher.compile

    def compile(self, sig):
        depth = getattr(_local, "depth", 0)
        path = _lock_path(root, self) if depth == 0 and not _compiled(self, sig) else None
        fd = _acquire(path) if path is not None else None
        _local.depth = depth + 1
        try:
            return original(self, sig)   # looks in the on-disk cache first: the other worker's code
        finally:
            _local.depth = depth
            if fd is not None:
                os.close(fd)   # (closing releases the lock)

    compile.__wrapped__ = original
    numba_dispatcher.Dispatcher.compile = compile

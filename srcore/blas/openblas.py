"""numpy's OpenBLAS held at one thread while a backend's region runs, shared by every plugin.

A backend that runs its own threads (the cpu plugin's part pool, trt_like's OpenMP tactics) keeps
numpy's BLAS calls inside its regions on the calling thread: a threaded OpenBLAS call leaves its
worker spinning ~0.1 s on the core the backend's team needs (docs/performance-log.md, "The cpu
plugin's three pools"). In numpy's pthreads OpenBLAS the count is the process's
(``openblas_set_num_threads``; ``openblas_set_num_threads_local`` too, see :func:`_per_thread`), so
regions that overlap (two threads, two plugins, a nested region) share one hold: the first in saves
the count and sets 1, the last out restores it, and :func:`user_threads` reports the saved count
meanwhile (a module loaded meanwhile on another thread still sees the user's setting).

One hold per process for all plugins: with one each (the cpu plugin's and trt_like's until
2026-11-28) the second plugin in saved the first one's 1, the first out restored the user's count
under the second's region, and the second out then left numpy's BLAS on one thread for the rest of
the process. Where OpenBLAS's count is per thread (its OpenMP builds) each region sets and restores
its own thread's count instead.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading

_lock = threading.Lock()
_hold = {"depth": 0, "saved": 1}   # the process-wide hold: regions inside, the count saved by the first
_fns: dict = {}                     # controller -> _Count
_looked: list = []                  # [numpy's BLAS controller or None], looked up once


def controller():
    """numpy's BLAS library controller, or None when it cannot be told apart: numpy's bundled OpenBLAS
    opened by its path (:class:`BundledOpenBLAS`), else threadpoolctl's controller of it."""
    if not _looked:
        ctl = bundled_openblas()
        if ctl is None:
            try:
                import numpy  # noqa: F401 - its BLAS must be loaded for threadpoolctl to see it
                from threadpoolctl import ThreadpoolController

                libs = ThreadpoolController().select(user_api="blas").lib_controllers
                # numpy's own (scipy and torch may load others); one unnamed library is numpy's too
                ours = [c for c in libs if "numpy" in (c.filepath or "")] or (libs if len(libs) == 1 else [])
                ctl = ours[0] if len(ours) == 1 else None
            except Exception:  # threadpoolctl missing or unable to inspect: no BLAS control
                ctl = None
        _looked.append(ctl)
    return _looked[0]


class BundledOpenBLAS:
    """numpy's own OpenBLAS (the ``numpy.libs`` copy its wheels ship), opened by its path: the members
    of threadpoolctl's OpenBLAS controller this module and the plugins use (``filepath``,
    ``threading_layer``, ``num_threads``, ``set_num_threads``, ``_get_symbol``).

    Why not threadpoolctl here: importing it and scanning the process's libraries cost ~5 ms of every
    cold start whose kernels ask for numpy's BLAS count (docs/performance-log.md, "Cold start"), for
    a library whose path and symbol names are known. Anything else (another BLAS, another platform,
    numpy built against a system library) still goes through threadpoolctl."""

    #: how OpenBLAS builds name their symbols (``scipy_openblas_get_num_threads64_`` in numpy's wheels)
    PREFIXES = ("", "scipy_")
    SUFFIXES = ("", "64_", "_64")

    def __init__(self, filepath: str, dynlib, prefix: str, suffix: str):
        self.filepath = filepath
        self.dynlib = dynlib
        self._affix = (prefix, suffix)
        parallel = self._get_symbol("openblas_get_parallel")
        layer = parallel() if parallel is not None else None
        self.threading_layer = {0: "disabled", 1: "pthreads", 2: "openmp"}.get(layer, "unknown")

    def _get_symbol(self, name: str):
        return getattr(self.dynlib, f"{self._affix[0]}{name}{self._affix[1]}", None)

    @property
    def num_threads(self) -> int | None:
        fn = self._get_symbol("omp_get_max_threads" if self.threading_layer == "openmp"
                              else "openblas_get_num_threads")
        return None if fn is None else fn()

    def set_num_threads(self, n: int) -> None:
        fn = self._get_symbol("omp_set_num_threads" if self.threading_layer == "openmp"
                              else "openblas_set_num_threads")
        if fn is not None:
            fn(n)


def bundled_openblas() -> BundledOpenBLAS | None:
    """numpy's bundled OpenBLAS if this process has exactly one mapped from numpy's ``numpy.libs``
    directory (Linux: ``/proc/self/maps``) and it answers ``openblas_get_num_threads``, else None."""
    try:
        import numpy

        libs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__))), "numpy.libs")
        with open("/proc/self/maps") as f:
            paths = {fields[5].strip() for fields in (line.split(None, 5) for line in f if "openblas" in line)
                     if len(fields) == 6}
        ours = [p for p in paths if os.path.dirname(p) == libs and "openblas" in os.path.basename(p)]
        if len(ours) != 1:
            return None
        dynlib = ctypes.CDLL(ours[0], mode=os.RTLD_NOLOAD)   # the copy numpy loaded, not a second one
    except Exception:   # no /proc, no RTLD_NOLOAD, not loaded: threadpoolctl decides
        return None
    for prefix in BundledOpenBLAS.PREFIXES:
        for suffix in BundledOpenBLAS.SUFFIXES:
            if hasattr(dynlib, f"{prefix}openblas_get_num_threads{suffix}"):
                return BundledOpenBLAS(ours[0], dynlib, prefix, suffix)
    return None


#: OpenBLAS's thread-count variables in the order it reads them (``blas_get_cpu_number``): the first
#: set to a positive count wins (``GOTO_NUM_THREADS`` only when ``OPENBLAS_NUM_THREADS`` is not)
_ENV_CHAIN = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _env_count(env) -> int | None:
    """The count OpenBLAS starts with under ``env`` (a str -> str mapping) when a variable of
    :data:`_ENV_CHAIN` sets it, else None (odd values, which OpenBLAS reads with ``atoi``, too)."""
    for name in _ENV_CHAIN:
        value = env.get(name, "").strip()
        if not value:
            continue
        try:
            n = int(value)
        except ValueError:
            return None
        if n > 0:
            return n
    return None


def started_on_one_thread() -> bool:
    """Whether numpy's BLAS is OpenBLAS that the environment started on one thread and nothing has
    touched since: then its count is 1 without looking the library up (:func:`controller`: ~0.5 ms for
    numpy's bundled OpenBLAS, ~5 ms through threadpoolctl for any other) for a load that only asks
    "more than one?".

    "Started on one": both the process's environment as it began (``/proc/self/environ``) and as it is
    now (``os.environ``) say 1, so it does not matter whether the variables changed before numpy loaded
    OpenBLAS or after. "Not touched": no controller was used here (no lookup, no region) and
    threadpoolctl is not imported (``threadpool_limits`` changes the count through it). Any doubt
    (another BLAS, no ``/proc``, an odd value) answers False: the caller asks threadpoolctl as before."""
    import sys

    if _looked or _fns or _hold["depth"] or "threadpoolctl" in sys.modules:
        return False
    if _env_count(os.environ) != 1:
        return False
    if not _started:
        _started.append(_started_on_one())
    return _started[0]


_started: list = []   # _started_on_one()'s answer: the build and the start environment do not change


def _started_on_one() -> bool:
    """numpy's BLAS is OpenBLAS and the process's environment as it began said 1 thread."""
    try:
        from numpy.__config__ import CONFIG  # numpy 2 (imported with numpy): what it was built with

        if "openblas" not in str(CONFIG["Build Dependencies"]["blas"]["name"]).lower():
            return False
        with open("/proc/self/environ", "rb") as f:
            start = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    except Exception:
        return False
    return _env_count({k.decode("latin-1"): v.decode("latin-1") for k, v in start.items()
                       if k.decode("latin-1") in _ENV_CHAIN}) == 1


class _Count:
    """How to read and set ``ctl``'s count: OpenBLAS's own entry points through ctypes
    (threadpoolctl's ``set_num_threads`` costs ~2 us in Python, paid twice by every region) where it
    has them, else threadpoolctl's public calls; ``local`` is ``openblas_set_num_threads_local``
    when it sets the calling thread's count only (else None: the process-wide hold)."""

    def __init__(self, ctl):
        get = set_ = set_local = None
        try:
            get = ctl._get_symbol("openblas_get_num_threads")
            set_ = ctl._get_symbol("openblas_set_num_threads")
            set_local = ctl._get_symbol("openblas_set_num_threads_local")
        except Exception:  # another threadpoolctl or BLAS: its public calls
            pass
        if get is None or set_ is None or getattr(ctl, "threading_layer", "pthreads") == "openmp":
            self.get, self.set = (lambda: ctl.num_threads), ctl.set_num_threads
        else:
            get.restype, set_.argtypes, set_.restype = ctypes.c_int, [ctypes.c_int], None
            self.get, self.set = get, set_
        self.local = None
        if set_local is not None:
            set_local.argtypes, set_local.restype = [ctypes.c_int], ctypes.c_int
            if _per_thread(set_local):
                self.local = set_local


def _per_thread(set_local) -> bool:
    """Whether ``set_local`` sets the calling thread's count only (OpenBLAS's OpenMP builds) or, as in
    numpy's pthreads OpenBLAS (0.3.31: a helper thread's ``openblas_set_num_threads_local(1)`` left
    every numpy GEMM of the process on one thread), the process's: set in a helper thread, read back
    in this one."""
    mine = set_local(1)
    helper = threading.Thread(target=lambda: set_local(2))
    helper.start()
    helper.join()
    now = set_local(mine)
    return now == 1


def _count(ctl) -> _Count:
    c = _fns.get(ctl)
    if c is None:
        c = _fns[ctl] = _Count(ctl)
    return c


def enter(ctl=None):
    """numpy's BLAS (``ctl``, default :func:`controller`) on one thread for a region of this thread;
    returns the token for :func:`leave` (nothing happens without a controller)."""
    ctl = controller() if ctl is None else ctl
    if ctl is None:
        return None
    c = _count(ctl)
    if c.local is not None:
        return c.local(1)
    with _lock:
        if _hold["depth"] == 0:
            _hold["saved"] = max(1, int(c.get() or 1))
            if _hold["saved"] != 1:
                c.set(1)
        _hold["depth"] += 1
    return None


def leave(token, ctl=None) -> None:
    """End the region :func:`enter` began (``token`` its return)."""
    ctl = controller() if ctl is None else ctl
    if ctl is None:
        return
    c = _count(ctl)
    if c.local is not None:
        c.local(token)
        return
    with _lock:
        _hold["depth"] -= 1
        if _hold["depth"] == 0 and _hold["saved"] != 1:
            c.set(_hold["saved"])


def held_count():
    """The user's count saved while a region holds the process's count at 1, else None."""
    with _lock:
        return _hold["saved"] if _hold["depth"] else None


def user_threads(ctl=None) -> int:
    """numpy's BLAS thread count as the user set it, also while a region holds it at one (1 without
    a controller)."""
    ctl = controller() if ctl is None else ctl
    if ctl is None:
        return 1
    held = held_count()
    return max(1, int((held if held is not None else _count(ctl).get()) or 1))


@contextlib.contextmanager
def one_thread(ctl=None):
    """numpy's BLAS on one thread inside (a region: :func:`enter` / :func:`leave`)."""
    token = enter(ctl)
    try:
        yield
    finally:
        leave(token, ctl)


def on_caller(fn, ctl=None):
    """``fn`` with numpy's BLAS on one thread while it runs (a region), or ``fn`` itself without a
    controller. Keeps ``fn``'s attributes (a kernel's ``weight_bytes``, ``blas``, ...)."""
    ctl = controller() if ctl is None else ctl
    if ctl is None:
        return fn

    def held(*args, **kwargs):
        token = enter(ctl)
        try:
            return fn(*args, **kwargs)
        finally:
            leave(token, ctl)
    try:
        functools.update_wrapper(held, fn)
    except (AttributeError, TypeError):   # (a builtin without some attributes)
        held.__wrapped__ = fn
    # the unwrapped kernel, for a caller that holds one region around many such kernels (an engine
    # call: one enter / leave instead of ~2.2 us per layer)
    held.blas_held = fn
    return held


def _after_fork():
    # the parent's regions are not the child's (and a thread in one may have held the lock): the child
    # starts with no hold, its count whatever OpenBLAS has now
    global _lock
    _lock = threading.Lock()
    _hold.update(depth=0, saved=1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

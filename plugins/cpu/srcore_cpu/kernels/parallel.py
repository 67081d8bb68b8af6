"""Intra-op parallelism for the conv and pool kernels: a small persistent thread pool.

A kernel splits its work into ``T`` independent parts (output rows, output
channels) and calls :func:`run_parts`; the caller and ``T - 1`` persistent
worker threads (srcore.conv's team, :mod:`srcore.conv.team`) claim the parts one
at a time, so the caller never waits for a worker that has not started. numpy releases the GIL in its loops and
BLAS calls on large arrays, so the parts run on separate cores.

While the parts run, OpenBLAS is set to one thread (and put back after), so
the parts' GEMMs do not compete for OpenBLAS's workers. numpy's OpenBLAS count is
process-wide (``openblas_set_num_threads``), so overlapping part runs (pools of
runtimes on other threads) share one hold: the first in saves the count and sets
1, the last out restores it, and :func:`blas_threads` reports the saved count
meanwhile (a module loaded on another thread then still sees the user's setting); that hold is the
core's (``srcore.plugin.openblas``), shared with trt_like's regions. That does not stop a
worker still spinning after an earlier threaded call, which is the likely
reason a split measured slower in a process that also runs 2-thread BLAS
calls (docs/performance.md, "Thread scaling work").

``T`` is fixed when a kernel is built (the matcher, i.e. at module load):
:func:`split_threads`, ``SRCORE_CPU_THREADS`` (default 1: splitting is opt-in,
see its docstring). At ``T == 1`` kernels never come here, so one thread costs
nothing. :func:`blas_threads` (the BLAS thread count at load) lets a kernel
pick the algorithm that scales with BLAS threads instead.

One pool per process, used by one caller at a time: a call that finds it busy
(another runtime on another thread, or a nested call) runs its parts one after
the other on its own thread, in the same partition, so results do not depend
on who got the pool.
"""
from __future__ import annotations

import _thread
import contextlib
import os
import threading

_ENV = "SRCORE_CPU_THREADS"


def _blas_controller():
    """numpy's BLAS library controller (threadpoolctl), or None when it cannot be told apart."""
    return _openblas().controller()


_core: list = []


def _openblas():
    # the one process-wide hold of numpy's OpenBLAS at one thread, shared with trt_like (srcore.blas.openblas)
    if not _core:
        from srcore.plugin import openblas

        _core.append(openblas)
    return _core[0]


def _count_fns(ctl):
    """``(get, set)`` of ``ctl``'s count (OpenBLAS's own entry points where it has them)."""
    c = _openblas()._count(ctl)
    return c.get, c.set


def _blas_one_thread_enter(ctl):
    return _openblas().enter(ctl)


def _blas_one_thread_exit(ctl, token=None) -> None:
    _openblas().leave(token, ctl)


@contextlib.contextmanager
def one_blas_thread():
    """numpy's BLAS held at one thread inside (as during a part run; nested holds share one): a
    load-time probe that must not wake OpenBLAS's worker."""
    ctl = _blas_controller()
    if ctl is None:
        yield
        return
    token = _blas_one_thread_enter(ctl)
    try:
        yield
    finally:
        _blas_one_thread_exit(ctl, token)


_ON_CALLER_ENV = "SRCORE_CPU_THREADED_BLAS"


def blas_on_caller() -> bool:
    """Whether kernels built now run numpy's BLAS on the calling thread alone outside the part pool
    (:func:`on_caller`): at more than one intra-op thread, unless ``SRCORE_CPU_THREADED_BLAS=1``.

    One team: a threaded OpenBLAS call leaves OpenBLAS's worker spinning ~0.1 s on the second core,
    and one such call per model call (an unsplit Winograd conv, a product timed faster on threaded
    BLAS at load) kept it spinning through every call, beside the part pool's worker: the cpu plugin
    at 2 threads then ran three busy threads on two cores (resnet_small: the caller 419 ms of CPU a
    second, OpenBLAS's worker 415, the part pool's 52; docs/performance-log.md, "The cpu plugin's
    three pools"). With this the second core is the part pool's alone."""
    return intra_op_threads() > 1 and os.environ.get(_ON_CALLER_ENV, "0") != "1"


def on_caller(fn):
    """``fn`` with numpy's BLAS held at one thread while it runs (nested and concurrent holds share
    one, as the part pool's: :func:`one_blas_thread`), or ``fn`` itself without a BLAS controller."""
    ctl = _blas_controller()
    return fn if ctl is None else _openblas().on_caller(fn, ctl)


def blas_threads() -> int:
    """numpy's BLAS thread count as the user set it (1 without a controller), also while a
    part run holds OpenBLAS at one thread. Kernels read it at load."""
    if _openblas().started_on_one_thread():   # the environment's 1, without looking the library up
        return 1
    ctl = _blas_controller()
    return 1 if ctl is None else _openblas().user_threads(ctl)


#: how long OpenBLAS's idle worker spins after a threaded call before it sleeps (its
#: ``THREAD_TIMEOUT``, 2^28 TSC cycles: ~0.1 s at 2-3 GHz), a little more
BLAS_SPIN_S = 0.12
_last_threaded_blas = [float("-inf")]   # time.monotonic() of the last threaded BLAS timing here


def note_threaded_blas() -> None:
    """A load-time timing has just run numpy's BLAS on more than one thread: its idle worker now
    spins on a core for :data:`BLAS_SPIN_S` (see :func:`wait_blas_idle`)."""
    import time

    if blas_on_caller():   # (nothing timed here woke it: the candidates' BLAS ran on the caller)
        return
    _last_threaded_blas[0] = time.monotonic()


def wait_blas_idle() -> None:
    """Sleep until OpenBLAS's worker, woken by a threaded call timed here
    (:func:`note_threaded_blas`), has gone to sleep: a part-pool candidate timed right after it
    would be charged that spin, which a module whose products all run on the part pool (OpenBLAS
    then held at one thread, its worker never woken) does not see."""
    import time

    left = _last_threaded_blas[0] + BLAS_SPIN_S - time.monotonic()
    if left > 0:
        time.sleep(left)


def split_threads() -> int:
    """How many parts a kernel built now splits its work into: ``SRCORE_CPU_THREADS``, default 1.

    Opt-in: on resnet_small splitting measured no faster than leaving the second core to
    OpenBLAS (docs/performance.md, "Thread scaling work"): once any 2-thread BLAS call has run,
    OpenBLAS's worker spins for ~0.1 s on the core a part needs.
    """
    env = os.environ.get(_ENV)
    try:
        n = int(env) if env else 1
    except ValueError:
        n = 1
    return max(1, min(n, os.cpu_count() or 1, 64))


def intra_op_threads() -> int:
    """The threads a kernel built now may split over when its own timing says the split pays:
    ``SRCORE_CPU_THREADS`` when set, else numpy's BLAS thread count (``OMP_NUM_THREADS`` /
    ``OPENBLAS_NUM_THREADS``, threadpoolctl limits), i.e. the process's intra-op thread setting.
    Unlike :func:`split_threads` this is for kernels that time the split against one thread at
    load (``pointwise_match.py``): at 1 thread they never time or split."""
    if os.environ.get(_ENV):
        return split_threads()
    return max(1, min(blas_threads(), os.cpu_count() or 1, 64))


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]``: ``range(n)`` in ``parts`` contiguous pieces, sizes differing by at most 1."""
    q, r = divmod(n, parts)
    out, lo = [], 0
    for i in range(parts):
        hi = lo + q + (i < r)
        out.append((lo, hi))
        lo = hi
    return out


class PartPool:
    """Runs ``fn(0..parts-1)`` on the calling thread and ``T - 1`` workers (srcore.conv's team,
    :mod:`srcore.conv.team`, shared with trt_like's split convs), each thread claiming the next part:
    the caller never waits for a worker that has not started (a fixed part per worker made every
    2-thread call wait for its own late thread on the loaded 2-vCPU Sapphire Rapids VM). One run at a
    time: a second caller, or a nested run, runs its parts itself."""

    def __init__(self, threads: int):
        self.threads = threads
        self.busy = _thread.allocate_lock()
        self._team = _team(threads)

    def run(self, fn, parts: int) -> None:
        if parts <= 1 or not self.busy.acquire(False):
            for i in range(parts):
                fn(i)
            return
        try:
            ctl = _blas_controller()
            token = _blas_one_thread_enter(ctl) if ctl is not None else None
            try:
                self._team.run(fn, parts)
            finally:
                if ctl is not None:
                    _blas_one_thread_exit(ctl, token)
        finally:
            self.busy.release()


_TEAM_ENV = "SRCORE_CPU_OMP_TEAM"


def _team(threads: int):
    """The team the part pool's parts run on: srcore.conv's Python team, or with
    ``SRCORE_CPU_OMP_TEAM=1`` numba's OpenMP team (:mod:`srcore.conv.omp_team`) where numba runs on
    GNU OpenMP. Off by default: beside OpenBLAS's spinning worker (a threaded numpy product in the
    call) its barrier waited for a descheduled thread (docs/performance-log.md, "The cpu plugin's
    three pools")."""
    from srcore.plugin import conv_team

    if os.environ.get(_TEAM_ENV, "0") == "1":
        from srcore.plugin import omp_team

        if omp_team.available():
            return omp_team.team(threads)
    return conv_team.team(threads)


_pool: PartPool | None = None
_pool_lock = threading.Lock()


def get_pool(threads: int) -> PartPool:
    """The process's pool, grown to at least ``threads`` threads."""
    global _pool
    p = _pool
    if p is not None and p.threads >= threads:
        return p
    with _pool_lock:
        if _pool is None or _pool.threads < threads:
            _pool = PartPool(threads)   # an old, smaller pool's workers just stay idle
        return _pool


def run_parts(fn, parts: int, threads: int) -> None:
    """Run ``fn(i)`` for ``i in range(parts)``, up to ``threads`` at a time (see the module doc)."""
    if threads <= 1 or parts <= 1:
        for i in range(parts):
            fn(i)
        return
    get_pool(threads).run(fn, parts)


def run_bound(run, threads: int, split_fill: bool = True) -> None:
    """A bound conv call of ``srcore.conv`` (``SimdDirectConv.bind``: ``images``, ``channels``,
    ``tasks``, ``fill(n, c0, c1)``, ``run_tasks(n, t0, t1)``) with its tasks split in ``threads``
    contiguous ranges on this pool, claimed by its threads: ``srcore.conv``'s own split until 2026-11-28
    (``run_bound`` there) hands every range to a ``ThreadPoolExecutor`` and waits, which on the
    2-vCPU Sapphire Rapids VM under load made resnet_small's 3x3 convs 1.04-1.14x slower than one
    thread, this 0.58-0.70x (docs/performance.md). Where a task range is a band of output rows
    (``task_rows``, a ``DirectRun``'s), each part copies the input rows its band reads itself
    (``fill_rows``) before its tasks: the copy is split too, not made whole on the caller first (10-30 %
    of a conv on one thread, and all of it waited for: detection_head's layers on the AMD EPYC). Where
    every task reads every row (weights inner: large weights on small planes), each thread that runs a
    part makes the whole copy in a buffer of its own once (``own_copy``): twice the copying, at once,
    and each part then reads its copy from its own core's cache, not the caller's fresh one from the
    other core's (resnet_small's 28x28-8x8 layers: 0.83-0.98x the time, loaded; performance-log.md).
    ``split_fill=False`` copies on the caller, as before (:func:`split_fill`)."""
    bands = split_fill and threads > 1 and getattr(run, "task_units", 0) > 0
    for n in range(run.images):
        tasks = run.tasks
        if threads <= 1 or tasks < 2 * threads:
            run.fill(n, 0, run.channels)
            run.run_tasks(n, 0, tasks)
        elif bands:
            per = run.task_units
            units = -(-tasks // per)
            parts = min(threads, units)
            cuts = [min(tasks, units * i // parts * per) for i in range(parts + 1)]

            def part(i, n=n, cuts=cuts):
                t0, t1 = cuts[i], cuts[i + 1]
                run.fill_rows(n, *run.task_rows(t0, t1))
                run.run_tasks(n, t0, t1)
            run_parts(part, parts, threads)
        elif split_fill and hasattr(run, "own_copy"):
            copies = {}

            def part(i, n=n, copies=copies):
                me = _thread.get_ident()
                xq = copies.get(me)
                if xq is None:
                    xq = copies[me] = run.own_copy(n)
                run.run_tasks_on(xq, n, tasks * i // threads, tasks * (i + 1) // threads)
            run_parts(part, threads, threads)
        else:
            run.fill(n, 0, run.channels)
            run_parts(lambda i, n=n: run.run_tasks(n, tasks * i // threads, tasks * (i + 1) // threads),
                      threads, threads)


def split_fill() -> bool:
    """Whether a conv built now lets :func:`run_bound`'s parts copy their own input rows
    (``SRCORE_CPU_SPLIT_FILL=0``: no, the caller copies the whole input first, as before 2026-11-29;
    an A/B switch read at load, ``families_ab``'s runner suffix ``+nosplitfill``)."""
    return os.environ.get("SRCORE_CPU_SPLIT_FILL", "1") != "0"


def _after_fork():
    # the workers do not exist in a forked child: start a new pool there when needed
    # (the BLAS hold resets itself: srcore.blas.openblas)
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

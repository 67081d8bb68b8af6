"""Intra-op threads for the numba tactics: numba's ``parallel=True`` on the GNU OpenMP layer.

* **Which layer.** ``omp`` (or ``tbb``): both accept parallel launches from several Python
  threads at once (a ``RuntimePool`` calling one engine), unlike ``workqueue``, which aborts.
  :func:`threads` asks numba for OpenMP before its parallel backend starts and checks what it
  got; with ``workqueue`` every tactic stays on one thread.
* **How many.** The intra-op thread count is what numpy's BLAS is set to when a tactic is
  built (``OPENBLAS_NUM_THREADS``, ``threadpoolctl.threadpool_limits``), as for the cpu
  backend's BLAS calls, at most ``NUMBA_NUM_THREADS``. A tactic built for one thread never
  launches a parallel region (no cost at 1 thread).
* **Per call.** numba's thread count is per calling thread; :func:`use` sets it (once per
  Python thread and count) before a tactic launches its region. A region's work is split by
  iteration index, not by the team size, so results do not depend on the team actually
  running it.

GNU OpenMP workers spin a little after each region (``GOMP_SPINCOUNT``), so the layers of one
engine call, microseconds apart, find them awake. OpenBLAS's own (pthreads) workers spin far
longer after a threaded call (``OPENBLAS_THREAD_TIMEOUT``, ~0.1 s), on the core the OpenMP team
needs: a 2-thread OpenBLAS GEMM alternating with a 2-thread packed conv took 9.1 ms a pair
instead of 2.1. So a conv tactic built for more than one thread that calls numpy's BLAS runs
it on the calling thread (:func:`on_caller`: OpenBLAS's count at 1 for the call, which in numpy's
pthreads build is the process's count, so it is held by the first thread in and restored by the
last one out: the core's one hold, ``srcore.plugin.openblas``, shared with the cpu plugin), and so does every
other candidate of an engine with such layers (``tactics._blas_on_caller``): the engine's
threads are OpenMP's alone (MKL's GNU layer, when installed, is the same libgomp pool).
"""
from __future__ import annotations

import ctypes
import os
import threading
import time

import numba
from srcore.plugin import openblas

_state: dict = {}
_lock = threading.Lock()
_tls = threading.local()

#: GNU OpenMP's workers spin this many ``pause`` loops after a region before they sleep (libgomp's
#: ``GOMP_SPINCOUNT``; ~0.7 ms on the 2-vCPU Sapphire Rapids VM, where 1,000 loops take ~23 us)
SPIN_COUNT = 30_000

# GNU OpenMP's workers (numba's parallel regions, MKL's GNU layer) spin after a region before they
# sleep: by default 300,000 loops (milliseconds). When other processes want the cores, a spinning
# worker takes the slice its master needs and every region waits for a descheduled thread:
# transformer_block at 2 threads on a loaded 2-vCPU machine took 170-440 ms a call with the default
# policy, 10-120 ms with workers that sleep at once (1 thread: 27 ms). But a worker that sleeps at
# once is woken by a futex for every region, tens to hundreds of microseconds late: a region of
# 2 x 16 us took 0.57x of one thread, 2 x 65 us 1.20x (GOMP_SPINCOUNT=0); spinning 10,000 loops
# 1.79x and 1.72x (Sapphire Rapids VM, high-priority autogroup, 2026-11-27). SPIN_COUNT covers the
# gaps between an engine call's regions (bert_encoder's split GEMMs: ~0.4 ms of softmax, attention
# products and permutes between them, where 10,000 loops let the worker fall asleep) and ends soon
# after the call (libgomp drops the spin to 1,000 loops by itself when it manages more threads than
# there are CPUs, a RuntimePool's). Unless the user chose a policy; libgomp reads both variables
# when it is first loaded (by numba's parallel layer or MKL, after this).
def wait_policy(environ) -> None:
    """Set libgomp's wait policy and spin count in ``environ`` (``os.environ`` at import) unless the user
    chose a policy (a spin count of the user's own is kept)."""
    if "OMP_WAIT_POLICY" not in environ:
        environ["OMP_WAIT_POLICY"] = "PASSIVE"
        environ.setdefault("GOMP_SPINCOUNT", str(SPIN_COUNT))


wait_policy(os.environ)


def _blas_threads() -> int:
    """numpy's OpenBLAS thread count now (threadpoolctl), else the environment, else 1."""
    ctl = _state.get("blas")
    if ctl is None:
        # numpy's, as the core's OpenBLAS hold sees it (the one whose count the regions hold at 1)
        ctl = _state["blas"] = openblas.controller() or False
    if ctl:
        held = _held_count()
        return max(1, int(ctl.num_threads if held is None else held))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        try:
            return max(1, int(os.environ[var]))
        except (KeyError, ValueError):
            continue
    return 1


def _layer_ok() -> bool:
    """Start numba's parallel backend on OpenMP if nothing started it yet; whether the layer in use
    takes concurrent launches."""
    ok = _state.get("layer_ok")
    if ok is None:
        with _lock:
            ok = _state.get("layer_ok")
            if ok is None:
                from numba.np.ufunc import parallel as _par
                if not _par._is_initialized:
                    numba.config.THREADING_LAYER = "omp"
                try:
                    _par._launch_threads()
                    ok = numba.threading_layer() in ("omp", "tbb")
                except Exception:  # no OpenMP runtime and no other layer: stay serial
                    ok = False
                _state["layer_ok"] = ok
    return ok


def count() -> int:
    """The intra-op thread count for a tactic built now (1 when the layer cannot run concurrent
    launches)."""
    n = min(_blas_threads(), numba.config.NUMBA_NUM_THREADS)
    return n if n > 1 and _layer_ok() else 1


#: a layer with less work than this (multiply-adds, or element operations) runs on one thread
#: whatever the intra-op count: at ~50 GMAC/s that is ~0.5 ms of work, while a parallel region
#: must wait for every thread of its team, and a thread whose core another process holds waits
#: for a scheduler slice (milliseconds): a small CNN at 2 threads beside one busy process had a
#: p90 9.5x its median, 1.0x at one thread (issue 17). Large layers still split.
PARALLEL_MIN_WORK = 25_000_000


def for_work(work: int) -> int:
    """The threads a layer of ``work`` multiply-adds (or element operations) should use: the
    intra-op count (:func:`count`) when it is at least :data:`PARALLEL_MIN_WORK`, else 1."""
    return count() if work >= PARALLEL_MIN_WORK else 1


def use(n: int) -> None:
    """Make numba's parallel regions launched from this thread use ``n`` threads (at most
    ``NUMBA_NUM_THREADS``; the work is still cut in ``n`` parts)."""
    if getattr(_tls, "n", 0) != n:
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        _tls.n = n


#: a region on its team that took this many times its best team time waited for a thread. The best is
#: a run back to back with the layer's own data in cache (the builder's timing, a call after a clean
#: one); in the engine's sequence, after other layers, the same region takes 1.3-1.5x that on a shared
#: machine without waiting for anyone (detection_head's split convs at 2 threads, load 3.5, team
#: forced: medians 1.30-1.51x their best, a third to half of the runs over 1.5x), while a region that
#: waited for a descheduled worker took 5-12x (the p90). At 1.5 those ordinary runs counted as waits
#: and put their layers back on one thread for up to MAX_HOLD calls: detection_head's engine ran
#: most split regions alone, 1.2-1.3x slower a call than at 2.0 (clean calls, one process, A/B
#: interleaved), resnet_small's 1.3x. A team run slower than the layer alone still waited whatever the ratio.
#: ``SRCORE_TRT_LIKE_TIGHT_WAIT=1`` (read at import) keeps 1.5 (``benchmarks.families_ab``'s ``+tightwait``: A/B).
WAIT_RATIO = 1.5 if os.environ.get("SRCORE_TRT_LIKE_TIGHT_WAIT") == "1" else 2.0
#: the longest run of calls a layer stays on its calling thread after a wait (then it tries its
#: team again): with the hold doubling at every wait, a core that stays busy costs one waiting
#: call in 128 (well outside a p90), and a core that frees up is used again within 128 calls
MAX_HOLD = 128

#: process-wide counts (tests, ``benchmarks.tail``): regions run on their team, regions run on the
#: calling thread alone because their layer waited recently, waits seen; ``held``: the solo regions
#: of single-region kernels (``timed_on_team``), which the builder's timing watches
COUNTS = {"team": 0, "solo": 0, "waits": 0, "held": 0, "pinned": 0}


class Governor:
    """Whether a layer's next parallel region runs on its team of ``n`` threads or on the calling
    thread alone, measured at run time (one per layer, shared by every thread calling it).

    A region must wait for every thread of its team; a thread whose core another process holds
    waits for a scheduler slice (milliseconds against a layer's fraction of one). Each call's
    duration is recorded per team size: the first runs on one thread (the layer's own time
    alone), then on the team; a team run slower than the layer alone, or more than
    :data:`WAIT_RATIO` times the team's best, *waited*, and the layer then stays on the calling
    thread for ``hold`` calls, ``hold`` doubling at each further wait (at most :data:`MAX_HOLD`)
    and halving after each team run that did not wait. The parts of the work do not depend on
    the team, so results are bit-identical whichever it picks. Races between threads only blur
    the heuristic (plain int updates under the GIL). While the builder times candidates
    (:class:`timing_on_team`) a held-off layer runs on its team all the same (unless built with
    ``timed_on_team=False``)."""

    __slots__ = ("n", "best", "hold", "backoff", "clock", "timed_on_team")

    def __init__(self, n: int, clock=time.perf_counter_ns, timed_on_team: bool = True):
        self.n = max(1, int(n))
        #: whether it runs its region on the team while the builder times it (:class:`timing_on_team`);
        #: a phase of a multi-phase tactic, whose governor chooses team or caller per phase, keeps its choice
        self.timed_on_team = timed_on_team
        self.best = [0, 0]          # best ns alone, on the team (0: not seen)
        self.hold = 1               # calls left alone: the first call measures the layer alone
        self.backoff = 1
        self.clock = clock

    def team(self) -> int:
        """The threads for the next region (``n`` or 1)."""
        if self.n == 1:
            return 1
        if getattr(_tls, "solo", False):   # a step the engine's thread plan runs on the caller
            COUNTS["pinned"] += 1
            return 1
        if self.hold > 0 and not (self.timed_on_team and getattr(_tls, "timing", False)):
            self.hold -= 1
            COUNTS["solo"] += 1
            if self.timed_on_team:
                COUNTS["held"] += 1
            return 1
        COUNTS["team"] += 1
        return self.n

    def record(self, team: int, ns: int) -> bool:
        """Record a region of ``team`` threads that took ``ns``; whether it waited."""
        i = 1 if team > 1 else 0
        best = self.best[i]
        if best == 0 or ns < best:
            self.best[i] = ns
        if i == 0:
            return False
        alone = self.best[0]
        if (best and ns > WAIT_RATIO * best) or (alone and ns > alone):
            COUNTS["waits"] += 1
            self.hold = self.backoff
            self.backoff = min(2 * self.backoff, MAX_HOLD)
            return True
        self.backoff = max(1, self.backoff // 2)
        return False

    def run(self, region, *args):
        """``region(*args)`` (a numba parallel region cut in ``n`` parts) with numba's team set to
        the threads this governor picks, timed and recorded."""
        team = self.team()
        use(team)
        t0 = self.clock()
        out = region(*args)
        self.record(team, self.clock() - t0)
        return out


def run_solo(fn):
    """``fn`` with every governed region it launches on the calling thread alone (the plan's thread
    choice, ``tactics/thread_plan.py``: a split that loses in the engine's sequence). The parts do
    not depend on the team, so the bits are the split's. Keeps the attributes ``builder/plan.py``
    reads (``same_arrays``, ``blas_held``: the unheld kernel, pinned too)."""
    def solo(*args):
        was = getattr(_tls, "solo", False)
        _tls.solo = True
        try:
            return fn(*args)
        finally:
            _tls.solo = was
    solo.pinned = fn
    if getattr(fn, "same_arrays", False):
        solo.same_arrays = fn.same_arrays
    inner = getattr(fn, "blas_held", None)
    if inner is not None:
        solo.blas_held = run_solo(inner)
    return solo


class timing_on_team:
    """While the builder re-times candidates on this thread (a ``with`` block: the extra rounds of
    :func:`..tactics.timing.best_times`), every governed single-region kernel runs on its team,
    held off or not: what is timed is the split on its threads, not the calling thread's run its
    governor fell back to after a wait. Its governor still records every run."""

    def __enter__(self):
        self.was = getattr(_tls, "timing", False)
        _tls.timing = True
        return self

    def __exit__(self, *exc):
        _tls.timing = self.was


def split(total: int, t: int, nt: int, quantum: int = 1) -> tuple[int, int]:
    """Part ``t`` of ``nt`` of ``range(total)`` in whole quanta (Python twin of the kernels' split)."""
    q = -(-total // quantum)
    return min(total, q * t // nt * quantum), min(total, q * (t + 1) // nt * quantum)


def _set_local():
    """numpy's ``openblas_set_num_threads_local`` (OpenBLAS >= 0.3.27: the calling thread's count,
    returning the previous one), or None."""
    fn = _state.get("set_local")
    if fn is None:
        fn = False
        _blas_threads()
        ctl = _state.get("blas")
        if ctl:
            try:
                f = ctypes.CDLL(str(ctl.filepath)).openblas_set_num_threads_local
                f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
                fn = f
            except (OSError, AttributeError):
                pass
        _state["set_local"] = fn
    return fn


def _held_count():
    """The process's OpenBLAS count saved while a region holds it at 1 (a process-wide count), else None."""
    return openblas.held_count()


def blas_enter():
    """Put numpy's OpenBLAS on one thread for a region of this thread; returns the token for
    :func:`blas_exit` (nothing happens when OpenBLAS cannot set its count). The hold is the core's
    (``srcore.plugin.openblas``), one per process, shared with the cpu plugin's part runs."""
    return openblas.enter() if _set_local() else None


def blas_exit(token) -> None:
    if _set_local():
        openblas.leave(token)


def on_caller(run):
    """``run`` with numpy's BLAS on the calling thread only (the previous count restored after), or
    ``run`` itself when OpenBLAS cannot set its count."""
    if not _set_local():
        return run
    return openblas.on_caller(run)

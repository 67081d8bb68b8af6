"""The parts of one split call claimed by the threads of numba's OpenMP team (GNU OpenMP, the pool MKL's
GNU threading layer runs on too), each part a Python callable: the same interface as
:class:`srcore.conv.team.Team`, another transport.

:class:`srcore.conv.team.Team`'s workers sleep on a queue and are woken by a futex for every split
call, tens to hundreds of microseconds late (the GIL, a halted vCPU); between an engine call's layers
they always sleep. GNU OpenMP's workers spin for a while after each region (``GOMP_SPINCOUNT``) and
find the next layer's region awake. Beside them a process that also split work on its own Python
team ran three threads on two cores: the cpu plugin at 2 threads had not one clean call of 175 on
resnet_small (docs/performance.md, "The cpu plugin at 2 threads").

How a Python part runs on an OpenMP thread: in :func:`_region` (numba, ``parallel=True``, ``nogil``)
every thread of the team claims part indices from the call's atomic counter (:func:`claim`) and calls
one C callback (a ``ctypes`` function) with the call's id and the part; the callback takes the GIL
(``PyGILState_Ensure``; an OpenMP worker's thread state is kept for the process's life, :func:`_pin`)
and runs the part. The parts' kernels release the GIL (numpy's loops, MKL through ctypes, nogil numba
kernels), so the parts run in parallel as on the Python team. A thread that finds every part claimed
returns at once without the GIL; the region ends when every thread of the team has come by (OpenMP's
barrier), so unlike the Python team a late worker is waited for (it spins, so it is late only when
another process holds its core). Which thread runs a part never changes its bits: a part is a
function of its index alone. Measured against the Python team: docs/performance-log.md, "The cpu
plugin's three pools at 2 threads".
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading

from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

import numpy as np

_VOID_I64_I64 = ir.FunctionType(ir.VoidType(), [ir.IntType(64), ir.IntType(64)])


@intrinsic
def _call(typingctx, fn, job, arg):
    """Call the C function ``void f(int64, int64)`` at address ``fn`` with ``job`` and ``arg`` (the
    address is an argument: the region stays in numba's on-disk cache)."""
    if not all(isinstance(t, types.Integer) for t in (fn, job, arg)):
        return None

    def codegen(context, builder, signature, args):
        ty = signature.args
        f = builder.inttoptr(context.cast(builder, args[0], ty[0], types.int64), _VOID_I64_I64.as_pointer())
        builder.call(f, [context.cast(builder, args[1], ty[1], types.int64),
                         context.cast(builder, args[2], ty[2], types.int64)])
        return context.get_dummy_value()
    return types.void(fn, job, arg), codegen


@intrinsic
def claim(typingctx, counter):
    """``counter[0]`` before adding 1 to it, atomically (``counter``: a 1-element int64 array): the
    same intrinsic as trt_like's ``kernels.atomics.claim``, here for plugins through
    ``srcore.plugin.omp_team`` (trt_like could import it from there)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", ary.data, ir.Constant(ir.IntType(64), 1), "monotonic")
    return types.int64(counter), codegen


@njit(parallel=True, nogil=True, cache=True)
def _region(fn, job, count, counter, nt):
    # each thread claims the next part until none is left; a thread that finds none never calls
    # back (nor takes the GIL): a late worker costs the caller only its arrival at the barrier
    for t in prange(nt):
        i = claim(counter)
        while i < count:
            _call(fn, job, i)
            i = claim(counter)


_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64)
#: the calls running now, by id: Python threads may each run a region at once (numba gives each
#: calling thread a team of its own), all calling back into the one callback
_jobs: dict[int, tuple] = {}
_job_ids = itertools.count(1).__next__


class OmpTeam:
    """``size`` threads of numba's OpenMP team (the caller one of them) claiming a call's parts.
    Python threads may run calls at once (each gets numba's team of its own thread)."""

    def __init__(self, size: int):
        self.size = size

    @staticmethod
    def _dispatch(job: int, i: int) -> None:
        fn, errors = _jobs[job]
        tid = threading.get_native_id()
        if tid not in _pinned:
            _pin(tid)
        try:
            fn(i)
        except BaseException as exc:  # handed to the caller, which re-raises it; never into C
            errors.append(exc)

    def run(self, fn, count: int, team: int | None = None) -> None:
        """``fn(i)`` for each ``i`` in ``range(count)`` on up to ``team`` (default ``size``) threads,
        the caller one of them; returns when every part ended, re-raising the first error."""
        import numba

        # (numba's team has at most NUMBA_NUM_THREADS threads; the parts are claimed, so a smaller
        # team gives the same bits)
        team = max(1, min(self.size if team is None else team, self.size, count, numba.config.NUMBA_NUM_THREADS))
        if team == 1:
            for i in range(count):
                fn(i)
            return
        errors: list = []
        job = _job_ids()
        _jobs[job] = (fn, errors)
        try:
            if numba.get_num_threads() != team:
                numba.set_num_threads(team)
            _region(_ADDR, job, count, np.zeros(1, np.int64), team)
        finally:
            del _jobs[job]
        if errors:
            raise errors[0]


# one callback for the process's life: its address is what every region calls
_CB = _CALLBACK(OmpTeam._dispatch)
_ADDR = ctypes.cast(_CB, ctypes.c_void_p).value
_pinned: set[int] = set()


def _pin(tid: int) -> None:
    """Keep the calling OpenMP thread's Python thread state for the process's life: one more
    ``PyGILState_Ensure`` never released, so each later callback finds it (else every callback on a
    worker made and freed one: ~30 us of a region with nothing to do)."""
    _pinned.add(tid)
    # (a Python thread calling a region keeps its own state: only OpenMP's workers are pinned)
    if isinstance(threading.current_thread(), threading._DummyThread):
        ctypes.pythonapi.PyGILState_Ensure()


_state: dict = {}
_lock = threading.Lock()


def available() -> bool:
    """Whether numba's parallel layer is GNU OpenMP (started on it here if nothing started it
    yet) with at least two threads: the team MKL's GNU layer shares. With ``workqueue`` (no
    concurrent launches) or ``tbb`` callers keep :class:`srcore.conv.team.Team`."""
    ok = _state.get("ok")
    if ok is None:
        with _lock:
            ok = _state.get("ok")
            if ok is None:
                try:
                    import numba
                    from numba.np.ufunc import parallel as _par

                    if not _par._is_initialized:
                        numba.config.THREADING_LAYER = "omp"
                    _par._launch_threads()
                    ok = numba.threading_layer() == "omp" and numba.config.NUMBA_NUM_THREADS > 1
                except Exception:  # no OpenMP runtime: the Python team
                    ok = False
                _state["ok"] = ok
    return ok


_teams: dict[int, OmpTeam] = {}
# a forked child's OpenMP runtime is the parent's copy: it makes its own teams (and libgomp its threads)
os.register_at_fork(after_in_child=_teams.clear)


def team(size: int) -> OmpTeam:
    """The process's OpenMP team object of ``size`` threads (:func:`available` must hold)."""
    t = _teams.get(size)
    if t is None:
        with _lock:
            t = _teams.get(size)
            if t is None:
                t = _teams[size] = OmpTeam(size)
    return t

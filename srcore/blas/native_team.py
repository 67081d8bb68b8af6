"""Split float32 products whose parts run without the GIL: a team of spinning workers calling numpy's
OpenBLAS ``cblas_sgemm`` from compiled code, for products of ~0.1-1 ms. Shared by the backends
(``srcore.plugin.native_team``; the cpu plugin's linears, attention products and fused encoder layers,
trt_like's ``native_split`` GEMM tactic); imported on first use (numba).

The part pool (the cpu plugin's ``parallel``) runs Python parts: a worker must be woken (a futex: 25-100 us on
the 2-vCPU AMD EPYC under KVM) and must then take the GIL from the caller, a second wake. A product
of ~0.2 ms (bert_encoder's d x d projections, 128 x 256 x 256) split in two there ran no faster
than on one thread: the caller had done both halves, or half and then waited, by the time the
worker came (docs/performance-log.md, "Products of 0.2 ms split without the GIL"). Here a call is a
table of parts (pointers, sizes, leading dimensions: :class:`Gemm`) that the caller publishes with
one atomic store; the workers, spinning on that word in a ``nogil`` compiled loop for
:data:`SPIN_US` after their last part, claim parts with a compare-and-swap and call
``cblas_sgemm`` (then the optional bias add and an epilogue: a compiled C function at an address the
caller gives, e.g. the cpu plugin's activations) without ever taking the GIL; the caller claims parts
the same way and spins until all are done. A worker idle longer than that sleeps on a queue and is
woken by the next call, joining late; the parts are claimed, so the caller
never waits for a worker that has not started one. Which thread runs a part never changes its
bits (each part is one ``cblas_sgemm`` on a fixed block). Needs numpy's own OpenBLAS with 64-bit
integers (its wheels' ``scipy_openblas64_``); elsewhere :func:`sgemm_address` is None and the callers
keep their other paths. Callers hold numpy's BLAS at one thread around a call (``openblas.on_caller``):
each part is one thread's.
"""
from __future__ import annotations

import ctypes
import os
import platform
import queue
import threading
import time

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: how long an idle worker spins for the next call before it sleeps, in microseconds: a model's
#: split products come tens to hundreds of microseconds apart
SPIN_US = 300
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
#: flag words, a cache line apart: the published call (generation << _SHIFT | next part), the parts
#: finished, the published call's table address, part count and a, b, c base addresses; the address of
#: libc's ``sched_yield``
_WORD, _FIN, _TABLE, _COUNT, _BASES, _YIELD = 0, 8, 16, 17, 18, 21
#: spin rounds between two ``sched_yield`` calls (~6 us of ``pause`` on Zen 3)
_YIELD_EVERY = 256
_SHIFT = 20
_MASK = (1 << _SHIFT) - 1
#: a part's fields in its table: a, b, c (offsets from the call's bases, in bytes), bias (an address,
#: 0: none), m, n, k, lda, ldb, ldc, trans_a, trans_b, epilogue (the address of a compiled
#: ``void f(int64 c, int64 m, int64 n, int64 ldc)`` applied to the part's block at address ``c`` after the
#: bias, :data:`EPILOGUE_SIG`; 0: none)
_FIELDS = 13
#: an epilogue's signature (a ``numba.cfunc`` of it: its ``address`` goes in a part's last field)
EPILOGUE_SIG = types.void(types.int64, types.int64, types.int64, types.int64)
#: a table's first fields: the part count, cblas_sgemm's address
_HEAD = 2
_ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def _slot(context, builder, signature, args):
    """The address of ``flags[i]`` (an intrinsic's first two arguments)."""
    ary = context.make_array(signature.args[0])(context, builder, args[0])
    idx = context.cast(builder, args[1], signature.args[1], types.intp)
    return builder.gep(ary.data, [idx])


@intrinsic
def _load_acquire(typingctx, flags, i):
    """``flags[i]`` read atomically (re-read from memory on every call)."""
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64 and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        slot = _slot(context, builder, signature, args)
        return builder.load_atomic(slot, "acquire", 8)
    return types.int64(flags, i), codegen


@intrinsic
def _store_release(typingctx, flags, i, value):
    """``flags[i] = value`` atomically, after every store before it (the table) is visible."""
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        slot = _slot(context, builder, signature, args)
        val = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(val, slot, "release", 8)
        return context.get_dummy_value()
    return types.void(flags, i, value), codegen


@intrinsic
def _cas(typingctx, flags, i, expected, new):
    """Whether ``flags[i]`` was ``expected`` and is now ``new`` (one atomic compare-and-swap)."""
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        slot = _slot(context, builder, signature, args)
        exp = context.cast(builder, args[2], signature.args[2], types.int64)
        new_ = context.cast(builder, args[3], signature.args[3], types.int64)
        res = builder.cmpxchg(slot, exp, new_, "acq_rel", "monotonic")
        return builder.extract_value(res, 1)
    return types.boolean(flags, i, expected, new), codegen


@intrinsic
def _add(typingctx, flags, i, value):
    """``flags[i] += value`` atomically."""
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        slot = _slot(context, builder, signature, args)
        val = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.atomic_rmw("add", slot, val, "acq_rel")
        return context.get_dummy_value()
    return types.void(flags, i, value), codegen


@intrinsic
def _pause(typingctx):
    """x86's ``pause`` (a spin-wait hint); nothing elsewhere."""
    def codegen(context, builder, signature, args):
        if _X86:   # (LLVM's intrinsic: numba's LLVM parses no inline assembly)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()
    return types.void(), codegen


_I32, _I64, _F32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
_PTR = ir.IntType(8).as_pointer()
#: cblas_sgemm of an ILP64 OpenBLAS: (order, trans_a, trans_b: C enums), m, n, k, alpha, a, lda, b, ldb,
#: beta, c, ldc (64-bit integers)
_SGEMM = ir.FunctionType(ir.VoidType(), [_I32, _I32, _I32, _I64, _I64, _I64, _F32, _PTR, _I64, _PTR, _I64, _F32,
                                         _PTR, _I64])


@intrinsic
def _sgemm(typingctx, fn, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc):
    """``c = op(a) @ op(b)`` (row-major, alpha 1, beta 0) by the ILP64 ``cblas_sgemm`` at address
    ``fn`` (an argument, so the compiled code stays in numba's on-disk cache); every argument an
    integer."""
    if not all(isinstance(t, types.Integer) for t in (fn, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc)):
        return None

    def codegen(context, builder, signature, args):
        ty = signature.args
        v = [context.cast(builder, x, t, types.int64) for x, t in zip(args, ty)]
        f = builder.inttoptr(v[0], _SGEMM.as_pointer())
        i32 = lambda x: ir.Constant(_I32, x)   # noqa: E731
        ta, tb = builder.trunc(v[1], _I32), builder.trunc(v[2], _I32)
        builder.call(f, [i32(_ROW_MAJOR), ta, tb, v[3], v[4], v[5], ir.Constant(_F32, 1.0),
                         builder.inttoptr(v[6], _PTR), v[7], builder.inttoptr(v[8], _PTR), v[9],
                         ir.Constant(_F32, 0.0), builder.inttoptr(v[10], _PTR), v[11]])
        return context.get_dummy_value()
    return types.void(fn, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc), codegen


@intrinsic
def _call0(typingctx, fn):
    """Call the C function ``int f(void)`` at address ``fn`` (``sched_yield``), ignoring its result."""
    if not isinstance(fn, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.int64)
        builder.call(builder.inttoptr(v, ir.FunctionType(_I32, []).as_pointer()), [])
        return context.get_dummy_value()
    return types.void(fn), codegen


_EPI = ir.FunctionType(ir.VoidType(), [_I64, _I64, _I64, _I64])


@intrinsic
def _call_epilogue(typingctx, fn, c, m, n, ldc):
    """Call the epilogue at address ``fn`` on the block at ``c`` (:data:`EPILOGUE_SIG`)."""
    if not all(isinstance(t, types.Integer) for t in (fn, c, m, n, ldc)):
        return None

    def codegen(context, builder, signature, args):
        v = [context.cast(builder, x, t, types.int64) for x, t in zip(args, signature.args)]
        builder.call(builder.inttoptr(v[0], _EPI.as_pointer()), v[1:])
        return context.get_dummy_value()
    return types.void(fn, c, m, n, ldc), codegen


@intrinsic
def f32_ptr(typingctx, addr):
    """The float32 pointer at integer address ``addr``."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.int64)
        return builder.inttoptr(v, context.get_value_type(types.CPointer(types.float32)))
    return types.CPointer(types.float32)(addr), codegen


_f32_ptr = f32_ptr


@intrinsic
def _i64_ptr(typingctx, addr):
    """The int64 pointer at integer address ``addr`` (a table's)."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.int64)
        return builder.inttoptr(v, context.get_value_type(types.CPointer(types.int64)))
    return types.CPointer(types.int64)(addr), codegen


@njit(nogil=True, cache=True)
def _part(table, i, a0, b0, c0):
    """Part ``i`` of ``table`` on operands at ``a0``, ``b0`` and an output at ``c0``."""
    o = _HEAD + i * _FIELDS
    a, b, c, bias = a0 + table[o], b0 + table[o + 1], c0 + table[o + 2], table[o + 3]
    m, n, k, lda, ldb, ldc = table[o + 4], table[o + 5], table[o + 6], table[o + 7], table[o + 8], table[o + 9]
    _sgemm(table[1], table[o + 10], table[o + 11], m, n, k, a, lda, b, ldb, c, ldc)
    epi = table[o + 12]
    if bias != 0:
        cp, bp = _f32_ptr(c), _f32_ptr(bias)
        for r in range(m):
            row = r * ldc
            for j in range(n):
                cp[row + j] += bp[j]
    if epi != 0:
        _call_epilogue(epi, c, m, n, ldc)


@njit(nogil=True, cache=True)
def _relax(flags, j):
    """One round of a spin: a ``pause``, and every :data:`_YIELD_EVERY` rounds ``sched_yield`` (its
    address in ``flags[_YIELD]``): a thread the scheduler put on this core (the caller beside its
    own worker, when other processes hold the other core) runs then instead of waiting out the spin."""
    _pause()
    if (j & (_YIELD_EVERY - 1)) == _YIELD_EVERY - 1 and flags[_YIELD] != 0:
        _call0(flags[_YIELD])


@njit(nogil=True, cache=True)
def _drain(flags, gen):
    """Claim and run parts of call ``gen`` until none is left (or the call is closed, or a newer one
    published). A part is claimed by a compare-and-swap of the word that still holds ``gen``, so the
    call is open then and its table (``flags[_TABLE]``) alive until the part is counted: no table
    is read before that (a closed call's may be gone)."""
    while True:
        w = _load_acquire(flags, _WORD)
        if (w >> _SHIFT) != gen or (w & _MASK) >= flags[_COUNT]:
            return
        if _cas(flags, _WORD, w, w + 1):
            _part(_i64_ptr(flags[_TABLE]), w & _MASK, flags[_BASES], flags[_BASES + 1], flags[_BASES + 2])
            _add(flags, _FIN, 1)


@njit(nogil=True, cache=True)
def _publish(flags, table_addr, count, a0, b0, c0, gen):
    flags[_FIN] = 0
    flags[_TABLE] = table_addr
    flags[_COUNT] = count
    flags[_BASES], flags[_BASES + 1], flags[_BASES + 2] = a0, b0, c0
    _store_release(flags, _WORD, gen << _SHIFT)


@njit(nogil=True, cache=True)
def _run(flags, gen, iters):
    """The caller's side of call ``gen`` (published): its share of the parts, then a spin until every
    part finished (then the call is closed: no part of it can be claimed any more) or ``iters``
    pauses passed; whether they all finished."""
    _drain(flags, gen)
    count = flags[_COUNT]
    for j in range(iters + 1):
        if _load_acquire(flags, _FIN) >= count:
            _store_release(flags, _WORD, (gen << _SHIFT) | _MASK)
            return True
        _relax(flags, j)
    return False


@njit(nogil=True, cache=True)
def _serve(flags, seen, iters):
    """A worker's side: spin for a call newer than ``seen``, run its parts, spin again; returns the
    newest call served once none came for ``iters`` pauses."""
    while True:
        g = seen
        for j in range(iters):
            g = _load_acquire(flags, _WORD) >> _SHIFT
            if g != seen:
                break
            _relax(flags, j)
        if g == seen:
            return seen
        _drain(flags, g)
        seen = g


@njit(nogil=True, cache=True)
def _run_alone(table_addr, a0, b0, c0):
    table = _i64_ptr(table_addr)
    for i in range(table[0]):
        _part(table, i, a0, b0, c0)


def spin_iters(us: float) -> int:
    """How many spin rounds take about ``us`` microseconds here (a ``pause`` takes from a few to
    ~150 cycles depending on the core: timed once)."""
    flags = np.zeros(24, np.int64)
    flags[_WORD], flags[_FIN], flags[_COUNT] = 1, -1, 0   # (no part to claim, none ever counted)
    _run(flags, 0, 10)   # (compiled or loaded from numba's cache before timing)
    n, best = 20000, float("inf")
    for _ in range(3):
        t = time.perf_counter_ns()
        _run(flags, 0, n)   # (never finishes: no part counted)
        best = min(best, (time.perf_counter_ns() - t) / n)
    return max(1, int(us * 1e3 / max(best, 0.1)))


def _sched_yield() -> int:
    """The address of libc's ``sched_yield`` (0 where there is none)."""
    try:
        return ctypes.cast(ctypes.CDLL(None).sched_yield, ctypes.c_void_p).value or 0
    except (AttributeError, OSError):
        return 0


def sgemm_address() -> int | None:
    """The address of numpy's ILP64 ``cblas_sgemm`` (its bundled OpenBLAS), or None."""
    from . import openblas

    ctl = openblas.bundled_openblas()
    if ctl is None or getattr(ctl, "_affix", ("", ""))[1] not in ("64_", "_64"):
        return None
    try:   # (threadpoolctl's controller finds the symbol under the wheel's prefix and suffix)
        fn = ctl._get_symbol("cblas_sgemm")
    except (AttributeError, OSError):
        return None
    return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value


class Team:
    """``size - 1`` daemon workers and the caller running :class:`Gemm` calls' parts; one call at a
    time (concurrent callers: see :meth:`run`)."""

    def __init__(self, size: int, spin_us: float = SPIN_US):
        self.size = size
        self.forked = False
        self.iters = spin_iters(spin_us)
        self.flags = np.zeros(24, np.int64)
        self.flags[_YIELD] = _sched_yield()
        self._gen = 0
        self.busy = threading.Lock()
        self._queues = [queue.SimpleQueue() for _ in range(size - 1)]
        self._sleeping = [False] * (size - 1)
        for k in range(size - 1):
            threading.Thread(target=self._work, args=(k,), daemon=True, name="srcore-native-team").start()

    def _work(self, k: int) -> None:
        flags, q, seen = self.flags, self._queues[k], 0
        while True:
            seen = _serve(flags, seen, self.iters)
            # (sleeping set before the last look: a call published after it puts a token; a stale
            # token costs one more round of spinning)
            self._sleeping[k] = True
            if int(flags[_WORD]) >> _SHIFT == seen:
                q.get()
            self._sleeping[k] = False

    def run(self, table: np.ndarray, addr: int, a0: int, b0: int, c0: int) -> None:
        """Every part of ``table`` (a :class:`Gemm`'s, at address ``addr``) on operands at ``a0``,
        ``b0`` and an output at ``c0``, the caller among the threads. A caller finding the team busy
        (another runtime's call) runs them all itself."""
        if self.forked:   # (this team's workers are the parent's: the child's own team)
            child = team(self.size)
            if child is not None and child is not self:
                child.run(table, addr, a0, b0, c0)
                return
        if self.forked or not self.busy.acquire(False):
            _run_alone(addr, a0, b0, c0)
            return
        try:
            gen = self._gen = (self._gen + 1) & ((1 << 40) - 1) or 1
            _publish(self.flags, addr, int(table[0]), a0, b0, c0, gen)
            for k in range(self.size - 1):
                if self._sleeping[k]:
                    self._sleeping[k] = False
                    self._queues[k].put(None)
            while not _run(self.flags, gen, self.iters):
                os.sched_yield()   # (a worker descheduled mid-part: let it run)
        finally:
            self.busy.release()



def _block(shape, strides, itemsize: int = 4):
    """``(trans, ld)`` of a 2-D block of ``shape`` with these byte strides for row-major cblas, or None
    when it is neither a row-major nor a column-major block with a valid leading dimension (the
    stride of an axis of length 1 does not matter: numpy gives such axes any)."""
    (r, c), (s0, s1) = shape, (strides[0] // itemsize, strides[1] // itemsize)
    if (c == 1 or s1 == 1) and (r == 1 or s0 >= max(1, c)):
        return NO_TRANS, (s0 if r > 1 else max(1, c))
    if (r == 1 or s0 == 1) and (c == 1 or s1 >= max(1, r)):
        return TRANS, (s1 if c > 1 else max(1, r))
    return None


class Gemm:
    """A split product's table of parts (constant once built: concurrent calls share it), called
    with the operands' and output's base addresses."""

    def __init__(self, parts: list[tuple], fn: int, team: Team):
        t = self.table = np.zeros(_HEAD + len(parts) * _FIELDS, np.int64)
        t[0], t[1] = len(parts), fn
        for i, p in enumerate(parts):
            t[_HEAD + i * _FIELDS:_HEAD + (i + 1) * _FIELDS] = p
        self.parts = len(parts)
        self.team = team
        self.addr = t.ctypes.data

    def __call__(self, a: int, b: int, c: int) -> None:
        self.team.run(self.table, self.addr, a, b, c)


_teams: dict[int, Team] = {}
_lock = threading.Lock()


def _after_fork() -> None:
    # a forked child has none of the workers: kernels built in the parent hand their calls to the
    # child's own team (made on first use)
    global _lock
    for t in _teams.values():
        t.forked = True
    _teams.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def team(size: int) -> Team | None:
    """The process's team of ``size`` threads (made on first use), or None: one thread, or no ILP64
    OpenBLAS of numpy's to call."""
    if size <= 1 or sgemm_address() is None:
        return None
    t = _teams.get(size)
    if t is None:
        with _lock:
            t = _teams.get(size)
            if t is None:
                t = _teams[size] = Team(size)
    return t


def batched_parts(a_shape, b_shape, a_strides, b_strides, threads: int, c_strides=None):
    """The parts of ``np.matmul(a, b)`` into a float32 output, C-contiguous or of byte strides
    ``c_strides`` with contiguous rows (attention's head outputs written into their (tokens, embed)
    layout), as offsets from the operands' and output's addresses: one per entry of the broadcast
    batch, or, for fewer entries than ``threads``, each entry's rows in ``threads`` blocks; None
    where an operand's matrices have no contiguous axis (cblas cannot read them), the output's rows
    are not contiguous, or a shape is not a matrix stack."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        return None
    M, K = a_shape[-2:]
    K2, N = b_shape[-2:]
    if K != K2 or M == 0 or N == 0 or K == 0:
        return None
    blk_a, blk_b = _block((M, K), a_strides[-2:]), _block((K, N), b_strides[-2:])
    if blk_a is None or blk_b is None:
        return None
    batch = tuple(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])))
    nd = len(batch)

    def eff(shape, strides):   # byte strides over the broadcast batch (0 where broadcast)
        s = (1,) * (nd - len(shape) + 2) + tuple(shape[:-2])
        st = (0,) * (nd - len(shape) + 2) + tuple(strides[:-2])
        return [0 if d == 1 else x for d, x in zip(s, st)]
    ea, eb = eff(a_shape, a_strides), eff(b_shape, b_strides)
    entries = int(np.prod(batch, dtype=np.int64))
    (ta, lda), (tb, ldb) = blk_a, blk_b
    row_a = a_strides[-2]   # bytes from one row of a (an output row) to the next
    if c_strides is None:
        ec, ldc = [int(np.prod(batch[j + 1:], dtype=np.int64)) * M * N * 4 for j in range(nd)], N
    else:
        if len(c_strides) != nd + 2 or (N > 1 and c_strides[-1] != 4) or (M > 1 and c_strides[-2] < 4 * N) \
                or c_strides[-2] % 4:
            return None
        ec, ldc = list(c_strides[:-2]), (c_strides[-2] // 4 if M > 1 else N)
    parts = []
    for e in range(entries):
        idx = np.unravel_index(e, batch) if nd else ()
        ao = sum(int(i) * s for i, s in zip(idx, ea))
        bo = sum(int(i) * s for i, s in zip(idx, eb))
        co = sum(int(i) * s for i, s in zip(idx, ec))
        blocks = [(0, M)] if entries >= threads or M < 2 * threads else [
            (M * i // threads, M * (i + 1) // threads) for i in range(threads)]
        for lo, hi in blocks:
            parts.append((ao + lo * row_a, bo, co + lo * ldc * 4, 0, hi - lo, N, K, lda, ldb, ldc, ta, tb, 0))
    return parts

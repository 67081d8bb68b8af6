"""srcore's NCHW16c 1x1, depthwise and dense kernels (``srcore.plugin.simd_pointwise_blocked`` /
``simd_depthwise_blocked`` / ``simd_dense_nchwc``) over numba's OpenMP team: one ``parallel=True``
region per image, part ``t`` of ``nt`` taking the t-th range of output channel blocks or of bands of
rows (see ``threads.py`` for the layer).

The layers of a mobile net are small (15-200 us each on the 2-vCPU Sapphire Rapids VM, 2-15 M
multiply-adds, under :data:`.threads.PARALLEL_MIN_WORK`): too short for the Python team's hand-over
(~0.1 ms, ``blas_team.py``), but libgomp's workers spin between an engine call's regions
(``GOMP_SPINCOUNT``), so a region costs microseconds: in one process, rounds alternating
(2026-11-27, load ~6), a 112 -> 672 1x1 at 14x14 took 200 -> 108 us, a 120-channel 5x5 depthwise at
28x28 73 -> 45 us. A block's result does not depend on which thread computes it: the bits of the
one-thread kernel.

Each driver calls the one-thread kernel by the address of its compiled code (``fn``:
``srcore.plugin.packed_call.address`` of the kernel for exactly the argument types the driver passes,
:func:`addresses`), not by name: linked by name, each driver's region re-optimized and re-generated
the kernel's whole code (3-8 s of compiling a driver, cold; the kernels' own compile is shared with
the one-thread tactics).
"""
from __future__ import annotations

from numba import njit, prange

from srcore.plugin import simd_dense_blocked as _db
from srcore.plugin import simd_dense_nchwc as _dn
from srcore.plugin import packed_call as _pc
from srcore.plugin import simd_depthwise_blocked as _dwb
from srcore.plugin import simd_pointwise_blocked as _pwb
from srcore.plugin import simd_halves as _dwh
from srcore.plugin import simd_pointwise_halves as _pwh

from .jit import PARALLEL_JIT
from .parallel import _part

_call = _pc.call_at
LANES = _dwb.LANES
#: driver -> (the kernel it calls, how many of its trailing arguments follow the bound call's ``args``)
KERNELS = {}


def addresses(driver, args, tail, kernel=None) -> int:
    """``fn`` of ``driver`` for a bound call's ``args``: the address of its kernel (``kernel``, else
    :data:`KERNELS`'s: the 8-lane twins pass their own, :data:`HALVES`) compiled for ``args`` then
    ``tail`` (values of the types the driver passes after them: its parts' buffer rows, the image and
    range ints)."""
    return _pc.address(KERNELS[driver] if kernel is None else kernel, (*args, *tail))


@njit(**PARALLEL_JIT)
def pointwise(fn, args, scr, n, nt):
    """Image ``n`` of a bound :class:`BlockedPointwiseConv` call (its ``args``) in ``nt`` parts by
    output blocks; ``scr`` (nt, 512): each part's tile, zeroed per call (stale floats there go
    through the epilogue's arithmetic: subnormals cost a microcode assist each)."""
    nob = args[6]
    for t in prange(nt):
        b0, b1 = _part(nob, t, nt, 1)
        if b1 > b0:
            s = scr[t]
            s[:] = 0.0
            _call(fn, args + (s, n, b0, b1))


@njit(**PARALLEL_JIT)
def depthwise(fn, args, xb, tb, n, nt):
    """Image ``n`` of a bound :class:`BlockedDepthwiseConv` call (its ``args``) in ``nt`` parts by
    channel blocks; ``xb``/``tb`` (nt, ...): each part's buffers (zeroed once: only their interior is
    ever written)."""
    blocks = (args[1] + LANES - 1) // LANES
    for t in prange(nt):
        k0, k1 = _part(blocks, t, nt, 1)
        if k1 > k0:
            _call(fn, args + (xb[t], tb[t], n, k0, k1))


@njit(**PARALLEL_JIT)
def pointwise_rows(fn, args, scr, n, nt, W):
    """Image ``n`` of a bound :class:`BlockedPointwiseConv` call in ``nt`` bands of rows (``W`` pixels
    each), every output block: part ``t`` reads only its band of the input and writes its band of
    the output, which the same part of the next layer split by rows reads (numba's static schedule
    runs part t on the same thread of the team each region)."""
    rows = args[3] // W
    nob = args[6]
    for t in prange(nt):
        h0, h1 = _part(rows, t, nt, 1)
        if h1 > h0:
            s = scr[t]
            s[:] = 0.0
            _call(fn, args + (s, n, 0, nob, h0 * W, h1 * W))


@njit(**PARALLEL_JIT)
def depthwise_rows(fn, args, xb, tb, n, nt):
    """Image ``n`` of a bound :class:`BlockedDepthwiseConv` call (NCHW16c in) in ``nt`` bands of output
    rows, every channel block: part ``t`` reads its band's input rows and the halo of the taps."""
    blocks = (args[1] + LANES - 1) // LANES
    ho = args[24]
    for t in prange(nt):
        h0, h1 = _part(ho, t, nt, 1)
        if h1 > h0:
            _call(fn, args + (xb[t], tb[t], n, 0, blocks, h0, h1))


@njit(**PARALLEL_JIT)
def dense(fn, args, xw, sc, n, nt, tasks):
    """Image ``n`` of a bound :class:`NchwcDenseConv` call (its ``args``) in ``nt`` ranges of its
    ``tasks`` (block group major: whole block groups when there are ``nt`` of them or more);
    ``xw``/``sc`` (nt, ...): each part's window (zeroed once: only its interior is written) and row
    buffer."""
    for t in prange(nt):
        t0, t1 = _part(tasks, t, nt, 1)
        if t1 > t0:
            _call(fn, args + (xw[t], sc[t], n, t0, t1))


@njit(**PARALLEL_JIT)
def dense_rows(fn, args, xw, sc, n, nt, bands, groups):
    """Image ``n`` of a bound :class:`NchwcDenseConv` call in ``nt`` ranges of its ``bands`` of output
    rows, every block group in each (a group's bands one after the other: its weights stay in the
    core's cache): part ``t`` reads only its band's input rows and the taps' halo."""
    for t in prange(nt):
        k0, k1 = _part(bands, t, nt, 1)
        if k1 > k0:
            for g in range(groups):
                _call(fn, args + (xw[t], sc[t], n, g * bands + k0, g * bands + k1))


@njit(**PARALLEL_JIT)
def dense_few(fn, args, n, nt, nob):
    """Image ``n`` of a bound :class:`BlockedDenseConv` call (NCHW in: a stem's few channels) in ``nt``
    ranges of its ``nob`` output blocks (each part reads the whole, small, input)."""
    for t in prange(nt):
        b0, b1 = _part(nob, t, nt, 1)
        if b1 > b0:
            _call(fn, args + (n, b0, b1))


KERNELS.update({pointwise: _pwb.pwb_tasks, pointwise_rows: _pwb.pwb_range, depthwise: _dwb.dwb_tasks,
                depthwise_rows: _dwb.dwb_range, dense: _dn.dense_nchwc_tasks, dense_rows: _dn.dense_nchwc_tasks,
                dense_few: _db.dense_tasks})
#: driver -> the 8-lane kernel of the same arguments (``srcore.plugin.simd_pointwise_halves`` /
#: ``simd_halves``), for the ``..._h8`` tactics' split twins; the dense conv's 8-lane tiles are
#: :func:`dense_nchwc_tasks` itself, chosen by its width tag (a distinct compiled signature)
HALVES = {pointwise: _pwh.pwh_tasks, pointwise_rows: _pwh.pwh_range, depthwise: _dwh.dwh_tasks,
          depthwise_rows: _dwh.dwh_range, dense: _dn.dense_nchwc_tasks, dense_rows: _dn.dense_nchwc_tasks,
          dense_few: _dwh.dense_halves_tasks}

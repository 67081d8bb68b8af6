"""srcore's SIMD direct conv (``srcore.plugin.simd_conv``: NCHW in and out) over numba's OpenMP team:
per image one ``parallel=True`` region with two loops, the phase-split input copy by ranges of input
channels (a channel's copy writes only its own block of the buffer), then the register-block tasks
(output rows or spans x channel blocks, rows major: a part is a band of rows) by ranges.

The same split as ``simd_direct_split`` (``conv/simd_split.py``), but there each part is handed to
the Python team (a futex wake and the GIL per phase, ~0.1 ms, and a third thread beside libgomp's
worker, which spins between an engine call's regions: on 2 cores one of the three waits). Here the
worker that ran the layer before (a group norm's ``numba_split``, a packed conv) is still spinning
and joins within microseconds. A task's result does not depend on the range it ran in: the bits of
the one-thread kernel.
"""
from __future__ import annotations

from numba import njit, prange

from srcore.plugin import simd_conv as _sc

from .jit import PARALLEL_JIT
from .parallel import _part

_fill, _tasks = _sc.fill_strided, _sc.conv_tasks


# fusion off: numba saw no dependency between the two loops (the tasks read the phase buffer through the
# ``args`` tuple, not by name) and fused them into one, each part's tasks running before the other
# part's copy (wrong results at the first call, found by the bits test)
@njit(**dict(PARALLEL_JIT, parallel={"fusion": False}))
def direct(x, n, sh, sw, pt, pl, cstep, grid, args, channels, tasks, nt):
    """Image ``n`` of a bound ``DirectRun`` (its ``_fill`` = ``sh, sw, pt, pl``, ``_cstep``, ``_grid`` and
    ``_args``, the rows/pairs/flat kernel's) in ``nt`` parts: input channels ``[c0, c1)`` of part t into
    the phase buffer (``args[0]``), then (every copy done: the loops are two regions) tasks
    ``[t0, t1)``."""
    xq = args[0]
    for t in prange(nt):
        c0, c1 = _part(channels, t, nt, 1)
        if c1 > c0:
            _fill(x[:, c0:c1], n, sh, sw, pt, pl, xq, c0 * cstep, cstep, *grid)
    for t in prange(nt):
        t0, t1 = _part(tasks, t, nt, 1)
        if t1 > t0:
            _tasks(*args, n, t0, t1)

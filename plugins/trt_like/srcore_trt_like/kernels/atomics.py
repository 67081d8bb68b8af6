"""An atomic counter for numba's parallel regions: the parts of a region handed out one at a time.

A region's parts split statically (part ``t`` of ``nt`` to thread ``t``) wait at the region's end for a
thread whose core another process holds, for its whole share; claimed one at a time from a counter,
the caller goes on taking parts while a late worker has not joined, and waits only for the part that
worker is running. Which thread runs a part never changes its bits.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def claim(typingctx, counter):
    """``counter[0]`` before adding 1 to it, atomically (``counter``: a 1-element int64 array)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", ary.data, ir.Constant(ir.IntType(64), 1), "monotonic")
    return types.int64(counter), codegen

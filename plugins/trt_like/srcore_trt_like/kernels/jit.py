"""The numba options of every kernel in this package, in one place.

* :data:`JIT`: the kernels of the tactics (conv, GEMM, pools, Winograd): ``nogil`` (callers
  split work over threads), cached on disk, IEEE division without integer-division checks
  (``error_model="numpy"``: the checks stop vectorisation) and FMA contraction.
* :data:`PARALLEL_JIT`: the ``parallel=True`` drivers (numba's OpenMP regions, see
  :mod:`.threads`) over the serial kernels; no contraction of their own (they only cut work).
* :data:`EXACT_JIT`: arithmetic that must round like torch's separate float32 ops (the fused
  pointwise kernels): no fast-math at all; the :mod:`.fastmath` functions contract inside
  themselves only.
* :data:`ROWS_JIT`: row reductions (softmax, layer norm) that vectorize only when LLVM may
  reassociate their sums; NaN and infinity handling is kept.
* :func:`plain_args`: a kernel that other kernels call compiles once for plain argument types, not
  once per pattern of constants its callers pass (see there).

Kernels may call helpers of other modules of this package (:mod:`.epilogue`, :mod:`.simd`):
numba's on-disk cache would not notice an edit there, so importing this package clears the
package's cache whenever any kernel source changed (:func:`srcore_trt_like.kernels.kernel_set`).
"""
from __future__ import annotations

JIT = dict(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
PARALLEL_JIT = dict(parallel=True, nogil=True, cache=True, error_model="numpy")
EXACT_JIT = dict(nogil=True, error_model="numpy")
ROWS_JIT = dict(EXACT_JIT, cache=True, fastmath={"contract", "reassoc"})


def plain_args(dispatcher):
    """Make ``dispatcher`` (an ``@njit`` kernel that other kernels call) compile for plain argument
    types only.

    numba types a constant argument at a call site inside compiled code as a literal
    (``Literal[int](0)``, ``True``) and compiles the callee anew for every pattern of constants its
    callers pass: the cold resnet_small build compiled ``packed.gather`` 5 times, ``epilogue_t`` 3
    and ``gemm`` 4 (~25 s of its ~135 s of compiling). Typing the call with the literals widened
    (int64, bool) lets every caller share one compiled overload (the constants still fold where
    LLVM inlines the callee into its caller). Calls from Python are never literal."""
    from numba.core import types

    compiled = dispatcher.get_call_template

    def get_call_template(args, kws):
        return compiled([types.unliteral(a) for a in args], {k: types.unliteral(v) for k, v in kws.items()})

    dispatcher.get_call_template = get_call_template
    return dispatcher

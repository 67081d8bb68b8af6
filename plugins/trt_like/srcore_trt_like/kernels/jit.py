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
* :func:`plain_args` (``srcore.plugin.plain_args``, shared with the core's conv kernels): a kernel that
  other kernels call compiles once for plain argument types, not once per pattern of constants its
  callers pass (see there).

Kernels may call helpers of other modules of this package (:mod:`.epilogue`, :mod:`.simd`):
numba's on-disk cache would not notice an edit there, so importing this package clears the
package's cache whenever any kernel source changed (:func:`srcore_trt_like.kernels.kernel_set`).
"""
from __future__ import annotations

from srcore.plugin import plain_args  # noqa: F401 (the core's, re-exported: kernels import it from here)

JIT = dict(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
PARALLEL_JIT = dict(parallel=True, nogil=True, cache=True, error_model="numpy")
EXACT_JIT = dict(nogil=True, error_model="numpy")
ROWS_JIT = dict(EXACT_JIT, cache=True, fastmath={"contract", "reassoc"})

"""The numba options of :mod:`srcore.conv`'s kernels and their helpers, in one place.

* :data:`JIT`: the kernels (entry points Python or other kernels call): cached on disk, ``nogil``
  (callers split work over threads), IEEE division without the integer-division checks
  (``error_model="numpy"``: the checks stop vectorisation), no bounds checks.
* :data:`INLINE`: the helpers of the kernels (register tiles, epilogues, transposes). Each compiles
  once by itself and LLVM inlines it into every caller (``forceinline``: LLVM's ``alwaysinline``),
  so the machine code is the one the helper's body written out in the caller would give. numba's own
  ``inline="always"`` (inlining numba's IR before typing) gave the same code but copied and re-typed
  a helper's IR at every call site: ``pointwise_blocked.pwb_range`` (124 inlined calls) took 33 s of
  CPU to compile, 2/3 of it in numba's IR copying and SSA passes; 4.5 s with its helpers this way.
* :func:`plain_args` (:mod:`srcore._plain_args`): a kernel or helper that compiled code calls compiles
  once for plain argument types, not once per pattern of constants its callers pass (see there).

Helpers are not cached on their own (their callers' cached machine code holds them inlined); numba's
on-disk cache keys a kernel on its own module's source only, so after editing a helper of another
module delete the ``__pycache__/*.nbi``/``*.nbc`` of the modules whose kernels call it.
"""
from __future__ import annotations

from .._plain_args import plain_args

__all__ = ["INLINE", "JIT", "helper", "plain_args"]

JIT = {"cache": True, "nogil": True, "error_model": "numpy", "boundscheck": False}
INLINE = {"forceinline": True, "nogil": True, "error_model": "numpy", "boundscheck": False}


def helper(fn):
    """``fn`` as a kernel helper: :data:`INLINE` with :func:`plain_args`."""
    import numba

    return plain_args(numba.njit(**INLINE)(fn))

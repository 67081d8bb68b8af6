"""Releasing the resident pages of LLVM's machine code once the kernels are loaded.

Loading numba's cached kernels (and compiling the few that are not cached) runs LLVM: ~30-50 MB of
``libllvmlite.so``'s code pages become resident and stay so, although a built engine never calls
LLVM again (its kernels are machine code already). They are clean, file-backed pages: dropping
them (``madvise(MADV_DONTNEED)`` on the library's executable, never-written mappings) costs
nothing but a page-cache fault if LLVM runs again (the next plan's build). Linux only; elsewhere
a no-op.
"""
from __future__ import annotations

import ctypes
import sys

_MADV_DONTNEED = 4
_LIBRARY = "libllvmlite"


def release_compiler_code() -> int:
    """Drop the resident pages of LLVM's code (the ``r-xp`` mappings of ``libllvmlite``); returns
    how many mappings were released."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        madvise.restype = ctypes.c_int
        with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
            spans = []
            for line in f:
                parts = line.split()
                # only executable, private, never-written mappings of the library: its code
                if len(parts) >= 6 and parts[1] == "r-xp" and _LIBRARY in parts[5]:
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    spans.append((lo, hi))
    except (OSError, AttributeError):
        return 0
    return sum(1 for lo, hi in spans if madvise(lo, hi - lo, _MADV_DONTNEED) == 0)

"""What this machine's CPU can do, by feature test (never by vendor).

PyTorch's quantized arithmetic depends on the CPU it runs on: with the ``x86`` engine a convolution's
weights are packed for oneDNN instead of fbgemm when the CPU has AVX512-VNNI, and ATen's vectorized
loops are twice as wide under its AVX512 capability. srcore reproduces torch on the machine it runs
on, so importers and kernels ask here. :func:`cpu_features` is the single source (numpy's run-time
detection); tests monkeypatch it to stand for another machine.
"""
from __future__ import annotations

import functools
import os


@functools.lru_cache(maxsize=1)
def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says: part of the key of
    timings cached on disk (they are valid only on the machine that measured them)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def _detected() -> frozenset[str]:
    import numpy as np

    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy < 2
        features = getattr(np.core._multiarray_umath, "__cpu_features__", {})
    return frozenset(name for name, present in features.items() if present)


def cpu_features() -> frozenset[str]:
    """The CPU features present, in numpy's names (``'AVX2'``, ``'AVX512F'``, ``'AVX512VNNI'``, ...)."""
    return _detected()


def has_avx512_vnni() -> bool:
    """AVX512-VNNI (``cpuinfo_has_x86_avx512vnni`` in torch): the x86 engine then prefers oneDNN convs."""
    return "AVX512VNNI" in cpu_features()


#: the features ATen requires for its AVX512 kernels (``cpuinfo`` avx512vl/bw/dq, fma3)
_ATEN_AVX512 = ("AVX512F", "AVX512BW", "AVX512VL", "AVX512DQ", "FMA3")


def aten_capability() -> str:
    """The kernel set ATen picks here: ``"AVX512"``, ``"AVX2"`` or ``"DEFAULT"``, lowered as torch
    lowers it by the ``ATEN_CPU_CAPABILITY`` environment variable."""
    f = cpu_features()
    best = "AVX512" if all(x in f for x in _ATEN_AVX512) else "AVX2" if {"AVX2", "FMA3"} <= f else "DEFAULT"
    order = ("DEFAULT", "AVX2", "AVX512")
    asked = os.environ.get("ATEN_CPU_CAPABILITY", "").upper()
    if asked in order and order.index(asked) < order.index(best):
        return asked
    return best


def vector_bytes(avx512_kernel: bool = True) -> int:
    """Bytes in one ``at::vec::Vectorized`` register of an ATen kernel: 64 under ATen's AVX512
    capability for a kernel registered for it (``ALSO_REGISTER_AVX512_DISPATCH``: the quantized
    channels-last avg_pool2d), else 32. ``avx512_kernel=False``: a kernel registered with plain
    ``REGISTER_DISPATCH`` (quantized add and leaky_relu, the float sum of a channels-last mean), which
    has no AVX512 build: ATen runs its AVX2 one on an AVX512 CPU (measured against torch 2.13 on a
    Sapphire Rapids)."""
    return 64 if avx512_kernel and aten_capability() == "AVX512" else 32

"""OpenVINO itself: importing it, the process's ``Core``, and what the CPU device can do."""
from __future__ import annotations

import functools
import threading
from typing import Any

from srcore import EngineBuildError

_lock = threading.Lock()
_core: list[Any] = []


def openvino():
    """The ``openvino`` module, or an :class:`srcore.EngineBuildError` saying how to get it."""
    try:
        import openvino
    except Exception as exc:  # ImportError, or a broken install raising something else
        raise EngineBuildError(f"OpenVINO is not importable ({type(exc).__name__}: {exc}); install it with "
                               f"`pip install openvino` (srcore-openvino depends on it)") from exc
    return openvino


def core():
    """The process's ``openvino.Core`` (made once: it loads the device plugins)."""
    if not _core:
        with _lock:
            if not _core:
                _core.append(openvino().Core())
    return _core[0]


@functools.lru_cache(maxsize=None)
def capabilities() -> tuple[str, ...]:
    """The CPU device's ``OPTIMIZATION_CAPABILITIES`` (``FP32``, ``BF16``, ``INT8``, ...)."""
    return tuple(core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


@functools.lru_cache(maxsize=None)
def device_name() -> str:
    try:
        return str(core().get_property("CPU", "FULL_DEVICE_NAME"))
    except Exception:  # an old OpenVINO without the property
        return "CPU"


def cpu_flags() -> frozenset[str] | None:
    """The CPU feature flags of ``/proc/cpuinfo`` (None where there is no such file)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def bf16_refusal(caps: tuple[str, ...] | None = None, flags: frozenset[str] | None = ...,
                 name: str | None = None) -> str | None:
    """None if this CPU computes bfloat16 natively, else why ``precision="bf16"`` is refused.

    Native means: OpenVINO's CPU device lists ``BF16`` among its optimization capabilities
    and, where the kernel tells (``/proc/cpuinfo``), the CPU has ``avx512_bf16`` or
    ``amx_bf16`` (elsewhere bfloat16 would be emulated, slower than float32).
    """
    caps = capabilities() if caps is None else caps
    flags = cpu_flags() if flags is ... else flags
    has_flag = flags is None or any(f in flags for f in NATIVE_BF16_FLAGS)
    if "BF16" in caps and has_flag:
        return None
    why = []
    if "BF16" not in caps:
        why.append(f"OpenVINO's CPU device offers {', '.join(caps) or 'no precision'} but not BF16")
    if not has_flag:
        why.append("the CPU has neither avx512_bf16 nor amx_bf16")
    return (f"precision 'bf16' needs native bfloat16; on this CPU ({name or device_name()}) "
            + " and ".join(why) + ": use precision 'f32'")

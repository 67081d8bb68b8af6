"""OpenVINO itself: importing it, the process's ``Core``, and what the CPU device can do."""
from __future__ import annotations

import functools
import threading
from typing import Any

from srcore.plugin import EngineBuildError

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


#: the CPU features (``srcore.plugin.cpu_features``, numpy's names) under which bfloat16 is computed
#: natively: AVX512_BF16's dot products (Intel from Cooper Lake, AMD from Zen 4; every CPU with AMX-BF16
#: has it too). Elsewhere OpenVINO would emulate bfloat16, slower than float32.
NATIVE_BF16_FEATURES = ("AVX512BF16",)


def bf16_refusal(caps: tuple[str, ...] | None = None, features: frozenset[str] | None = None,
                 name: str | None = None) -> str | None:
    """None if this CPU computes bfloat16 natively, else why ``precision="bf16"`` is refused.

    A feature test, never a vendor test: OpenVINO's CPU device must list ``BF16`` among its
    optimization capabilities and the CPU must have one of :data:`NATIVE_BF16_FEATURES`
    (``srcore.plugin.cpu_features``, which tests monkeypatch to stand for another machine).
    """
    caps = capabilities() if caps is None else caps
    if features is None:
        from srcore import plugin

        features = plugin.cpu_features()
    has_feature = any(f in features for f in NATIVE_BF16_FEATURES)
    if "BF16" in caps and has_feature:
        return None
    why = []
    if "BF16" not in caps:
        why.append(f"OpenVINO's CPU device offers {', '.join(caps) or 'no precision'} but not BF16")
    if not has_feature:
        why.append(f"the CPU lacks {' and '.join(NATIVE_BF16_FEATURES)}")
    return (f"precision 'bf16' needs native bfloat16; on this CPU ({name or device_name()}) "
            + " and ".join(why) + ": use precision 'f32'")

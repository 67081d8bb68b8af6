"""The torch fallback kernel: every aten op, kind ``fallback``, when torch is importable.

Dispatch tries it only after every out and native kernel of every listed
backend (and after a decomposition); its matcher declines ops torch lacks.
``importlib.util.find_spec`` looks for torch without importing it.
"""
from __future__ import annotations

import importlib.util

from srcore.plugin import Kernel

_M = "srcore_cpu.torch_fallback:"
AVAILABLE = importlib.util.find_spec("torch") is not None

KERNELS: list[Kernel] = [
    Kernel("aten::*", "cpu", "fallback", ("*",), _M + "fallback_impl", matcher=_M + "match"),
] if AVAILABLE else []

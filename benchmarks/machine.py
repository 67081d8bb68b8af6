"""Machine facts for the benchmark report: CPU, cores, library versions, BLAS."""
from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "avx_vnni") if f in flags]
    except OSError:
        pass
    return []


def _version(mod: str) -> str | None:
    try:
        return __import__(mod).__version__
    except Exception:  # noqa: BLE001 - absent peer
        return None


def numpy_blas() -> dict:
    import numpy as np

    try:
        cfg = np.show_config(mode="dicts")
        return {k: cfg["Build Dependencies"].get(k) for k in ("blas", "lapack")}
    except Exception:  # noqa: BLE001 - older numpy
        return {}


def machine_facts() -> dict:
    return {
        "cpu": cpu_model(), "cpu_flags": cpu_flags(), "logical_cpus": os.cpu_count(),
        "python": platform.python_version(), "platform": platform.platform(),
        "versions": {m: _version(m) for m in ("numpy", "scipy", "torch", "onnx", "onnxruntime", "srcore")},
        "numpy_build_blas": numpy_blas(),
    }

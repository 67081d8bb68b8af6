"""The engine options of the openvino backend, read from ``Segment.options`` and checked.

``Options(engine_options={...})`` is shared by every engine builder of the module. The
options meant for this backend alone go under its name, ``{"openvino": {"precision":
"bf16"}}``; top-level keys apply to every builder. Any key this backend does not know
(top level or under ``"openvino"``) refuses the segment with a reason naming it: a typo
must not silently run something else. Other dict-valued top-level keys are other
builders' namespaces and are ignored (``srcore.plugin.builder_options`` reads them).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from srcore.plugin import EngineBuildError
from srcore.plugin import builder_options

from .cache import DEFAULT_LIMIT_MB

NAMESPACE = "openvino"

#: the precisions a user may ask for -> OpenVINO's inference precision hint
PRECISIONS = {"f32": "f32", "float32": "f32", "bf16": "bf16", "bfloat16": "bf16"}


@attrs.frozen
class EngineOptions:
    """What the builder was asked for.

    ``precision``: ``"f32"`` (default) or ``"bf16"`` (only where the CPU has native bfloat16);
    ``threads``: OpenVINO's inference threads (``None``: the process's intra-op thread count,
    as numpy's BLAS uses); ``cache_dir``: OpenVINO's compiled-model cache (``None``: off);
    ``timing``: time each engine against the next backend at build time and keep the faster;
    ``cache_limit_mb``: the most the model cache may hold, least recently used entries removed
    first (``None``: unbounded); ``nan_checks``: restore torch's NaN and inf results where OpenVINO's ops differ (False lets
    OpenVINO fuse attention and pooling as for an ONNX model, with its own NaN handling).
    """

    precision: str = "f32"
    threads: int | None = None
    cache_dir: Path | None = None
    cache_limit_mb: int | None = DEFAULT_LIMIT_MB
    timing: bool = True
    nan_checks: bool = True


KNOWN = tuple(f.name for f in attrs.fields(EngineOptions))


def default_cache_dir() -> Path:
    """``<srcore cache root>/openvino`` (``$SRCORE_CACHE_DIR``, ``$XDG_CACHE_HOME/srcore`` or
    ``~/.cache/srcore``)."""
    from srcore.plugin import cache_root

    return cache_root() / "openvino"


def parse(options: dict[str, Any]) -> EngineOptions:
    """The openvino options of ``options`` (a segment's builder options); raises
    :class:`srcore.EngineBuildError` naming the first unknown or invalid one."""
    merged = builder_options(options, NAMESPACE, KNOWN, error=EngineBuildError)
    out = {}
    if "precision" in merged:
        p = merged["precision"]
        if not isinstance(p, str) or p.lower() not in PRECISIONS:
            raise EngineBuildError(f"engine option precision={p!r}: openvino takes 'f32' or 'bf16'")
        out["precision"] = PRECISIONS[p.lower()]
    if "threads" in merged:
        t = merged["threads"]
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise EngineBuildError(f"engine option threads={t!r}: a positive int (or None: the process's "
                                   f"intra-op thread count)")
        out["threads"] = t
    cache = merged.get("cache_dir", "default")
    if cache == "default":
        out["cache_dir"] = default_cache_dir()
    elif cache in (None, False, ""):
        out["cache_dir"] = None
    elif isinstance(cache, (str, os.PathLike)):
        out["cache_dir"] = Path(cache)
    else:
        raise EngineBuildError(f"engine option cache_dir={cache!r}: a directory path, or None to disable the cache")
    if "cache_limit_mb" in merged:
        lim = merged["cache_limit_mb"]
        if lim is not None and (isinstance(lim, bool) or not isinstance(lim, (int, float)) or lim < 0):
            raise EngineBuildError(f"engine option cache_limit_mb={lim!r}: a size in MB >= 0 (or None: unbounded)")
        out["cache_limit_mb"] = lim
    for flag in ("timing", "nan_checks"):
        if flag in merged:
            if not isinstance(merged[flag], bool):
                raise EngineBuildError(f"engine option {flag}={merged[flag]!r}: True or False")
            out[flag] = merged[flag]
    return EngineOptions(**out)


def intra_op_threads() -> int:
    """The process's intra-op thread count: numpy's BLAS pool (threadpoolctl), else
    ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS``, else every core."""
    try:
        from threadpoolctl import threadpool_info

        for lib in threadpool_info():
            if lib.get("user_api") == "blas" and "numpy" in str(lib.get("filepath", "")):
                return max(1, int(lib["num_threads"]))
    except Exception:  # threadpoolctl missing or failing: the environment decides
        pass
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        try:
            return max(1, int(os.environ[var]))
        except (KeyError, ValueError):
            continue
    return os.cpu_count() or 1

"""Timing evidence kept across builds: each candidate's least time at a decision, pooled over every
build (and every node of the same problem) that timed it on this machine.

At more than one intra-op thread the split-or-not choices (a linear's MKL column split against the
one-thread BLAS, a row split of a norm / softmax / elementwise op, a split matmul) are timed in wall
time, where a round of the split waits whenever another process holds the second core. One build's
rounds alone made bert_encoder's 2-thread choices move between builds (4 against 22-23 split nodes
in builds minutes apart on the shared 2-vCPU Sapphire Rapids VM; docs/performance-log.md). As
trt_like's timing cache (its VERSION 6 evidence): the choice is made on each candidate's least time
over every timing of that problem so far (:func:`pooled`), not on this build's rounds alone. The least,
not a mean: a slower reading is the load's, and a fast one shows what the candidate can do. Every
build still times (a choice is never taken from the cache untimed), so evidence only grows.

Stored per machine and thread setting (CPU model, core count, numpy, the thread variables and every
``SRCORE_CPU_*`` setting (the part pool's team, the BLAS policy change what a split costs), and the
stamps of srcore's and this plugin's sources: a kernel that changed is timed afresh) in
``cache_root()/cpu/timing-<tag>.json``. A corrupt or unreadable file is ignored (and rewritten); a
read-only cache directory only means no evidence across processes. ``SRCORE_CPU_TIMING_EVIDENCE=0``
turns the pooling off (each build decides on its own rounds, as before).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from pathlib import Path

_ENV = "SRCORE_CPU_TIMING_EVIDENCE"
#: bump when the meaning of a key or of the stored times changes
VERSION = 1
_lock = threading.Lock()
_tags: dict[tuple, str] = {}


def enabled() -> bool:
    return os.environ.get(_ENV, "1") != "0"


def machine_tag() -> str:
    """A short hash of what makes timings comparable here (see the module doc)."""
    # (every SRCORE_CPU_* setting too: SRCORE_CPU_OMP_TEAM or _THREADED_BLAS change what a split costs)
    threads = tuple(os.environ.get(v, "") for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")) + \
        tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("SRCORE_CPU_")))
    tag = _tags.get(threads)
    if tag is None:
        import numpy as np

        import srcore
        from srcore.plugin import cpu_name, sources_fingerprint

        code = sources_fingerprint([Path(srcore.__file__).parent, Path(__file__).parents[1]])
        parts = [str(VERSION), cpu_name(), str(os.cpu_count()), np.__version__, code, repr(threads)]
        tag = _tags[threads] = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    return tag


def path() -> Path:
    from srcore.plugin import cache_root

    return cache_root() / "cpu" / f"timing-{machine_tag()}.json"


def key_of(*parts) -> str:
    """A stable key of a timing problem from plain parts (names, shapes, dtypes, thread counts)."""
    return hashlib.sha256(json.dumps([_plain(p) for p in parts], sort_keys=True).encode()).hexdigest()[:24]


def _plain(v):
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None:
        return ["array", list(shape), str(dtype)]
    return repr(v) if isinstance(v, (complex,)) else type(v).__name__


def _read(p: Path) -> dict:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("evidence"), dict):
        return {}
    out = {}
    for k, v in data["evidence"].items():
        try:
            out[str(k)] = {"times": {str(n): float(s) for n, s in v["times"].items()}, "builds": int(v["builds"])}
        except (TypeError, KeyError, ValueError, AttributeError):
            continue
    return out


def pooled(key: str, times: dict) -> dict:
    """Add one timing's ``times`` (candidate -> seconds) of problem ``key`` to the evidence and return
    each of these candidates' least time over every timing of ``key`` so far (itself included).
    The file is read and written back around the merge (another process's evidence is kept)."""
    if not enabled() or not times:
        return dict(times)
    with _lock:
        p = path()
        evidence = _read(p)
        old = evidence.get(key, {"times": {}, "builds": 0})
        best = {n: min(float(s), old["times"].get(n, math.inf)) for n, s in times.items()}
        merged = {**old["times"], **{n: s for n, s in best.items() if math.isfinite(s)}}
        evidence[key] = {"times": merged, "builds": old["builds"] + 1}
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({"version": VERSION, "evidence": evidence}, sort_keys=True), encoding="utf-8")
            os.replace(tmp, p)
        except OSError:   # read-only cache: this timing still decides on its own rounds and the old evidence
            pass
        return best

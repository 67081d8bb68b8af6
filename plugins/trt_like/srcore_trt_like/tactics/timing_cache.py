"""The timing cache: which tactic won for a layer, so that rebuilding an engine skips the timing.

Like TensorRT's timing cache: keyed by the layer (kind, shapes, constant attributes
without their values, the candidates' names) and stored per machine and thread setting
(CPU model, numpy and BLAS versions, the BLAS/OpenMP thread counts: the best convolution
at 1 thread is not always the best at 2) and code (the stamps of srcore's and this plugin's
source files: a winner timed against an older kernel is not reused once the kernel changes)
in ``cache_root()/trt_like/timing-<machine>.json``.

Beside the winners it keeps the *evidence*: per layer, each candidate's best seconds over every
build that timed it (:meth:`TimingCache.merge`). A choice timed while a core was taken is not kept
as a winner (``timing``), so the next build times the layer again; it then decides on the best
time each candidate ever showed, not on its own timing alone, and after :data:`EVIDENCE_BUILDS`
such builds the winner of the pooled evidence is kept. On the 2-vCPU Sapphire Rapids VM under
load 8, 20 of resnet_small's 23 layers were timed so in one build, and each fresh build chose
anew from the timings of that build only (the same 512-channel 7x7 conv's candidates ranked in
four different orders in one build's four pool passes).
A corrupt or unreadable file is ignored (and rewritten); a read-only cache directory only
means no reuse.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

import srcore
from srcore.plugin import cache_root, cpu_name, sources_fingerprint

#: bump when the meaning of a key changes, or when stored winners were timed wrongly (3: before
#: 2026-11-27 the team's engine timed its candidates beside OpenBLAS's spinning worker, see
#: ``choose._Pools.candidates``, and kept 1-thread winners at 2 threads; 4: before then a 1-thread
#: layer's candidates were timed in wall time, one call a round, see ``timing``; 5: before then a
#: threaded layer's winner was kept even when timed while a core was taken, see ``timing``; 6: the
#: evidence was added)
VERSION = 6
#: builds of a layer timed while a core was taken, whose pooled best times (:meth:`TimingCache.merge`)
#: are then trusted like one clean timing: each candidate's least time over that many builds
EVIDENCE_BUILDS = 3
_lock = threading.Lock()
_caches: dict[Path, "TimingCache"] = {}


def machine_tag() -> str:
    """A short hash of what makes timings comparable: CPU, numpy/BLAS, the kernels' code, thread settings."""
    threads = tuple(os.environ.get(v, "") for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
    tag = _tags.get(threads)
    if tag is None:
        tag = _tags[threads] = _machine_tag(threads)
    return tag


_tags: dict[tuple, str] = {}


def _machine_tag(threads: tuple[str, ...]) -> str:
    code = sources_fingerprint([Path(srcore.__file__).parent, Path(__file__).parents[1]])
    parts = [str(VERSION), cpu_name(), str(os.cpu_count()), np.__version__, blas_name(), code, *threads]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def blas_name() -> str:
    try:
        cfg = np.show_config(mode="dicts")  # numpy >= 1.25
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name', '')}-{blas.get('version', '')}"
    except Exception:  # older numpy or an odd build: the numpy version stands in
        return ""


def layer_key(layer, net, names: list[str]) -> str:
    """What identifies a layer's timing problem (not its weights' values)."""
    def plain(v: Any):
        if isinstance(v, np.ndarray):
            return ["array", list(v.shape)]
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in sorted(v.items())}
        if isinstance(v, slice):
            return ["slice", v.start, v.stop, v.step]
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        return repr(v)
    key = {"kind": layer.kind, "in": [list(net.shape(t)) for t in layer.inputs],
           "out": [list(net.shape(t)) for t in layer.outputs], "attrs": plain(layer.attrs), "cands": names}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


class TimingCache:
    """One machine's winners: ``lookup(key)`` / ``store(key, name)``, and the timings behind them
    (``merge``), written back by ``save()``."""

    def __init__(self, path: Path):
        self.path = path
        self.entries: dict[str, str] = {}
        #: key -> {"times": {candidate: best seconds seen}, "builds": builds that timed it}
        self.evidence: dict[str, dict] = {}
        self.dirty = False
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("winners"), dict):
                self.entries = {str(k): str(v) for k, v in data["winners"].items()}
            if isinstance(data, dict) and isinstance(data.get("evidence"), dict):
                self.evidence = {str(k): _evidence(v) for k, v in data["evidence"].items() if _evidence(v)}
        except (OSError, ValueError):
            pass

    def merge(self, key: str, times: dict[str, float]) -> tuple[dict[str, float], int]:
        """Add one build's ``times`` (candidate -> seconds) of ``key``: returns each candidate's
        least time over the builds so far (this one's candidates only) and how many builds timed it.
        The least, not the last or a mean: on a shared machine a slower reading is the load's, and
        every build that timed a candidate fast shows what it can do."""
        with _lock:
            old = self.evidence.get(key, {"times": {}, "builds": 0})
            best = {n: min(float(s), old["times"].get(n, math.inf)) for n, s in times.items()}
            kept = {n: s for n, s in best.items() if math.isfinite(s)}
            self.evidence[key] = {"times": kept, "builds": old["builds"] + 1}
            self.dirty = True
            return best, old["builds"] + 1

    def lookup(self, key: str) -> str | None:
        return self.entries.get(key)

    def store(self, key: str, name: str) -> None:
        with _lock:
            if self.entries.get(key) != name:
                self.entries[key] = name
                self.dirty = True

    def save(self) -> None:
        with _lock:
            if not self.dirty:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"version": VERSION, "winners": self.entries, "evidence": self.evidence},
                                          sort_keys=True),
                               encoding="utf-8")
                os.replace(tmp, self.path)
                self.dirty = False
            except OSError:  # a read-only cache directory: keep the winners in memory only
                pass


def _evidence(v) -> dict | None:
    """A stored evidence entry as :meth:`TimingCache.merge` keeps it, or None when malformed."""
    try:
        times = {str(n): float(s) for n, s in v["times"].items()}
        return {"times": times, "builds": int(v["builds"])}
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


def get() -> TimingCache:
    """The timing cache of this machine and thread setting (one object per process and path)."""
    path = cache_root() / "trt_like" / f"timing-{machine_tag()}.json"
    with _lock:
        cache = _caches.get(path)
        if cache is None:
            cache = _caches[path] = TimingCache(path)
    return cache

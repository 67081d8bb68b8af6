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
read-only cache directory only means no evidence across processes. The file is read once per
process (again only when another process replaced it) and written at most every second and at exit.
``SRCORE_CPU_TIMING_EVIDENCE=0`` turns the pooling off (each build decides on its own rounds, as before).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import threading
import time
from pathlib import Path

import attrs

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


#: pending evidence is written at most this often (and at exit, :func:`flush`): a 2-thread load times
#: ~25 problems, and rewriting the whole file at each made its cost grow with the file
FLUSH_EVERY_S = 1.0


@attrs.define
class _File:
    """One evidence file as this process sees it: its contents as last read or written (``view``, with
    the ``stat`` that identifies that version) and the timings made here since (``pending``)."""

    path: Path
    view: dict = attrs.field(factory=dict)
    stat: tuple | None = None
    pending: dict = attrs.field(factory=dict)
    flushed_at: float = -math.inf

    def refresh(self) -> None:
        """Re-read the file when another process replaced it since this process last saw it."""
        now = _stat(self.path)
        if now != self.stat:
            self.view, self.stat = _read(self.path), now

    def evidence(self, key: str) -> dict:
        return _merge(self.view.get(key), self.pending.get(key))

    def flush(self) -> None:
        """Merge the pending timings into the file as it is now (another process's evidence is kept)
        and write it back in one atomic replace."""
        self.flushed_at = time.monotonic()
        if not self.pending:
            return
        merged = _read(self.path)
        for k, v in self.pending.items():
            merged[k] = _merge(merged.get(k), v)
        self.pending = {}
        self.view = merged
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({"version": VERSION, "evidence": merged}, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)
            self.stat = _stat(self.path)
        except OSError:   # read-only cache: the evidence stays this process's own (in ``view``)
            pass


def _stat(p: Path) -> tuple | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _merge(a: dict | None, b: dict | None) -> dict:
    """Two records of one problem as one: each candidate's least time, the builds added."""
    a, b = a or {"times": {}, "builds": 0}, b or {"times": {}, "builds": 0}
    times = dict(a["times"])
    for n, s in b["times"].items():
        times[n] = min(s, times.get(n, math.inf))
    return {"times": times, "builds": a["builds"] + b["builds"]}


_files: dict[Path, _File] = {}


def pooled(key: str, times: dict) -> dict:
    """Add one timing's ``times`` (candidate -> seconds) of problem ``key`` to the evidence and return
    each of these candidates' least time over every timing of ``key`` so far (itself included). The
    file is read again only when another process replaced it; this process's timings reach it at
    most every :data:`FLUSH_EVERY_S` and at exit (:func:`flush`)."""
    if not enabled() or not times:
        return dict(times)
    with _lock:
        p = path()
        f = _files.get(p)
        if f is None:
            f = _files[p] = _File(p)
        f.refresh()
        old = f.evidence(key)
        best = {n: min(float(s), old["times"].get(n, math.inf)) for n, s in times.items()}
        mine = {n: s for n, s in best.items() if math.isfinite(s)}
        f.pending[key] = _merge(f.pending.get(key), {"times": mine, "builds": 1})
        if time.monotonic() - f.flushed_at >= FLUSH_EVERY_S:
            f.flush()
        return best


def flush() -> None:
    """Write every pending timing to its evidence file now (also done at exit)."""
    with _lock:
        for f in _files.values():
            f.flush()


atexit.register(flush)
# a forked child's pending timings are its parent's, which writes them
os.register_at_fork(after_in_child=lambda: [f.pending.clear() for f in _files.values()])

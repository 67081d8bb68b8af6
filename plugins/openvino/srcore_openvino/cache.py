"""OpenVINO's compiled-model cache under srcore: one entry per model, bounded in size.

OpenVINO names its cache blobs by a hash it computes itself and never reads a blob's access
time back, so srcore cannot tell which blob a cache hit used. Each engine therefore hands
OpenVINO its own entry directory, ``<cache_dir>/<key>``, the key a digest of the OpenVINO model
(ops, shapes, constants) and its compile settings; srcore marks the entry used (its mtime) at
every build and, after the compile, removes the least recently used entries (directories, and
blobs of the flat layout of earlier versions) until the cache is within ``cache_limit_mb``.
OpenVINO's own hash still decides what a blob is for: a key collision only shares an entry.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

#: default bound of a cache directory, in MB (engine option ``cache_limit_mb``)
DEFAULT_LIMIT_MB = 1024


def entry_key(model, config: dict, version: str) -> str:
    """A digest of ``model`` (an ``openvino.Model``) and its compile ``config``."""
    h = hashlib.blake2b(digest_size=12)
    h.update(f"{version}|{sorted(config.items())!r}".encode())
    # by position, not by name: OpenVINO numbers unnamed ops process-wide, so names differ between builds
    ops = model.get_ordered_ops()
    index = {id(op): i for i, op in enumerate(ops)}
    for op in ops:
        h.update(op.get_type_name().encode())
        for out in op.outputs():
            h.update(f"{out.get_element_type()}{out.get_partial_shape()}".encode())
        for inp in op.inputs():
            src = inp.get_source_output()
            h.update(f"<{index.get(id(src.get_node()), -1)}:{src.get_index()}".encode())
        if op.get_type_name() == "Constant":
            h.update(memoryview(op.get_data()).cast("B"))
        else:
            h.update(repr(sorted(op.get_attributes().items(), key=lambda kv: kv[0])).encode())
            # rt_info steers OpenVINO's transformations (convert.table.EXACT_DIVIDE)
            h.update(repr(sorted(op.get_rt_info().keys())).encode())
    return h.hexdigest()


def name_by_position(model) -> None:
    """Name every op of ``model`` by its position. OpenVINO numbers unnamed ops process-wide
    (``Constant_1234``) and its cache hash includes the names: without this, the same segment built
    twice never hit the cache and wrote one more blob each time. The outputs' tensor names too
    (OpenVINO names them after their ``Result``)."""
    for i, op in enumerate(model.get_ordered_ops()):
        op.set_friendly_name(f"{op.get_type_name()}_{i}")
    for i, out in enumerate(model.outputs):
        out.get_tensor().set_names({f"output_{i}"})


def use_entry(cache_dir: Path, key: str) -> Path:
    """``cache_dir / key``, created and marked as used now."""
    entry = cache_dir / key
    entry.mkdir(parents=True, exist_ok=True)
    os.utime(entry)
    return entry


def _size(path: Path) -> int:
    if path.is_dir():
        total = 0
        for root, _dirs, files in os.walk(path):
            for f in files:
                try:
                    total += os.lstat(os.path.join(root, f)).st_size
                except OSError:
                    pass
        return total
    return path.lstat().st_size


def entries(cache_dir: Path) -> list[tuple[float, int, Path]]:
    """``(last used, bytes, path)`` of every entry of ``cache_dir``, least recently used first."""
    out = []
    try:
        children = list(cache_dir.iterdir())
    except OSError:
        return out
    for p in children:
        try:
            out.append((p.stat().st_mtime, _size(p), p))
        except OSError:   # removed meanwhile by another process
            continue
    out.sort(key=lambda e: e[0])
    return out


def evict(cache_dir: Path, limit_bytes: int, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used entries of ``cache_dir`` (never ``keep``) until the rest
    holds at most ``limit_bytes``; returns what was removed."""
    found = entries(cache_dir)
    total = sum(size for _, size, _ in found)
    removed = []
    for _, size, path in found:
        if total <= limit_bytes:
            break
        if keep is not None and path == keep:
            continue
        try:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:   # another process took it, or it is not ours to remove: leave it
            continue
        total -= size
        removed.append(path)
    return removed


def clear(cache_dir: Path) -> tuple[int, int]:
    """Remove every entry of ``cache_dir``; returns (entries, bytes) removed."""
    found = entries(cache_dir)
    removed = evict(cache_dir, -1)
    return len(removed), sum(size for _, size, p in found if p in removed)

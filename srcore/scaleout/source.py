"""How the model file reaches the workers, and the one ``StaticModule`` each worker process keeps.

On the driver, :func:`model_source` turns a path (or a loaded :class:`srcore.Model`, saved once to a
temporary ``.srm``) into a :class:`ModelSource`: the driver's path and the file's header checksum,
which names the file's content. With ``transfer="copy"`` (the default) the driver also sends the
file's bytes once (Ray's object store, a Dask scatter): each node receives them once, writes them to
its cache directory and memory-maps that file. A worker that already sees the same file (same
checksum) at the driver's path, or in its cache, maps it and ignores the copy. With
``transfer="path"`` nothing is sent: every worker must read the file at the driver's path (a
shared filesystem).

On a worker, :func:`static_module` loads the model once per process and per (file, options) and
returns the same ``StaticModule`` to every later task.
"""
from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ..errors import SrcoreError, SrcoreFormatError

TRANSFERS = ("copy", "path")


@attrs.frozen
class ModelSource:
    """Where the driver has the model file and which file it is (its header checksum)."""

    path: str
    digest: str
    nbytes: int

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @classmethod
    def of_file(cls, path: str | os.PathLike) -> "ModelSource":
        """The source of a ``.srm`` file (its header is read and checked; the rest is not)."""
        from ..format.srm import read_metadata

        path = os.path.abspath(os.fspath(path))
        if not os.path.exists(path):
            raise SrcoreError(f"{path}: no such model file (on {socket.gethostname()})")
        if os.path.isdir(path):
            raise SrcoreError(f"{path}: is a directory, not a model file")
        digest = read_metadata(path).get("header_sha256")
        if not digest:
            raise SrcoreFormatError(f"{path}: not a .srm file (no header checksum)")
        return cls(path, digest, os.path.getsize(path))


def check_transfer(transfer: str) -> str:
    if transfer not in TRANSFERS:
        raise SrcoreError(f"transfer={transfer!r}: choose 'copy' (send the model file once per node) or "
                          "'path' (every worker reads it at the driver's path)")
    return transfer


def model_source(model: Any):
    """``(ModelSource, Model)`` of a ``.srm`` path or a loaded ``srcore.Model``.

    The model is loaded on the driver (memory-mapped: cheap) to check the mapping of columns to
    its inputs before any worker starts. A ``Model`` that is not a file yet is saved once to a
    temporary file removed at exit.
    """
    from ..format.srm import load, read_metadata, save
    from ..model import Model

    if isinstance(model, Model):
        fd, tmp = tempfile.mkstemp(suffix=".srm", dir=_driver_tmpdir())
        os.close(fd)
        save(model, tmp)
        path = os.path.join(_driver_tmpdir(), read_metadata(tmp)["header_sha256"] + ".srm")
        os.replace(tmp, path)   # one file per distinct model, however often it is passed
        return ModelSource.of_file(path), model
    if isinstance(model, (str, os.PathLike)):
        source = ModelSource.of_file(model)
        return source, load(source.path)
    raise SrcoreError(f"model must be a .srm path or a srcore.Model, not {type(model).__name__}")


def payload_of(source: ModelSource) -> np.ndarray:
    """The file's bytes as a uint8 array (sent once per node; Ray maps it zero-copy on a node)."""
    return np.fromfile(source.path, dtype=np.uint8)


def local_model_path(source: ModelSource, payload: Any = None) -> str:
    """A path on this machine holding the model file: the driver's path if it is the same file
    here, else this node's cached copy, written from ``payload`` when missing (the bytes, or a
    function returning them, called only then)."""
    if _same_file(source.path, source.digest):
        return source.path
    cached = cache_dir() / f"{source.digest}.srm"
    if _same_file(str(cached), source.digest):
        return str(cached)
    if payload is None:
        here = "missing" if not os.path.exists(source.path) else "a different file (checksum differs)"
        raise SrcoreError(f"model file {source.path} is {here} on worker {socket.gethostname()} "
                          f"(pid {os.getpid()}); with transfer='path' every worker must read the same file at "
                          "that path (a shared filesystem); transfer='copy' sends it once per node")
    if callable(payload):
        payload = payload()
    data = memoryview(np.ascontiguousarray(payload)).cast("B")
    if len(data) != source.nbytes:
        raise SrcoreError(f"model file {source.name}: received {len(data)} bytes, expected {source.nbytes}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(f"{cached.name}.tmp{os.getpid()}-{threading.get_ident()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, cached)   # atomic: processes of one node may race, each writes the same bytes
    finally:
        if tmp.exists():
            tmp.unlink()
    if not _same_file(str(cached), source.digest):
        raise SrcoreError(f"model file {source.name}: the copy written to {cached} does not match the driver's")
    return str(cached)


def cache_dir() -> Path:
    """Where a node keeps the model files sent to it: ``$SRCORE_CACHE_DIR/models`` (see srcore.cachedir)."""
    from ..cachedir import cache_root

    return cache_root() / "models"


def _same_file(path: str, digest: str) -> bool:
    from ..format.srm import read_metadata

    if not os.path.isfile(path):
        return False
    try:
        return read_metadata(path).get("header_sha256") == digest
    except SrcoreFormatError:
        return False


# -- the per-process module cache ---------------------------------------------------------------
_MAX_MODULES = 4
_modules: OrderedDict = OrderedDict()
_lock = threading.Lock()


def static_module(source: ModelSource, options, payload: Any = None):
    """This process's ``StaticModule`` of ``source`` with ``options`` (loaded on first use)."""
    key = (source.digest, options)
    with _lock:
        sm = _modules.get(key)
        if sm is not None:
            _modules.move_to_end(key)
            return sm
        from ..format.srm import load
        from ..runtime.static_module import StaticModule

        sm = StaticModule(load(local_model_path(source, payload)), options=options)
        _modules[key] = sm
        while len(_modules) > _MAX_MODULES:
            _modules.popitem(last=False)
        return sm


_tmpdir: str | None = None


def _driver_tmpdir() -> str:
    global _tmpdir
    if _tmpdir is None:
        _tmpdir = tempfile.mkdtemp(prefix="srcore-scaleout-")
        atexit.register(shutil.rmtree, _tmpdir, True)
    return _tmpdir

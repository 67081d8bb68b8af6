"""A plugin's kernel records from a cached, validated index: a start-up imports no declaration module.

A plugin that declares hundreds of kernels in many modules (srcore-cpu: 931 records in 36
``decl`` modules, ~10 ms CPU of every full-registry start) can serve them through
:func:`cached_kernels`: the records are kept as data (``marshal`` of tuples of strings and ints,
never pickle, never code) in ``$SRCORE_CACHE_DIR/records/``, one file per package, environment and set of
installed distributions (``index_path``), and rebuilt by the plugin's own ``build``
function on a miss. The key holds srcore's version, the Python version, the plugin's ``sources``
(files, or directories whose ``*.py`` files count; each one's path, mtime and size), the installed
distributions (the entry-point fingerprint of :mod:`srcore.plugin.discovery`: any install, removal,
upgrade or edit changes it) and the plugin's own ``key`` values (what else its records depend on).
Every stored row goes through the checks of ``Kernel``'s validators again on read, in one pass (a
damaged row is a miss); a hit is a :class:`CachedKernels` sequence whose records are built on first
use, by the registry build directly with their plugin as provider (no second, stamped copy).
A miss, a damaged file or a record that cannot be stored (an ``impl`` or ``matcher`` that is a
callable, not a ``"module:attr"`` string) calls ``build`` and uses its records as they are.
``SRCORE_NO_RECORD_CACHE=1`` turns it off; nothing is written under ``PYTHONDONTWRITEBYTECODE``.
"""
from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from pathlib import Path

from .types import Kernel, PluginInfo, kernel_rows_valid, kernels_from_rows

__all__ = ["CachedKernels", "cached_kernels", "index_path", "sources_fingerprint"]

FORMAT = 1


def _enabled() -> bool:
    return os.environ.get("SRCORE_NO_RECORD_CACHE", "") in ("", "0")


def _stamp(path: str) -> tuple:
    try:
        st = os.stat(path)
    except OSError:
        return (path, None, None)
    return (path, st.st_mtime_ns, st.st_size)


def _sources_key(sources: Iterable) -> tuple:
    out = []
    for src in sources:
        src = os.fspath(src)
        if os.path.isdir(src):
            out.append((src, tuple(sorted(_stamp(e.path) for e in os.scandir(src) if e.name.endswith(".py")))))
        else:
            out.append(_stamp(src))
    return tuple(out)


def sources_fingerprint(sources: Iterable) -> str:
    """A short hash of the ``*.py`` files under ``sources`` (directories, walked recursively, or files):
    each one's path, mtime and size. Any edit, checkout or reinstall changes it; for caches of results
    that depend on the code (a timing cache's winners), not only on the package versions."""
    import hashlib

    stamps = []
    for src in sources:
        src = os.fspath(src)
        if not os.path.isdir(src):
            stamps.append(_stamp(src))
            continue
        for root, dirs, files in os.walk(src):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            stamps.extend(_stamp(os.path.join(root, f)) for f in sorted(files) if f.endswith(".py"))
    return hashlib.sha256(repr(stamps).encode()).hexdigest()[:16]


def _key(sources, extra) -> list:
    from .. import __version__
    from . import discovery

    return (FORMAT, __version__, tuple(sys.version_info[:2]), _sources_key(sources), discovery.installed_key(),
            tuple(extra))


def index_path(package: str) -> Path:
    """One file per package, environment (``sys.prefix`` and srcore's directory) and set of installed
    distributions (:func:`srcore.plugin.discovery.installed_key`), hashed into the name: two
    environments or checkouts sharing a cache directory, or two views of one environment (a program
    started inside a source checkout sees its ``*.egg-info``, one started elsewhere does not), would
    otherwise overwrite each other's entry and miss on every other start. Writing a file removes the
    package's oldest ones beyond :data:`KEEP`."""
    from pathlib import Path

    return Path(_index_file(package))


def _index_file(package: str) -> str:
    """:func:`index_path` as a string (a start does not import ``pathlib``: ``srcore.cachedir``)."""
    from .._digest import small_sha256
    from ..cachedir import cache_dir_str
    from . import discovery

    where = f"{sys.prefix}\0{os.path.dirname(os.path.dirname(__file__))}\0{discovery.installed_key()}"
    tag = small_sha256(where.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return cache_dir_str("records", f"{package}-{sys.implementation.cache_tag}-{tag}.marshal")


KEEP = 6  # files per package: environments and installations in use at the same time


def _prune(path: str) -> None:
    """Remove the package's files beyond the :data:`KEEP` newest (installations that are gone); never
    ``path``, the one just written."""
    folder, name = os.path.split(os.fspath(path))
    prefix = name.rsplit("-", 1)[0] + "-"
    try:
        files = sorted((e for e in os.scandir(folder)
                        if e.name.startswith(prefix) and e.name.endswith(".marshal") and e.name != name),
                       key=lambda e: e.stat().st_mtime_ns, reverse=True)
        for e in files[KEEP - 1:]:
            os.unlink(e.path)
    except OSError:
        pass  # a file another process removed first, a read-only directory


class CachedKernels(Sequence):
    """A plugin's kernel records from the cache (rows that passed ``Kernel``'s checks on read), built
    on first use: :meth:`with_provider` builds them stamped with their plugin (what the registry build
    calls), indexing or iterating builds them unstamped, as the plugin's ``build`` returned them."""

    __slots__ = ("_rows", "_built")

    def __init__(self, rows: tuple):
        self._rows, self._built = rows, None

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        if self._built is None:
            self._built = kernels_from_rows(self._rows, None)
        return self._built[i]

    def with_provider(self, provider: PluginInfo) -> list[Kernel]:
        return kernels_from_rows(self._rows, provider)


def _read(path: str, key: tuple) -> CachedKernels | None:
    from ..cachedir import read_bytes

    try:
        fmt, stored, rows = marshal.loads(read_bytes(path))
        if fmt != FORMAT or stored != key or type(rows) is not tuple or not kernel_rows_valid(rows):
            return None
        return CachedKernels(rows)
    except Exception:  # missing, truncated, not marshal, wrong shape: a miss
        return None


def _write(path: str, key: tuple, kernels: list[Kernel]) -> None:
    rows = []
    for k in kernels:
        if type(k) is not Kernel or not isinstance(k.impl, str) or not (k.matcher is None or isinstance(k.matcher, str)):
            return  # a callable cannot be stored as data
        rows.append((k.op, k.backend, k.kind, tuple(k.dtypes), k.impl, k.matcher, k.priority, k.source))
    try:
        folder, name = os.path.split(os.fspath(path))
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".tmp-{os.getpid()}-{name}")
        with open(tmp, "wb") as f:
            f.write(marshal.dumps((FORMAT, key, tuple(rows))))
        os.replace(tmp, path)  # atomic: a concurrent start never reads half a file
    except (OSError, ValueError):
        return  # a read-only cache directory (or an unmarshallable key value) only costs the build
    _prune(path)


def cached_kernels(package: str, build: Callable[[], Iterable[Kernel]], *, sources: Iterable = (),
                   key: Iterable = ()) -> Sequence[Kernel]:
    """``build()``'s kernel records, from the cache when nothing they depend on changed.

    ``package`` names the cache file (the plugin's package name); ``sources`` are the files (or
    directories of ``*.py`` files) ``build`` reads its records from; ``key`` holds plain values
    (str, int, bool, None, tuples of them) of anything else they depend on (an optional library
    being importable, an environment variable). A ``srcore_kernels`` hook that returns the result as it
    is (rather than yielding its items) lets the registry build the records stamped in one pass.
    """
    if not _enabled():
        return list(build())
    sources = list(sources)
    k = _key(sources, key)
    if k[4] is None:  # distributions the fingerprint cannot see: no cache
        return list(build())
    path = _index_file(package)
    hit = _read(path, k)
    if hit is not None:
        return hit
    kernels = list(build())
    if not sys.dont_write_bytecode and _key(sources, key) == k:  # nothing moved while building
        _write(path, k, kernels)
    return kernels

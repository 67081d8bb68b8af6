"""Finding installed plugins (entry points of a group), with an on-disk cache of the scan.

``importlib.metadata.entry_points(group=...)`` costs every start-up ~15 ms
(importing ``importlib.metadata`` pulls in email, zipfile, csv, ...; then it
reads the metadata of every installed distribution), although its answer only
changes when a distribution is installed, removed, upgraded or edited. So the
answer -- ``(name, value, distribution, version)`` per entry point, never any
code -- is kept in ``$SRCORE_CACHE_DIR/plugins/`` (default
``~/.cache/srcore/plugins/``, beside the schema cache) with a **fingerprint** of
everything the scan reads: for every ``sys.path`` entry, the names of its
``*.dist-info`` / ``*.egg-info`` entries and the ``stat`` (mtime, size, inode)
of each one, of its ``entry_points.txt`` and of its ``METADATA`` /
``PKG-INFO``. Taking the fingerprint is a few hundred ``stat`` calls (~0.5 ms);
any install, removal, upgrade or edit of a distribution changes it and the
next start rescans. The plugins themselves are imported afresh every time:
the cache holds names, so it can never serve a stale kernel.

A start that needs only some entry points (a selective build names its plugins) can skip even the
fingerprint: :func:`entry_points` with ``only=`` checks the ``stat`` of each ``sys.path`` directory (a
distribution installed, removed or upgraded there adds or removes an entry, which changes the
directory's mtime) and of the named entry points' own metadata files (an edit in place), against what
they were at the last full fingerprint; anything else, or a directory that changed and holds
metadata, falls back to the full fingerprint.

The cache is not used (a plain scan runs) when ``SRCORE_NO_PLUGIN_CACHE=1``,
when a finder other than the standard path finder can provide distributions or
``sys.path`` holds a non-string entry (the fingerprint would not see what they
provide), or when ``importlib.metadata.entry_points``
has been replaced (tests fake entry points that way). A corrupt or unreadable
cache file is ignored and rewritten; an unwritable cache directory only costs
the scan.
"""
from __future__ import annotations

import marshal
import os
import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any, Collection

if TYPE_CHECKING:
    from pathlib import Path

from .._digest import small_sha256
from .._lazyre import LazyPattern
from ..cachedir import cache_dir_str, cache_root, read_bytes

__all__ = ["CachedEntryPoint", "entry_points", "scan", "fingerprint", "installed_key", "cache_dir", "FORMAT"]

FORMAT = 3  # bump when the file layout below changes
_INFO_SUFFIXES = (".dist-info", ".egg-info")
_SCANNED_SUFFIXES = (*_INFO_SUFFIXES, ".egg")
# importlib.metadata.EntryPoint.pattern: "module", "module:attr.sub", with optional "[extras]"
_VALUE_RE = LazyPattern(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


def _dotted(s: str) -> bool:
    """``s`` matches ``[\\w.]+`` (word characters as ``re`` has them: alphanumerics and ``_``, and dots)."""
    return s.replace(".", "_").replace("_", "a").isalnum()


def _split_value(value: str) -> tuple[str, str | None] | None:
    """(module, attr or None) of an entry point's value, as ``_VALUE_RE`` reads it; the regex (compiled then)
    only for values with spaces or extras: the plain ``module[:attr]`` of every plugin needs no compiling."""
    module, colon, attr = value.partition(":")
    if _dotted(module) and (not colon or _dotted(attr)):
        return module, (attr if colon else None)
    m = _VALUE_RE.match(value)
    return None if m is None else (m.group("module"), m.group("attr"))


class _Dist:
    """The part of ``importlib.metadata.Distribution`` the plugin manager reads."""

    __slots__ = ("name", "version")

    def __init__(self, name: str | None, version: str | None):
        self.name, self.version = name, version


class CachedEntryPoint:
    """An entry point read from the cache: ``name``, ``value``, ``group``, ``dist`` and ``load()``,
    like ``importlib.metadata.EntryPoint`` (load imports the module and resolves the attribute)."""

    __slots__ = ("name", "value", "group", "dist")

    def __init__(self, name: str, value: str, group: str, dist_name: str | None, dist_version: str | None):
        self.name, self.value, self.group = name, value, group
        self.dist = _Dist(dist_name, dist_version)

    def load(self) -> Any:
        parts = _split_value(self.value)
        if parts is None:
            raise ValueError(f"entry point {self.name!r} has an invalid value {self.value!r}")
        obj: Any = import_module(parts[0])
        for part in filter(None, (parts[1] or "").split(".")):
            obj = getattr(obj, part)
        return obj

    def __repr__(self) -> str:
        return f"CachedEntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def cache_dir() -> Path:
    """``$SRCORE_CACHE_DIR/plugins`` or ``~/.cache/srcore/plugins`` (``$XDG_CACHE_HOME`` honoured)."""
    return cache_root() / "plugins"


def _enabled() -> bool:
    return os.environ.get("SRCORE_NO_PLUGIN_CACHE", "") in ("", "0")


def _stat(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _search_path() -> list[str]:
    # importlib.metadata reads "" as the current directory
    return [p or os.getcwd() for p in sys.path]


def fingerprint(paths: list[str] | None = None) -> tuple:
    """What an entry-point scan of ``paths`` (default ``sys.path``) depends on, as a marshal-able tuple."""
    out = []
    for p in _search_path() if paths is None else paths:
        try:
            names = os.listdir(p)
        except NotADirectoryError:  # a zip (or egg file) on sys.path: its own stat covers its contents
            out.append((p, _stat(p)))
            continue
        except OSError:
            out.append((p, None))
            continue
        infos = []
        # filter before sorting: site-packages holds ~2,000 names, ~140 of them metadata directories
        for n in sorted(n for n in names if n.lower().endswith(_SCANNED_SUFFIXES)):
            low = n.lower()
            d = os.path.join(p, n)
            meta = "METADATA" if low.endswith(".dist-info") else "PKG-INFO"
            infos.append((n, _stat(d), _stat(os.path.join(d, "entry_points.txt")),
                          _stat(os.path.join(d, meta)),
                          _stat(os.path.join(d, "EGG-INFO", "entry_points.txt")) if low.endswith(".egg")
                          else None))
        out.append((p, tuple(infos)))
    return tuple(out)


def _standard_finder(f) -> bool:
    """The stdlib's PathFinder, or the ``importlib_metadata`` backport's MetadataPathFinder, which
    importing dask (or anything using the backport) adds: both find distributions on ``sys.path``
    alone, which the fingerprint covers."""
    from importlib.machinery import PathFinder

    if f is PathFinder:
        return True
    cls = f if isinstance(f, type) else type(f)
    return cls.__name__ == "MetadataPathFinder" and cls.__module__ == "importlib_metadata"


def _cacheable() -> bool:
    """True if the fingerprint sees everything a scan would: only finders that read ``sys.path``
    provide distributions, and every ``sys.path`` entry is a plain string."""
    return (all(isinstance(p, str) for p in sys.path)
            and all(_standard_finder(f) for f in sys.meta_path if getattr(f, "find_distributions", None) is not None))


def _patched() -> bool:
    """True if ``importlib.metadata.entry_points`` was replaced (then it is the truth, not the cache)."""
    md = sys.modules.get("importlib.metadata")
    return md is not None and getattr(md.entry_points, "__module__", None) != "importlib.metadata"


def scan(group: str) -> list:
    """The entry points of ``group``, from importlib.metadata (no cache)."""
    import importlib.metadata as md

    return list(md.entry_points(group=group))


def _records(eps) -> tuple:
    out = []
    for ep in eps:
        dist = getattr(ep, "dist", None)
        meta = getattr(dist, "_path", None)  # importlib.metadata.PathDistribution: its metadata directory
        out.append((ep.name, ep.value, getattr(dist, "name", None) if dist is not None else None,
                    getattr(dist, "version", None) if dist is not None else None,
                    os.fspath(meta) if isinstance(meta, (str, os.PathLike)) else None))
    return tuple(out)


def _cache_file(group: str, paths: list[str]) -> str:
    from .. import __version__

    h = small_sha256()
    for part in (group, sys.executable, *paths, __version__, f"{FORMAT}{sys.version_info[:2]}"):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return cache_dir_str("plugins", f"ep-{h.hexdigest()[:32]}.marshal")


def _read(path: str, fp: tuple):
    try:
        data = marshal.loads(read_bytes(path))
        fmt, stored_fp, records = data
        if fmt != FORMAT or stored_fp != fp:
            return None
        for r in records:  # damaged tuples must not reach the manager
            if len(r) != 5 or not all(isinstance(x, str) or (x is None and i >= 2) for i, x in enumerate(r)):
                return None
        return records
    except Exception:  # missing, truncated, not marshal, wrong shape: a miss
        return None


def _write(path: str, fp: tuple, records: tuple) -> None:
    _write_data(path, (FORMAT, fp, records))


def _write_data(path: str, data: tuple) -> None:
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        import tempfile  # only when writing: ~2 ms of imports (shutil, random) a warm start skips

        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".marshal")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(data))
        os.replace(tmp, path)  # atomic: a concurrent start never reads half a file
    except (OSError, ValueError):
        pass  # a read-only home only costs the scan


def discover(group: str) -> tuple[list, bool]:
    """``(entry points of group, served from the cache?)``."""
    if not _enabled() or _patched() or not _cacheable():
        return scan(group), False
    paths = _search_path()
    dirs = _dir_stamps(paths)  # before the fingerprint: a change while it is taken makes the next check miss
    full = fingerprint(paths)
    _last_fingerprint[:] = [paths, full]
    fp = _with_distributions(full)  # what a scan reads: the same from any working directory
    path = _cache_file(group, [entry[0] for entry in fp])
    records = _read(path, fp)
    if records is not None:
        _note_quick(group, dirs, fp, records)
        return [CachedEntryPoint(n, v, group, d, ver) for n, v, d, ver, _ in records], True
    eps = scan(group)
    records = _records(eps)
    # a distribution installed while we scanned would make the stored fingerprint describe the wrong
    # state: store only if nothing moved (otherwise the next start simply scans again)
    if _with_distributions(fingerprint(paths)) == fp:
        _write(path, fp, records)
        _note_quick(group, dirs, fp, records)
    return eps, False


# -- the check of a start that needs only some entry points -----------------------------------------------
def _dir_stamps(paths: list[str]) -> tuple:
    return tuple((p, _stat(p)) for p in paths)


def _meta_stamps(meta: str) -> tuple:
    """What the fingerprint records of one metadata directory (itself, its entry points, its metadata)."""
    low = meta.lower()
    name = "METADATA" if low.endswith(".dist-info") else "PKG-INFO"
    return (_stat(meta), _stat(os.path.join(meta, "entry_points.txt")), _stat(os.path.join(meta, name)))


def _quick_file(group: str) -> str:
    from .. import __version__

    h = small_sha256()
    for part in (group, sys.executable, __version__, f"{FORMAT}{sys.version_info[:2]}"):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return cache_dir_str("plugins", f"quick-{h.hexdigest()[:32]}.marshal")


def _note_quick(group: str, dirs: tuple, fp: tuple, records: tuple) -> None:
    """After a full check: the stamps :func:`_quick` compares (rewritten only when they changed)."""
    if not all(r[4] for r in records):
        return  # an entry point whose metadata directory is unknown: the quick check cannot vouch for it
    stamps = {os.path.join(p, n): (st, ep, meta) for p, infos in fp if infos and isinstance(infos[0], tuple)
              for n, st, ep, meta, _ in infos}
    rows = []
    for r in records:
        stamp = stamps.get(r[4])
        if stamp is None:
            return
        rows.append((*r, stamp))
    with_dists = {entry[0] for entry in fp}
    # directories without any: their stamps too (listing the standard library's at every start was ~0.6 ms);
    # one whose stamp moved, or that is not among them (another working directory), is listed
    empty = tuple((p, st) for p, st in dirs if p not in with_dists and st is not None)
    data = (FORMAT, tuple((p, st) for p, st in dirs if p in with_dists), tuple(rows), empty)
    path = _quick_file(group)
    try:
        if marshal.loads(read_bytes(path)) == data:
            return
    except Exception:
        pass
    _write_data(path, data)


def _has_metadata(p: str) -> bool:
    try:
        return any(n.lower().endswith(_SCANNED_SUFFIXES) for n in os.listdir(p))
    except OSError:
        return False


def _quick(group: str, only: Collection[str]) -> list | None:
    """The entry points of ``group`` named in ``only``, if the stamps recorded at the last full check
    say nothing they depend on changed; None otherwise."""
    try:
        fmt, dirs, rows, empty = marshal.loads(read_bytes(_quick_file(group)))
        if fmt != FORMAT:
            return None
        known, without = dict(dirs), dict(empty)
        paths = _search_path()
        for p in paths:
            if p in known:
                if _stat(p) != known[p]:  # a distribution installed, removed or upgraded there
                    return None
            elif p in without and _stat(p) == without[p]:
                continue   # had none at the last check, and no entry was added or removed since
            elif _has_metadata(p):  # a directory with distributions the last check did not see
                return None
        # the same directories hold distributions, in the same order (the first of two same-named wins)
        if [p for p in paths if p in known] != [p for p, _ in dirs]:
            return None
        out = []
        for name, value, dist, version, meta, stamp in rows:
            if name in only:
                if not isinstance(value, str) or _meta_stamps(meta) != tuple(stamp):
                    return None
                out.append(CachedEntryPoint(name, value, group, dist, version))
        return out
    except Exception:  # missing, damaged, or another layout: the full check
        return None


def _with_distributions(fp: tuple) -> tuple:
    """The fingerprint's entries that hold distribution metadata (or are zip files): a ``sys.path``
    entry without any (the script's directory, the current directory of ``python -c``, a source
    checkout) adds nothing to a scan, so starting a program from another directory is the same
    installation, not a cache miss."""
    return tuple(entry for entry in fp if entry[1])


_last_fingerprint: list = []  # [paths, fingerprint] of this process's last discovery


def installed_key() -> str | None:
    """A digest of the installed distributions (the fingerprint of ``sys.path``'s metadata directories):
    any install, removal, upgrade or edit changes it. Reuses the fingerprint this process's discovery
    took when ``sys.path`` has not changed since. None when a finder the fingerprint cannot see
    provides distributions (see :func:`_cacheable`).

    ``sys.path`` entries without distribution metadata are left out (:func:`_with_distributions`): with
    them the key, and every cache keyed on it, changed whenever a program started from another
    directory (the kernel-record cache then missed on every other start)."""
    if not _cacheable():
        return None
    paths = _search_path()
    fp = _last_fingerprint[1] if _last_fingerprint and _last_fingerprint[0] == paths else fingerprint(paths)
    return small_sha256(marshal.dumps(_with_distributions(fp))).hexdigest()


def entry_points(group: str, *, only: Collection[str] | None = None) -> list:
    """The entry points of ``group`` (``name``, ``value``, ``dist.name``, ``dist.version``, ``load()``);
    with ``only``, those of these names (checked by the stamps they depend on when the cache allows)."""
    if only is not None:
        if _enabled() and not _patched() and _cacheable():
            eps = _quick(group, only)
            if eps is not None:
                return eps
        return [ep for ep in discover(group)[0] if ep.name in only]
    return discover(group)[0]

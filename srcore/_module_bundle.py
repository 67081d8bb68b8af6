"""The compiled code of srcore's modules in one cache file, so that a start imports them without searching.

Importing a module the usual way costs ~80-120 us of CPU on the reference VM (docs/performance.md) before
its code runs: ``PathFinder`` asks the parent package's ``FileFinder`` (path joins, a ``stat`` of the directory
and of the file, a spec), then ``SourceFileLoader`` finds, opens, reads and checks the ``.pyc``. A cold start of
the digits model imports ~110 modules of srcore and its plugins: ~4 ms of srcore's ~57 ms of CPU here.

This meta-path finder, put just before ``PathFinder`` by ``import srcore``, holds the code objects of the
modules earlier processes imported (submodules of srcore, its plugins ``srcore_*``, attrs and pluggy), read
from one file (an index, then each module's code read when it is imported), ``$SRCORE_CACHE_DIR/modules/`` (default ``~/.cache/srcore/modules/``), one per srcore
installation directory and Python bytecode version (magic number). An entry serves an import only where
``PathFinder`` would find the same file:

- the import is of a submodule (top-level modules need ``sys.path``: they are left to ``PathFinder``) whose
  parent package's ``__path__`` is the one directory the entry's file is in (its parent's, for a package);
- that directory's ``st_mtime_ns`` is the one recorded (a file added or removed there, e.g. an extension
  module or a package of the same name that ``FileFinder`` would prefer, changes it);
- the source file's ``st_mtime_ns`` and size are the ones its code was compiled from (checked when the module
  is loaded, as the ``.pyc`` check does, in nanoseconds rather than seconds).

Anything else goes to ``PathFinder`` as before, and the modules it loaded for this finder's scope are added
to the file when the process exits (from their ``.pyc``, through their own loader). The modules it serves
are ordinary source modules: their loader is a ``SourceFileLoader`` (``get_source``, resources) with the
same ``__file__``, ``__cached__`` and ``__path__``, and their code is the ``.pyc``'s (``co_filename`` the
source's path). Like the bytecode cache, nothing is written when ``sys.dont_write_bytecode`` is set;
``SRCORE_NO_MODULE_BUNDLE=1`` turns it off. A damaged or foreign file is ignored and rewritten.
"""
from __future__ import annotations

import os
import sys
from importlib._bootstrap import ModuleSpec
from importlib._bootstrap_external import MAGIC_NUMBER, PathFinder, SourceFileLoader

__all__ = ["install", "bundle_file", "BundleFinder"]

#: top-level packages whose submodules are served (srcore, its plugins, its start-up dependencies)
_SCOPE = ("srcore", "attr", "attrs", "pluggy")
_MAX_ENTRIES = 2000   # beyond this the file keeps this process's modules only (old checkouts' pile up)
_FORMAT = 1
_HEAD = 8   # the file: the index's length (8 bytes, little-endian), the index (marshal), the code objects

#: name -> (file, its mtime_ns, its size, directory searched, its mtime_ns, is package, offset, length)
_entries: dict[str, tuple] = {}
_dirs: dict[str, bool] = {}      # directory -> its recorded mtime matched (one stat a process)
_wanted: set[str] = set()        # names in scope that PathFinder found: added to the file at exit
_stale: set[str] = set()         # entries whose file or directory changed: replaced or dropped at exit
_fd: list[int] = []              # the open bundle file (its code objects are read when imported)
_path: list[str] = []            # this process's bundle file
stats = {"hits": 0, "misses": 0}


def _in_scope(name: str) -> bool:
    top = name.partition(".")[0]
    return top in _SCOPE or top.startswith("srcore_")


def _enabled() -> bool:
    return os.environ.get("SRCORE_NO_MODULE_BUNDLE", "") in ("", "0")


def bundle_file() -> str:
    """The bundle of this srcore installation (its package directory) and Python bytecode version."""
    from ._digest import small_sha256
    from .cachedir import cache_dir_str

    here = os.path.dirname(os.path.abspath(__file__))
    h = small_sha256(here.encode("utf-8", "surrogatepass") + b"\0" + MAGIC_NUMBER).hexdigest()[:24]
    return cache_dir_str("modules", f"{sys.implementation.cache_tag}-{h}.bundle")


def _open(path: str) -> tuple[int, dict] | None:
    """The open file and its index, or None (missing, damaged, another format or Python)."""
    import marshal

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        size = int.from_bytes(os.pread(fd, _HEAD, 0), "little")
        index = marshal.loads(os.pread(fd, size, _HEAD))
        if not (isinstance(index, tuple) and len(index) == 3 and index[0] == _FORMAT and index[1] == MAGIC_NUMBER
                and isinstance(index[2], dict)):
            raise ValueError("not a module bundle of this format and Python")
        base = _HEAD + size
        entries = {k: v[:6] + (base + v[6], v[7]) for k, v in index[2].items()
                   if isinstance(k, str) and isinstance(v, tuple) and len(v) == 8}
    except Exception:  # truncated, not marshal, foreign: a cold cache
        os.close(fd)
        return None
    return fd, entries


def _code_bytes(entry: tuple) -> bytes | None:
    try:
        data = os.pread(_fd[0], entry[7], entry[6])
    except (OSError, IndexError):
        return None
    return data if len(data) == entry[7] else None


def _dir_ok(folder: str, mtime_ns: int) -> bool:
    ok = _dirs.get(folder)
    if ok is None:
        try:
            ok = os.stat(folder).st_mtime_ns == mtime_ns
        except OSError:
            ok = False
        _dirs[folder] = ok
    return ok


class _Loader(SourceFileLoader):
    """``SourceFileLoader`` whose code comes from the bundle while the source is the one it was compiled from."""

    def get_code(self, fullname):
        entry = _entries.get(fullname)
        if entry is not None and entry[0] == self.path and fullname not in _stale:
            try:
                st = os.stat(self.path)
            except OSError:
                st = None
            if st is not None and st.st_mtime_ns == entry[1] and st.st_size == entry[2]:
                import marshal

                data = _code_bytes(entry)
                try:
                    code = marshal.loads(data) if data is not None else None
                except Exception:  # a damaged entry: the .pyc below
                    code = None
                if type(code) is type(_code_bytes.__code__):
                    stats["hits"] += 1
                    return code
            _stale.add(fullname)
        _wanted.add(fullname)
        stats["misses"] += 1
        return super().get_code(fullname)


class BundleFinder:
    """The meta-path finder of the bundle's modules (put just before ``PathFinder``)."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if path is None or target is not None:
            return None   # top-level (sys.path's order decides) or a reload into a given module
        entry = _entries.get(name)
        if entry is None or name in _stale:
            if _in_scope(name):
                _wanted.add(name)
            return None
        try:
            parent = path[0] if len(path) == 1 else None
        except TypeError:
            parent = None
        if parent != entry[3] or not _dir_ok(entry[3], entry[4]):
            _stale.add(name)
            _wanted.add(name)
            return None
        file, is_pkg = entry[0], entry[5]
        spec = ModuleSpec(name, _Loader(name, file), origin=file, is_package=is_pkg)
        spec.has_location = True
        if is_pkg:
            spec.submodule_search_locations = [os.path.dirname(file)]
        return spec

    @classmethod
    def invalidate_caches(cls):
        _dirs.clear()


def _searched_dir(file: str, is_pkg: bool) -> str:
    """The directory ``FileFinder`` found ``file`` in (a package's ``__init__.py``: its parent's)."""
    folder = os.path.dirname(file)
    return os.path.dirname(folder) if is_pkg else folder


def _collect() -> dict:
    """``{name: (entry fields, marshalled code)}`` of the modules in scope that ``PathFinder`` (or a stale
    entry's ``.pyc``) loaded in this process."""
    import marshal

    out = {}
    for name in list(_wanted):
        mod = sys.modules.get(name)
        spec = getattr(mod, "__spec__", None)
        loader = getattr(spec, "loader", None)
        if type(loader) not in (SourceFileLoader, _Loader) or not isinstance(spec.origin, str):
            continue   # extension modules, namespace packages, other loaders: PathFinder's
        file = spec.origin
        if not file.endswith(".py") or getattr(loader, "path", None) != file:
            continue
        is_pkg = spec.submodule_search_locations is not None
        searched = _searched_dir(file, is_pkg)
        parent = sys.modules.get(name.rpartition(".")[0])
        if list(getattr(parent, "__path__", None) or ()) != [searched]:
            continue   # found along a multi-directory __path__: the order of directories decides
        try:
            st = os.stat(file)
            dir_mtime = os.stat(searched).st_mtime_ns
            code = SourceFileLoader.get_code(loader, name)   # the .pyc (or the source) as PathFinder reads it
        except (OSError, ImportError, SyntaxError, ValueError):
            continue
        if code is not None:
            out[name] = ((file, st.st_mtime_ns, st.st_size, searched, dir_mtime, is_pkg), marshal.dumps(code))
    return out


def _write(path: str) -> None:
    """Add this process's new modules to the file (and drop its stale entries)."""
    if sys.dont_write_bytecode or not _wanted:
        return
    import marshal

    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        new = _collect()
        if not new and not _stale:
            return
        # the file as it is now (another process may have rewritten it since this one read it)
        opened = _open(path)
        old: dict = {}
        if opened is not None:
            fd, entries = opened
            try:
                for name, e in entries.items():
                    if name in _stale or name in new:
                        continue
                    data = os.pread(fd, e[7], e[6])
                    if len(data) == e[7]:
                        old[name] = (e[:6], data)
            finally:
                os.close(fd)
        merged = {**old, **new}
        if len(merged) > _MAX_ENTRIES:
            merged = {k: v for k, v in merged.items() if k in sys.modules}
        index, blobs, offset = {}, [], 0
        for name, (fields, data) in merged.items():
            index[name] = (*fields, offset, len(data))
            blobs.append(data)
            offset += len(data)
        head = marshal.dumps((_FORMAT, MAGIC_NUMBER, index))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(len(head).to_bytes(_HEAD, "little"))
            f.write(head)
            f.writelines(blobs)
        os.replace(tmp, path)   # atomic: a concurrent start never reads half a file
    except Exception:  # never fail an exit over a cache
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _insert_finder() -> None:
    meta = sys.meta_path
    if BundleFinder in meta:
        return
    try:
        at = meta.index(PathFinder)
    except ValueError:
        at = len(meta)
    meta.insert(at, BundleFinder)


def install() -> None:
    """Serve the bundled modules from now on and add this process's imports in scope at exit."""
    if _path or not _enabled() or not hasattr(os, "pread"):   # (no pread: Windows) PathFinder as before
        return
    path = bundle_file()
    _path.append(path)
    opened = _open(path)
    if opened is not None:
        _fd.append(opened[0])
        _entries.update(opened[1])
    _insert_finder()
    import atexit

    atexit.register(_write, path)

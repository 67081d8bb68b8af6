"""The prepared-model cache: a model read from a ``.srm`` file is kept prepared, so the next process skips the passes.

A load of a ``.srm`` file saved prepared (``StaticModule.save(path, prepared=True)``, ``srcore.runtime.prepared``)
runs no pass and, usually, no shape propagation. This cache gives a model loaded from an ordinary file the same
start from its second process on: once the first call of a ``StaticModule`` of a model that ``srcore.load`` read
(and nothing changed since) has returned, a thread of its own saves the module prepared to
``$SRCORE_CACHE_DIR/prepared/<header>/<key>.srm`` (:class:`Writer`: no call waits for it); a later load whose
key is the same reads that file and uses its graph (``sm.prepared_before`` and ``sm.prepared_cache == "hit"``).
``<header>`` stands for the file's header checksum: a later ``srcore.load`` of a file whose header this srcore
has read before does not parse its graph until something uses it (:func:`parsed_before`,
``srcore.format.lazy_graph``), so a hit parses one graph, the entry's.

The key is a BLAKE2b-256 of everything the prepared graph depends on:

- the model as it is now, not only as it was read: its graph's IR text (which carries every node, attribute and
  type: the file's text while the graph was never parsed, else the graph printed) and the bytes of the file's
  data section, hashed at each load (BLAKE2b, ~0.1 ms for a 60 kB file; a size/mtime shortcut would miss an edit
  within the file system's time granularity), with every tensor constant of a parsed graph checked to be the
  array the file mapped for its name (a model whose graph was edited or whose parameters were replaced in memory
  gets another key, or none); its input specs (with the graph's inputs, they decide the input types), output
  names, metadata, plugin requirements and recorded schemas;
- the registry and options, as a prepared record's fingerprint (``prepared.fingerprint``: a selection's
  contents, or the loaded plugins with their distributions, versions and states; every option but
  ``selection`` and ``prepared_cache``) and the backends;
- srcore itself: its version, the Python version, and the name, mtime and size of every source file of
  the packages a preparation runs (``ir``, ``ops``, ``passes``, ``runtime``): an edited checkout misses.

A cache file is a ``.srm`` file (safetensors and JSON: reading one executes nothing), written atomically; it
is read with its data checksum verified (the BLAKE2b-256 it records as ``data_blake2b``, covered by the header
checksum: ~3.4x fewer instructions than the ``data_sha256`` every ``.srm`` file carries) and its prepared record
matched as any prepared file's is, so an
entry that is truncated, corrupt or made for another load is a miss: the load prepares the model as usual
and rewrites the entry. Models built in memory (``srcore.Model``, ``Graph``) are not cached: they are mutable
and have no content digest short of hashing every parameter; nor are loads with engine backends (engines
rewrite the graph; ``srcore build`` keeps those) or ones that decomposed ops (``save(prepared=True)`` refuses
them), nor files whose data section exceeds :data:`MAX_DATA_BYTES` (64 MiB). Off with
``Options(prepared_cache=False)`` or ``SRCORE_NO_PREPARED_CACHE=1``; like srcore's other caches nothing is
written under ``PYTHONDONTWRITEBYTECODE``. At most :data:`MAX_ENTRIES` files are kept
(the least recently written go).
"""
from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any

from .._lazylog import LazyLogger

log = LazyLogger("srcore.runtime")

FORMAT = 3  # 3: BLAKE2b keys, entries checked by their data_blake2b
MAX_ENTRIES = 64
#: a file whose data section is larger is not cached: hashing it at every load (~0.7 ms a MB) would cost more than
#: the passes save, and each entry would copy its weights
MAX_DATA_BYTES = 64 << 20
#: packages whose code decides what a prepared graph is (passes, shape rules, decompositions, the IR text)
_SOURCE_PACKAGES = ("ir", "ops", "passes", "runtime")

#: Model -> (file path, the arrays its graph's constants were bound to, the file's mapped data section, its
#: header checksum)
_sources: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()
_source_state: list[str] = []
#: entry path -> the thread writing it (:class:`Writer`)
_writing: dict[str, "Writer"] = {}
_writing_lock = threading.Lock()


def remember(model: Any, path: Any, params: dict, data: Any, header_digest: str) -> None:
    """Called by ``srcore.format.srm.load``: ``model`` was read from ``path``; ``data`` is its mapped data section,
    ``header_digest`` its header's checksum."""
    try:
        _sources[model] = (os.fspath(path), dict(params), data, header_digest)
    except TypeError:   # not weak-referenceable: never cached
        pass


def _enabled() -> bool:
    return os.environ.get("SRCORE_NO_PREPARED_CACHE", "") in ("", "0")


def _header_folder(header_digest: str) -> str:
    """The folder of the entries made from files with this header (what ``parsed_before`` looks for)."""
    from .. import __version__
    from .._digest import small_blake2b
    from ..cachedir import cache_dir_str

    return cache_dir_str("prepared", small_blake2b(repr((FORMAT, __version__, header_digest)).encode()).hexdigest()[:32])


def parsed_before(header_digest: str) -> bool:
    """True if this srcore version made an entry from a file with this header (checksum), so read, parsed and
    checked it: ``srcore.load`` may then leave the graph to parse until it is used (``srcore.format.lazy_graph``).
    One ``stat``; False with the cache off (``SRCORE_NO_PREPARED_CACHE=1``)."""
    return _enabled() and os.path.isdir(_header_folder(header_digest))


def _srcore_sources() -> str:
    """Name, mtime and size of every source file of the packages a preparation runs (one scan a process)."""
    if not _source_state:
        from .._digest import small_blake2b

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = small_blake2b()
        todo = [os.path.join(root, p) for p in _SOURCE_PACKAGES]
        while todo:
            folder = todo.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                if e.name.endswith(".py"):
                    st = e.stat()
                    h.update(f"{e.path}\0{st.st_mtime_ns}\0{st.st_size}\n".encode("utf-8", "surrogatepass"))
                elif e.is_dir() and e.name != "__pycache__":
                    todo.append(e.path)
        _source_state.append(h.hexdigest())
    return _source_state[0]


def _data_digest(data: Any) -> str:
    """BLAKE2b-256 of the data section: as strong as SHA-256 for the key, and ~3.4x fewer instructions than
    CPython's own SHA-256 (3.1 M for digits' 58 kB) without loading OpenSSL (``hashlib``: ~10 M)."""
    from .._digest import small_blake2b

    return small_blake2b(data).hexdigest()


def _graph_text(model: Any, arrays: dict) -> str | None:
    """The graph as the key has it: the file's text while the graph was never parsed (it cannot have been
    edited), else the graph printed (None if a tensor constant is not the array the file mapped)."""
    from ..format.lazy_graph import unparsed_text

    text = unparsed_text(model)
    if text is not None:
        return text
    from ..model import CONSTANT

    for n in model.graph.all_nodes():
        if n.kind == CONSTANT and "value" in n.attrs and hasattr(n.attrs["value"], "shape"):
            name = n.attrs.get("param")
            if name is None or arrays.get(name) is not n.attrs["value"]:
                return None   # a tensor the file did not map under that name: edited in memory
    from ..ir.printer import print_graph

    # a file written by srcore holds its graph as this prints it: a parsed, unedited graph gets the key of the
    # same file read without parsing (the lazy load of a later process)
    return print_graph(model.graph)


def entry_for(model: Any, options: Any, registry: Any, pm: Any) -> str | None:
    """The cache file of this load of ``model``, or None when it cannot be cached (see the module's doc).

    The input types are no part of the key: the specs and the graph's text (its inputs' types) decide them."""
    try:
        src = _sources.get(model)
    except TypeError:   # not weak-referenceable: not read from a file
        return None
    if src is None:
        return None
    path, arrays, data, header_digest = src
    if len(data) > MAX_DATA_BYTES:
        return None
    from .prepared import fingerprint

    fp = fingerprint(registry, options, pm)
    if not fp:
        return None
    from .. import __version__
    from .._digest import small_blake2b

    try:
        text = _graph_text(model, arrays)
        if text is None:
            return None
        # the machine too: a load's timed choices (dense vs routed MoE layers, ...) hold only where they were timed
        from ..cpu_features import cpu_name

        machine = (cpu_name(), os.cpu_count(),
                   [os.environ.get(v, "") for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")])
        material = repr((FORMAT, __version__, tuple(sys.version_info[:3]), machine, _srcore_sources(), text,
                         _data_digest(data), [s.to_json() if hasattr(s, "to_json") else repr(s)
                                              for s in model.input_specs],
                         list(model.output_names), sorted(model.metadata.items()), repr(model.plugins),
                         [str(s) for s in model.op_schemas], fp, list(options.backends)))
    except Exception as exc:  # noqa: BLE001 - a model the key cannot describe is simply not cached
        log.debug("prepared cache: %s not cached (%s)", path, exc)
        return None
    key = small_blake2b(material.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return os.path.join(_header_folder(header_digest), key + ".srm")


def read(entry: str) -> Any:
    """The model kept at ``entry``, or None (absent, truncated, corrupt: the load prepares as usual). An entry
    this process is writing is waited for (a second load of a file in one process reads what the first made)."""
    writer = _writing.get(entry)
    if writer is not None and writer.thread is not threading.current_thread():
        writer.hurry()
        writer.thread.join()
    try:
        os.stat(entry)
    except OSError:
        return None
    from ..errors import SrcoreError
    from ..format.srm import load

    try:
        return load(entry, verify="entry")   # the data checksum too: a flipped weight must not be used
    except (SrcoreError, OSError, ValueError) as exc:
        log.info("prepared cache: ignoring %s (%s)", entry, exc)
        return None


class Writer:
    """The thread that writes a module's entry. Started by the load (``StaticModule``), it polls, holding no
    interpreter lock between polls, until :meth:`go` has told it the module's first call returned, then writes,
    :data:`WRITE_DELAY` later: no call waits for the write (~half of a cold first call's time, printing the
    prepared graph and parsing it back; it takes the interpreter lock from the calls running meanwhile, so not
    right after the first), and the first call pays for no thread start (``Thread.start`` waits for the new
    thread to run: milliseconds on a busy machine) nor a wake-up (the woken thread took the interpreter lock from
    the first call: 1.9 ms of a 50 us call), only for setting a flag. A daemon thread, so that a process whose
    module is never called does not wait for it (a module dropped uncalled ends it); the writes begun are waited
    for at exit, so even a one-call script leaves its entry; a process killed meanwhile leaves none (or a stray
    temporary file), never half an entry."""

    def __init__(self, sm: Any, entry: str):
        global _at_exit
        self.entry = entry
        self._module = weakref.ref(sm)
        self._event = threading.Event()   # set: look now (the module was dropped, or someone waits)
        self._write = False
        weakref.finalize(sm, self._event.set)
        if not _at_exit:
            import atexit

            atexit.register(wait_for_writes)   # (after the interpreter's own wait for non-daemon threads)
            _at_exit = True
        self.thread = threading.Thread(target=self._run, name="srcore-prepared-cache", daemon=True)
        self.thread.start()

    def go(self) -> None:
        """The module's first call has returned: write (unless this process writes the entry already)."""
        with _writing_lock:
            if self.entry not in _writing:
                _writing[self.entry] = self
                self._write = True

    def hurry(self) -> None:
        """Write now, without waiting for the next poll and :data:`WRITE_DELAY`."""
        self._event.set()

    def _run(self) -> None:
        while not self._write:
            if self._event.wait(WRITE_DELAY) and not self._write:
                return   # the module went uncalled
        self._event.wait(WRITE_DELAY)
        try:
            sm = self._module()
            if sm is not None:
                write(sm, self.entry)
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be written is no error of the caller's
            log.info("prepared cache: not writing %s (%s: %s)", self.entry, type(exc).__name__, exc)
        finally:
            sm = None
            with _writing_lock:
                _writing.pop(self.entry, None)


_at_exit = False
#: seconds between a writer's polls, and from the poll that finds the first call returned to the write (unless
#: waited for)
WRITE_DELAY = 1.0


def wait_for_writes(timeout: float | None = None) -> bool:
    """Wait until the entries this process is writing are written (or ``timeout`` seconds); True if none is left."""
    import time

    deadline = None if timeout is None else time.monotonic() + timeout
    for writer in list(_writing.values()):
        writer.hurry()
        writer.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return not _writing


def write(sm: Any, entry: str) -> bool:
    """Save ``sm`` prepared at ``entry`` (atomically); False if it cannot be (never an error for the caller)."""
    if sys.dont_write_bytecode:
        return False
    from ..errors import SrcoreError
    from .static_module import _save_prepared

    try:
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        _save_prepared(sm, entry, "srcore prepared cache", cache_entry=True)
    except (SrcoreError, OSError, ValueError, TypeError) as exc:
        log.info("prepared cache: not writing %s (%s)", entry, exc)
        return False
    _prune(os.path.dirname(os.path.dirname(entry)))
    return True


def _prune(root: str) -> None:
    """Keep the :data:`MAX_ENTRIES` most recently written entries (``root/<header>/<key>.srm``; older formats' files
    directly in ``root`` go too), and no empty header folder."""
    try:
        files, folders = [], []
        for e in os.scandir(root):
            if e.is_dir(follow_symlinks=False):
                folders.append(e.path)
                files.extend(f for f in os.scandir(e.path) if f.name.endswith(".srm"))
            elif e.name.endswith(".srm"):
                files.append(e)
        if len(files) > MAX_ENTRIES:
            files.sort(key=lambda e: e.stat().st_mtime_ns, reverse=True)
            for e in files[MAX_ENTRIES:]:
                os.unlink(e.path)
        for folder in folders:
            try:
                os.rmdir(folder)   # only if empty
            except OSError:
                pass
    except OSError:   # another process pruned it first
        pass

"""The methods attrs generates for srcore's classes, compiled once and kept on disk like ``.pyc`` files.

attrs writes the source of ``__init__``/``__eq__``/``__hash__``/``__repr__`` of every class when the
class is defined and compiles it: for the ~90 classes on the path to a first result that was the
largest part of srcore's own cold-start time (~25 ms of ~80 on the reference machine). The source
only changes when a class or attrs changes, so the compiled code objects are cached in
``$SRCORE_CACHE_DIR/attrs/`` (default ``~/.cache/srcore/attrs/``), one marshal file per attrs
installation and Python bytecode tag, **keyed by the BLAKE2b-256 of the exact generated source text and its file name**:
a hit is the code object ``compile`` would return for that text, so behaviour is unchanged; any
change to a class produces a different text and a miss. Only classes of srcore and its plugins
(modules ``srcore``/``srcore_*``) and attrs' own (its validators and converters, ~15 classes built when
attrs is imported, after this cache is installed; the file is per attrs installation) are served; other
libraries' attrs classes are compiled as usual.

The runtime's generated code (``srcore.runtime.codegen``'s blocks, ``StaticRuntime``'s entry point) is
compiled through :func:`compile_exec` into the same cache, keyed the same way.

Like the bytecode cache, nothing is written when ``sys.dont_write_bytecode`` is set
(``PYTHONDONTWRITEBYTECODE``); ``SRCORE_NO_ATTRS_CACHE=1`` turns the cache off. A damaged file is
ignored and rewritten; if attrs' internals differ from what this expects, attrs is left alone.
"""
from __future__ import annotations

import os
import sys

__all__ = ["install", "cache_file", "compile_exec"]

_MAX_ENTRIES = 1000  # beyond this the file is rewritten with this process's entries only
# blake2b(filename + "\0" + source) -> the marshalled code object as read from the cache (bytes: unmarshalled
# when used, see _read), or the code object (compiled here, or a file of the first format)
_codes: dict[bytes, object] = {}
_used: dict[bytes, object] = {}   # entries this process used (hits and new compilations), in either form
stats = {"hits": 0, "misses": 0}
_dirty = False
# attrs' __hash__: "return hash((\n<indent><hash of the script's file name>,\n..."
_HASH_CALL = "return hash(("
_PLACEHOLDER = "-7777777777777777777"  # as wide as any 64-bit hash


def _enabled() -> bool:
    return os.environ.get("SRCORE_NO_ATTRS_CACHE", "") in ("", "0")


_SERVED = ("srcore.", "srcore_", "attr.", "attrs.")  # srcore, its plugins, attrs itself (its own file's key)


def _ours(filename: str) -> bool:
    # attrs names the script "<attrs generated <what> <module>.<qualname>[-N]>"
    return filename.startswith("<attrs generated ") and filename.rsplit(" ", 1)[-1].startswith(_SERVED)


def cache_file(make_module):
    """The cache of this attrs installation (its ``attr/_make.py``: path, mtime, size) and Python."""
    from ._digest import small_blake2b
    from .cachedir import cache_dir_str

    src = getattr(make_module, "__file__", None) or ""
    try:
        st = os.stat(src)
        stamp = f"{src}\0{st.st_mtime_ns}\0{st.st_size}"
    except OSError:
        stamp = src
    h = small_blake2b(stamp.encode("utf-8", "surrogatepass"))
    # "-b": entries marshalled one by one (see _read), keyed by BLAKE2b; the earlier formats' files (no suffix:
    # code objects; "-e": SHA-256 keys) are left to srcore versions that write them, so that two versions sharing
    # a cache directory do not rewrite each other's file on every start
    return cache_dir_str("attrs", f"{sys.implementation.cache_tag}-{h.hexdigest()[:24]}-b.marshal")


def _read(path) -> dict:
    import marshal

    from .cachedir import read_bytes

    try:
        data = marshal.loads(read_bytes(path))
    except Exception:  # missing, truncated, not marshal: a cold cache
        return {}
    if not isinstance(data, dict):
        return {}
    # each code object marshalled on its own (bytes): the file holds every class a process has built (up to
    # _MAX_ENTRIES: the CLI's, the converters', the tests'), a start uses ~90 of them, and unmarshalling all
    # the code objects of a 1 MB file was ~3 ms of every start; a file of the first format holds code objects
    code_type = type(_read.__code__)
    return {k: v for k, v in data.items() if isinstance(k, bytes) and isinstance(v, (bytes, code_type))}


def _write(path) -> None:
    if not _dirty or sys.dont_write_bytecode:
        return
    import marshal
    import tempfile

    entries = {**_read(path), **_used}
    if len(entries) > _MAX_ENTRIES:  # stale versions of edited classes pile up during development
        entries = dict(_used)
    entries = {k: v if isinstance(v, bytes) else marshal.dumps(v) for k, v in entries.items()}
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".marshal")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(entries))
        os.replace(tmp, path)  # atomic: a concurrent start never reads half a file
    except (OSError, ValueError):
        pass  # an unwritable cache directory only costs the compilation


def _swap_const(code, old: int, new: int):
    """``code`` with the int constant ``old`` replaced by ``new``, in nested code objects too (only the
    code objects that hold it are rebuilt: the others are returned as they are)."""
    consts = code.co_consts
    out = None
    for i, c in enumerate(consts):
        if type(c) is int and c == old:
            swapped = new
        elif type(c) is type(code):
            swapped = _swap_const(c, old, new)
            if swapped is c:
                continue
        else:
            continue
        if out is None:
            out = list(consts)
        out[i] = swapped
    return code if out is None else code.replace(co_consts=tuple(out))


def _load(make_module) -> None:
    """Read this attrs installation's cache (once) and have it written back at exit."""
    if _loaded:
        return
    path = cache_file(make_module)
    _loaded.append(path)
    _codes.update(_read(path))
    import atexit

    atexit.register(_write, path)


_loaded: list = []


def _type_hash(script: str) -> tuple[int, int] | None:
    r"""Where the integer literal of ``return hash((<int>,`` is in ``script`` (what the regex
    ``return hash\(\(\s*(-?\d+),`` finds; string methods: compiling that regex was ~0.13 ms a start)."""
    i = script.find(_HASH_CALL)
    while i >= 0:
        rest = script[i + len(_HASH_CALL):]
        body = rest.lstrip()
        start = i + len(_HASH_CALL) + len(rest) - len(body)
        digits = body[1:] if body.startswith("-") else body
        n = len(digits) - len(digits.lstrip("0123456789"))   # ASCII digits first (attrs writes those)
        while n < len(digits) and digits[n].isdecimal():      # and any other decimal digit, as \d has them
            n += 1
        if n and digits[n:n + 1] == ",":
            return start, start + len(body) - len(digits) + n
        i = script.find(_HASH_CALL, i + 1)
    return None


def _code(script: str, filename: str):
    """The code object ``compile(script, filename, "exec")`` returns, from the cache when it holds it."""
    global _dirty
    from ._digest import small_blake2b

    # a __hash__ script embeds hash(<its file name>), which differs per process (PYTHONHASHSEED):
    # it is cached with a placeholder and the process's own value is put back into the constants
    # (the same bytecode; only the column offsets recorded for that literal, which cannot raise,
    # may differ from a fresh compile)
    span = _type_hash(script)
    if span is not None:
        lit = script[span[0]:span[1]]
        script = script[:span[0]] + _PLACEHOLDER + script[span[1]:]
    # BLAKE2b, not SHA-256: ~60 kB of scripts a start (~3 M instructions less)
    key = small_blake2b(f"{filename}\0{script}".encode("utf-8", "surrogatepass")).digest()
    bytecode = raw = _codes.get(key)
    if raw is not None and type(raw) is bytes:
        import marshal

        try:
            bytecode = marshal.loads(raw)
        except Exception:  # a damaged entry: compiled again below
            bytecode = None
        if type(bytecode) is not type(_code.__code__):
            bytecode = raw = None
    if bytecode is None:
        bytecode = raw = _codes[key] = compile(script, filename, "exec")
        stats["misses"] += 1
        _dirty = True
    else:
        stats["hits"] += 1
    _used[key] = raw   # the bytes as read (written back as they are), or the new code object
    if span is not None:
        bytecode = _swap_const(bytecode, int(_PLACEHOLDER), int(lit))
    return bytecode


def _with_filename(code, filename: str):
    """``code`` and its nested code objects with ``co_filename`` = ``filename``."""
    consts = tuple(_with_filename(c, filename) if type(c) is type(code) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def compile_exec(source: str, filename: str, key_name: str | None = None):
    """``compile(source, filename, "exec")``, from the cache when attrs' is loaded (srcore's generated code).
    ``key_name``: the name the cache keys the source by when ``filename`` differs per process (it names
    an object's id); the code objects are given ``filename`` back (tracebacks, ``linecache``)."""
    if not _loaded:   # turned off, or attrs not imported yet: nothing read, nothing to add to
        return compile(source, filename, "exec")
    code = _code(source, key_name or filename)
    return code if key_name is None or key_name == filename else _with_filename(code, filename)


def _compile_served(source, filename, mode, *args, **kwargs):
    """``compile`` as ``attr._make`` sees it while it runs: the methods of attrs' own classes (``Attribute``,
    ``Factory``, ... built as the module runs, before :func:`_patch` can wrap ``_compile_and_eval``) come
    from the cache too; anything else is compiled."""
    if mode == "exec" and not args and not kwargs and isinstance(source, str) and _ours(filename):
        return _code(source, filename)
    return compile(source, filename, mode, *args, **kwargs)


def _patch(make_module) -> None:
    orig = getattr(make_module, "_compile_and_eval", None)
    code = getattr(orig, "__code__", None)
    if code is None or getattr(orig, "_srcore_cached", False):
        return
    if code.co_varnames[:4] != ("script", "globs", "locs", "filename"):
        return  # an attrs whose internals we do not know: leave it alone
    _load(make_module)

    def compile_and_eval(script, globs, locs=None, filename=""):
        if not _ours(filename):
            return orig(script, globs, locs, filename)
        eval(_code(script, filename), globs, locs)

    compile_and_eval._srcore_cached = True
    make_module._compile_and_eval = compile_and_eval


class _AfterAttrsImport:
    """A one-shot meta-path finder: when ``attr._make`` is imported, patch it right after it runs
    (``import srcore`` itself does not import attrs, and must stay cheap)."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "attr._make":
            return None
        sys.meta_path.remove(cls)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        class _Loader:
            def __getattr__(self, attr):
                return getattr(loader, attr)

            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                # the module's own classes are built while it runs: ``compile`` resolves to a module
                # global before the builtin, so one put there serves their methods from the cache
                try:
                    _load(module)
                    module.compile = _compile_served
                except Exception:  # never break attrs over a cache
                    pass
                try:
                    exec_module(module)
                finally:
                    if getattr(module, "compile", None) is _compile_served:
                        del module.compile
                try:
                    _patch(module)
                except Exception:  # never break attrs over a cache
                    pass

        spec.loader = _Loader()
        return spec


def install() -> None:
    """Serve srcore's attrs-generated methods from the cache (now, or when attrs is imported)."""
    if not _enabled():
        return
    if "attr._make" in sys.modules:
        _patch(sys.modules["attr._make"])
    elif _AfterAttrsImport not in sys.meta_path:
        sys.meta_path.insert(0, _AfterAttrsImport)

"""The parsed-schema cache: declaration files are parsed once per content, not per start-up.

RFC-0020 ("Avoid schema parsing at runtime"): everything a ``FunctionSchema``
holds is known when the declaration file is written, so srcore stores the
parsed declarations as plain tuples (``marshal``, never pickle) in
``$SRCORE_CACHE_DIR/schemas/`` (default ``~/.cache/srcore/schemas/``) and
rebuilds the objects directly on the next start. The key hashes the source
name, its content, the srcore version and the cache format, so an edited file
is reparsed; a corrupt or unreadable cache file is ignored and rewritten.
``SRCORE_NO_SCHEMA_CACHE=1`` turns the cache off.
"""
from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path
from typing import Iterable, Union

from .. import __version__
from .._digest import small_sha256
from ..cachedir import cache_root
from ..errors import DeclarationError
from . import declarations
from .declarations import Declaration, DispatchEntry
from .schema import (AliasInfo, Argument, BaseType, Default, FunctionSchema, GenericType, ListType,
                     OptionalType, Return, SchemaType, TupleType)

__all__ = ["load_schemas", "cache_dir", "clear_memory_cache", "encode", "decode", "FORMAT"]

FORMAT = 3  # bump when the encoding below changes (2: shared type/argument/return tables; 3: dispatch etc.)
Source = Union[str, os.PathLike, tuple[str, str]]  # or an importlib.resources Traversable

#: per-process memo: cache key -> declarations (a file is decoded once per process)
_memo: dict[str, list[Declaration]] = {}


def cache_dir() -> Path:
    """Where parsed schemas are cached: ``$SRCORE_CACHE_DIR/schemas`` or ``~/.cache/srcore/schemas``."""
    return cache_root() / "schemas"


def clear_memory_cache() -> None:
    """Forget the declarations decoded in this process (the on-disk cache stays)."""
    _memo.clear()


def _enabled() -> bool:
    return os.environ.get("SRCORE_NO_SCHEMA_CACHE", "") in ("", "0")


def load_schemas(sources: Iterable[Source]) -> list[Declaration]:
    """Declarations of every source, in order: a file path or a ``(name, text)`` pair each."""
    out: list[Declaration] = []
    for src in sources:
        out.extend(_load_one(src))
    return out


def _read(src: Source) -> tuple[str, str]:
    if isinstance(src, tuple):
        name, text = src
        return str(name), text
    try:
        # a path, or an importlib.resources Traversable (a file inside a zipped package)
        f = src if hasattr(src, "read_text") else Path(src)
        return str(src), f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DeclarationError(f"cannot read declaration file: {e}", source=str(src)) from None


def _load_one(src: Source) -> list[Declaration]:
    name, text = _read(src)
    if not _enabled():
        return declarations.parse_declarations(text, name)
    h = small_sha256()
    for part in (name, "\0", text, "\0", __version__, f"\0{FORMAT}\0{sys.version_info[:2]}"):
        h.update(part.encode("utf-8", "surrogatepass"))
    key = h.hexdigest()
    hit = _memo.get(key)
    if hit is not None:
        return list(hit)
    path = cache_dir() / f"{key[:40]}.marshal"
    decls = _read_cache(path)
    if decls is None:
        decls = declarations.parse_declarations(text, name)
        _write_cache(path, decls)
    _memo[key] = decls
    return list(decls)


def _read_cache(path: Path) -> list[Declaration] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return decode(marshal.loads(data))
    except Exception:  # any damage (truncation, bad tuples): treat as a miss and rewrite
        return None


def _write_cache(path: Path, decls: list[Declaration]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # only when writing: ~2 ms of imports (shutil, random) a warm start skips

        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".marshal")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(encode(decls)))
        os.replace(tmp, path)  # atomic: concurrent readers never see half a file
    except OSError:
        pass  # a read-only home only costs the parse


# -- plain-tuple encoding ------------------------------------------------------------------
# Tables, so that a start-up decodes each distinct type, argument and return once and marshal
# reads a small file: ``(FORMAT, types, arguments, returns, entries)`` where a type refers to
# its element types, an argument/return to its type, and an entry to its arguments/returns by
# index into the tables before it. (~1,000 aten schemas hold ~100 distinct types and a few
# hundred distinct arguments.)
def _enc_alias(a: AliasInfo | None):
    return None if a is None else (a.sets, a.is_write, a.after)


class _Tables:
    def __init__(self):
        self.types: list = []
        self.args: list = []
        self.rets: list = []
        self._index: dict = {}

    def _add(self, table: list, tag: str, row: tuple) -> int:
        try:
            return self._index[(tag, row)]
        except KeyError:
            pass
        except TypeError:  # an unhashable default value: stored unshared
            table.append(row)
            return len(table) - 1
        table.append(row)
        self._index[(tag, row)] = i = len(table) - 1
        return i

    def type(self, t: SchemaType) -> int:
        a = _enc_alias(t.alias)
        if isinstance(t, BaseType):
            row = ("B", t.name, a)
        elif isinstance(t, OptionalType):
            row = ("O", self.type(t.elem), a)
        elif isinstance(t, ListType):
            row = ("L", self.type(t.elem), t.size, a)
        elif isinstance(t, TupleType):
            row = ("T", tuple(self.type(e) for e in t.elems), a)
        elif isinstance(t, GenericType):
            row = ("G", t.name, tuple(self.type(e) for e in t.args), a)
        else:
            raise TypeError(f"unknown schema type {t!r}")
        return self._add(self.types, "t", row)

    def arg(self, a) -> int:
        d = None if a.default is None else (a.default.value, a.default.text)
        row = (a.name, self.type(a.type), d, a.kwarg_only)
        # 1 == 1.0 == True as dict keys: the key also holds the default's Python type
        key = row if d is None else row + (type(d[0]).__name__,)
        try:
            i = self._index.get(("a", key))
        except TypeError:
            i = None
        if i is None:
            self.args.append(row)
            i = len(self.args) - 1
            try:
                self._index[("a", key)] = i
            except TypeError:
                pass
        return i

    def ret(self, r) -> int:
        return self._add(self.rets, "r", (r.name, self.type(r.type)))


def encode(decls: list[Declaration]) -> tuple:
    """Declarations as tables of tuples of str/int/float/bool/None (marshal-able)."""
    tab = _Tables()
    out = []
    for d in decls:
        s = d.schema
        out.append((s.name, s.overload_name, tuple(tab.arg(a) for a in s.arguments),
                    tuple(tab.ret(r) for r in s.returns), s.is_vararg, s.is_varret,
                    d.source, d.doc, d.tags, d.variants,
                    tuple((e.backends, e.kernel, e.dtypes, e.source) for e in d.dispatch), d.structured,
                    d.structured_delegate, d.structured_inherits, d.python_module))
    return (FORMAT, tuple(tab.types), tuple(tab.args), tuple(tab.rets), tuple(out))


def decode(data: tuple) -> list[Declaration]:
    """Inverse of :func:`encode`; identical types, arguments and returns are shared objects."""
    fmt, type_rows, arg_rows, ret_rows, entries = data
    if fmt != FORMAT:
        raise ValueError("cache format")

    def alias(a):
        return None if a is None else AliasInfo(tuple(a[0]), a[1], None if a[2] is None else tuple(a[2]))

    types: list = []
    for e in type_rows:  # an element type always precedes the types built from it
        tag = e[0]
        if tag == "B":
            t = BaseType(e[1], alias(e[2]))
        elif tag == "O":
            t = OptionalType(types[e[1]], alias(e[2]))
        elif tag == "L":
            t = ListType(types[e[1]], e[2], alias(e[3]))
        elif tag == "T":
            t = TupleType(tuple(types[x] for x in e[1]), alias(e[2]))
        elif tag == "G":
            t = GenericType(e[1], tuple(types[x] for x in e[2]), alias(e[3]))
        else:
            raise ValueError(f"bad type tag {tag!r}")
        types.append(t)
    args = [Argument(n, types[t], None if d is None else Default(d[0], d[1]), k) for n, t, d, k in arg_rows]
    rets = [Return(n, types[t]) for n, t in ret_rows]
    out = []
    for (name, overload, ai, ri, vararg, varret, source, doc, tags, variants, dispatch, structured, delegate,
         inherits, module) in entries:
        schema = FunctionSchema(name, overload, tuple([args[i] for i in ai]), tuple([rets[i] for i in ri]),
                                vararg, varret)
        entries_ = tuple(DispatchEntry(tuple(b), k, tuple(dt), src) for b, k, dt, src in dispatch)
        out.append(Declaration(schema, source, doc, tuple(tags), tuple(variants), entries_, structured, delegate,
                               inherits, module))
    return out

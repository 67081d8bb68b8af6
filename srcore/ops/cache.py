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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Iterable, Union

if TYPE_CHECKING:
    from pathlib import Path

from .. import __version__
from .._digest import small_sha256
from ..cachedir import cache_dir_str, cache_root, read_bytes
from ..errors import DeclarationError
from . import declarations
from .declarations import Declaration
from .schema import AliasInfo, Argument, BaseType, Default, FunctionSchema, ListType, OptionalType, Return, SchemaType

__all__ = ["load_schemas", "load_schemas_lazily", "CachedDeclarations", "cache_dir", "clear_memory_cache", "encode",
           "decode", "FORMAT"]

FORMAT = 3  # bump when the encoding below changes (2: shared type/argument/return tables; 3: dispatch etc.)
Source = Union[str, os.PathLike, tuple[str, str]]  # or an importlib.resources Traversable

#: per-process memo: cache key -> declarations (a file is decoded once per process)
_memo: dict[str, "Sequence[Declaration]"] = {}


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
        out.extend(_load_one(src))  # a CachedDeclarations builds every row here
    return out


def _read(src: Source) -> tuple[str, str]:
    if isinstance(src, tuple):
        name, text = src
        return str(name), text
    try:
        # a path, or an importlib.resources Traversable (a file inside a zipped package)
        if hasattr(src, "read_text"):
            return str(src), src.read_text(encoding="utf-8")
        with open(src, encoding="utf-8") as f:   # a path (no pathlib on the start path: srcore.cachedir)
            return str(src), f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise DeclarationError(f"cannot read declaration file: {e}", source=str(src)) from None


def load_schemas_lazily(src: Source) -> Sequence[Declaration]:
    """The declarations of one source as a sequence; from the cache, a :class:`CachedDeclarations`
    whose rows are built on first access (a fresh parse: the parsed list)."""
    return _load_one(src)


def _load_one(src: Source) -> Sequence[Declaration]:
    name, text = _read(src)
    if not _enabled():
        return declarations.parse_declarations(text, name)
    h = small_sha256()
    for part in (name, "\0", text, "\0", __version__, f"\0{FORMAT}\0{sys.version_info[:2]}"):
        h.update(part.encode("utf-8", "surrogatepass"))
    key = h.hexdigest()
    hit = _memo.get(key)
    if hit is not None:
        return hit
    path = cache_dir_str("schemas", f"{key[:40]}.marshal")
    decls = _read_cache(path)
    if decls is None:
        decls = declarations.parse_declarations(text, name)
        _write_cache(path, decls)
    _memo[key] = decls
    return decls


def _read_cache(path: str) -> CachedDeclarations | None:
    try:
        data = read_bytes(path)
    except OSError:
        return None
    try:
        return CachedDeclarations(marshal.loads(data))
    except Exception:  # any damage (truncation, bad tuples): treat as a miss and rewrite
        return None


def _write_cache(path: str, decls: list[Declaration]) -> None:
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        import tempfile  # only when writing: ~2 ms of imports (shutil, random) a warm start skips

        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".marshal")
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
        else:
            from .schema_rare_types import GenericType, TupleType

            if isinstance(t, TupleType):
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
    return list(CachedDeclarations(data))


def _decode_tables(type_rows, arg_rows, ret_rows) -> tuple[list, list]:
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
            from .schema_rare_types import TupleType

            t = TupleType(tuple(types[x] for x in e[1]), alias(e[2]))
        elif tag == "G":
            from .schema_rare_types import GenericType

            t = GenericType(e[1], tuple(types[x] for x in e[2]), alias(e[3]))
        else:
            raise ValueError(f"bad type tag {tag!r}")
        types.append(t)
    args = [Argument(n, types[t], None if d is None else Default(d[0], d[1]), k) for n, t, d, k in arg_rows]
    rets = [Return(n, types[t]) for n, t in ret_rows]
    return args, rets


class CachedDeclarations(Sequence):
    """One cached file's declarations, each built on first access.

    A start-up with the full registry declares ~1,650 overloads and a model uses a handful: the
    registry is keyed by :meth:`qualified_name` (read from the row) and builds a ``Declaration``
    only when its schema is looked at. The shared type/argument/return tables are decoded here and
    every row's shape and table indices are checked, so a damaged file still fails on read (a miss).
    """

    __slots__ = ("_args", "_rets", "_rows", "_built")

    def __init__(self, data: tuple):
        fmt, type_rows, arg_rows, ret_rows, rows = data
        if fmt != FORMAT:
            raise ValueError("cache format")
        self._args, self._rets = _decode_tables(type_rows, arg_rows, ret_rows)
        na, nr = len(self._args), len(self._rets)
        for row in rows:
            name, overload, ai, ri = row[:4]
            if (len(row) != 15 or type(name) is not str or type(overload) is not str
                    or (ai and not 0 <= min(ai) <= max(ai) < na) or (ri and not 0 <= min(ri) <= max(ri) < nr)):
                raise ValueError("bad declaration row")
        self._rows = rows
        self._built: list = [None] * len(rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        d = self._built[i]
        if d is None:
            d = self._built[i] = self._build(self._rows[i])
        return d

    def names(self, i: int) -> tuple[str, str]:
        """``(FunctionSchema.name, FunctionSchema.overload_name)`` of row ``i``, without building it."""
        name, overload = self._rows[i][:2]
        return name, overload

    def source(self, i: int) -> str:
        return self._rows[i][6]

    def binds_kernels(self, i: int) -> bool:
        """Whether row ``i`` has a ``dispatch:`` or ``structured_delegate:`` entry."""
        row = self._rows[i]
        return bool(row[10]) or row[12] is not None

    def summaries(self) -> list[tuple[str, str, str, bool]]:
        """``(name, overload, source, binds_kernels)`` of every row, in order, building nothing (one pass:
        a full-registry start-up names ~1,650 overloads this way)."""
        return [(r[0], r[1], r[6], bool(r[10]) or r[12] is not None) for r in self._rows]

    def _build(self, row) -> Declaration:
        (name, overload, ai, ri, vararg, varret, source, doc, tags, variants, dispatch, structured, delegate,
         inherits, module) = row
        args, rets = self._args, self._rets
        schema = FunctionSchema(name, overload, tuple([args[i] for i in ai]), tuple([rets[i] for i in ri]),
                                vararg, varret)
        if dispatch:
            from .dispatch_entry import DispatchEntry   # (few declarations bind kernels: the class is built then)

            entries = tuple(DispatchEntry(tuple(b), k, tuple(dt), src) for b, k, dt, src in dispatch)
        else:
            entries = ()
        return Declaration(schema, source, doc, tuple(tags), tuple(variants), entries, structured, delegate,
                           inherits, module)

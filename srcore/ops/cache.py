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

import hashlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Union

from .. import __version__
from ..errors import DeclarationError
from . import declarations
from .declarations import Declaration
from .schema import (AliasInfo, Argument, BaseType, Default, FunctionSchema, GenericType, ListType,
                     OptionalType, Return, SchemaType, TupleType)

__all__ = ["load_schemas", "cache_dir", "clear_memory_cache", "encode", "decode", "FORMAT"]

FORMAT = 1  # bump when the encoding below changes
Source = Union[str, os.PathLike, tuple[str, str]]  # or an importlib.resources Traversable

#: per-process memo: cache key -> declarations (a file is decoded once per process)
_memo: dict[str, list[Declaration]] = {}


def cache_dir() -> Path:
    """Where parsed schemas are cached: ``$SRCORE_CACHE_DIR/schemas`` or ``~/.cache/srcore/schemas``."""
    root = os.environ.get("SRCORE_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "srcore")
    return Path(root) / "schemas"


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
    h = hashlib.sha256()
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
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".marshal")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(encode(decls)))
        os.replace(tmp, path)  # atomic: concurrent readers never see half a file
    except OSError:
        pass  # a read-only home only costs the parse


# -- plain-tuple encoding ------------------------------------------------------------------
def _enc_alias(a: AliasInfo | None):
    return None if a is None else (a.sets, a.is_write, a.after)


def _enc_type(t: SchemaType):
    if isinstance(t, BaseType):
        return ("B", t.name, _enc_alias(t.alias))
    if isinstance(t, OptionalType):
        return ("O", _enc_type(t.elem), _enc_alias(t.alias))
    if isinstance(t, ListType):
        return ("L", _enc_type(t.elem), t.size, _enc_alias(t.alias))
    if isinstance(t, TupleType):
        return ("T", tuple(_enc_type(e) for e in t.elems), _enc_alias(t.alias))
    if isinstance(t, GenericType):
        return ("G", t.name, tuple(_enc_type(e) for e in t.args), _enc_alias(t.alias))
    raise TypeError(f"unknown schema type {t!r}")


def encode(decls: list[Declaration]) -> tuple:
    """Declarations as nested tuples of str/int/float/bool/None (marshal-able)."""
    out = []
    for d in decls:
        s = d.schema
        args = tuple((a.name, _enc_type(a.type), None if a.default is None else (a.default.value, a.default.text),
                      a.kwarg_only) for a in s.arguments)
        rets = tuple((r.name, _enc_type(r.type)) for r in s.returns)
        out.append((s.name, s.overload_name, args, rets, s.is_vararg, s.is_varret,
                    d.source, d.doc, d.tags, d.variants))
    return (FORMAT, tuple(out))


def decode(data: tuple) -> list[Declaration]:
    """Inverse of :func:`encode`; identical types are shared (one ``BaseType('Tensor')``)."""
    fmt, entries = data
    if fmt != FORMAT:
        raise ValueError("cache format")
    types: dict = {}

    def alias(a):
        return None if a is None else AliasInfo(tuple(a[0]), a[1], None if a[2] is None else tuple(a[2]))

    def typ(e):
        t = types.get(e)
        if t is not None:
            return t
        tag = e[0]
        if tag == "B":
            t = BaseType(e[1], alias(e[2]))
        elif tag == "O":
            t = OptionalType(typ(e[1]), alias(e[2]))
        elif tag == "L":
            t = ListType(typ(e[1]), e[2], alias(e[3]))
        elif tag == "T":
            t = TupleType(tuple(typ(x) for x in e[1]), alias(e[2]))
        elif tag == "G":
            t = GenericType(e[1], tuple(typ(x) for x in e[2]), alias(e[3]))
        else:
            raise ValueError(f"bad type tag {tag!r}")
        types[e] = t
        return t

    parts: dict = {}  # identical arguments/returns (`Tensor self`) are shared too

    def arg(e):
        a = parts.get(e)
        if a is None:
            n, t, d, k = e
            a = parts[e] = Argument(n, typ(t), None if d is None else Default(d[0], d[1]), k)
        return a

    def ret(e):
        r = parts.get(e)
        if r is None:
            r = parts[e] = Return(e[0], typ(e[1]))
        return r

    out = []
    for name, overload, args, rets, vararg, varret, source, doc, tags, variants in entries:
        schema = FunctionSchema(name, overload, tuple(map(arg, args)), tuple(map(ret, rets)), vararg, varret)
        out.append(Declaration(schema, source, doc, tuple(tags), tuple(variants)))
    return out

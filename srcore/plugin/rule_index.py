"""The builtin plugin's shape rules from a cached index: a full registry imports no rule module it need not.

Reading ``srcore.ops.shapes.RULES`` imports all 17 modules of the core's rules (~14 ms CPU of a
loaded machine's full registry build, ``benchmarks/registry_phases``), although a model uses a few.
The index is JSON (never pickle) in ``$SRCORE_CACHE_DIR/rules/``: one ``["module:qualname", module,
[op, ...]]`` row per rule function, in ``RULES`` order, keyed on srcore's version, the Python version,
the rule directory and the name, mtime and size of every ``srcore/ops/shapes/*.py``, so an edited,
added or removed rule module is a miss, never a stale index. A hit yields records whose rule is the
``"module:qualname"`` string (imported the first time a node of the op is propagated, like a selective
build's), except for a rule with no importable name (a closure made by a factory; its row's ref is
null): its module is imported and the function taken from ``RULES`` by op. A miss or a damaged file
imports every module as before and writes the index for the next start. ``SRCORE_NO_RULE_INDEX=1``
turns it off; nothing is written under ``PYTHONDONTWRITEBYTECODE``.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from pathlib import Path

import srcore.ops

from .. import __version__
from .._fastjson import loads
from ..cachedir import cache_dir_str
from .types import ShapeRule

FORMAT = 1


def _enabled() -> bool:
    return os.environ.get("SRCORE_NO_RULE_INDEX", "") in ("", "0")


def _key() -> list | None:
    """What the index depends on; None if the rule modules' sources cannot be listed."""
    shapes = os.path.join(os.path.dirname(srcore.ops.__file__), "shapes")
    try:
        files = sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in os.scandir(shapes)
                       if e.name.endswith(".py"))
    except OSError:
        return None
    # the directory too: two checkouts sharing a cache never read each other's index
    return [FORMAT, __version__, list(sys.version_info[:2]), [list(f) for f in files], str(shapes)] if files else None


def index_path() -> Path:
    """One file per srcore installation (its directory, hashed into the name): two checkouts or
    environments sharing a cache directory would otherwise overwrite each other's index on every start."""
    from pathlib import Path

    return Path(_index_file())


def _index_file() -> str:
    """:func:`index_path` as a string (a start does not import ``pathlib``: ``srcore.cachedir``)."""
    from .._digest import small_sha256

    here = small_sha256(os.path.dirname(srcore.ops.__file__).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return cache_dir_str("rules", f"core-{sys.implementation.cache_tag}-{here}.json")


def _read(key: list) -> list | None:
    try:
        with open(_index_file(), encoding="utf-8") as f:
            data = loads(f.read())
        if data["key"] != key:
            return None
        rows = data["rules"]
        if not isinstance(rows, list) or not rows:
            return None
        for ref, module, ops in rows:
            if not ((ref is None or isinstance(ref, str) and ref.startswith(f"{module}:"))
                    and isinstance(module, str) and module.startswith("srcore.ops.shapes.")
                    and isinstance(ops, list) and ops and all(isinstance(o, str) for o in ops)):
                return None
        return rows
    except Exception:  # missing, unreadable, not JSON, wrong shape: a miss
        return None


def _ref(fn) -> str | None:
    """``"module:qualname"`` if that imports ``fn`` itself (not a closure made by a factory)."""
    from srcore.dispatch.lazy import import_ref

    module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not (module and qual and "<" not in qual):
        return None
    try:
        return f"{module}:{qual}" if import_ref(f"{module}:{qual}") is fn else None
    except Exception:
        return None


def _rows_from_modules() -> list:
    """``[(rule function, [ops])]``, one per function of the core's ``RULES`` (every module imported)."""
    from srcore.ops.shapes import RULES

    names: dict[int, list[str]] = {}  # one record per rule function, naming every op it serves
    fns = {}
    for op, fn in RULES.items():
        names.setdefault(id(fn), []).append(op)
        fns[id(fn)] = fn
    return [(fns[k], ops) for k, ops in names.items()]


def _may_write() -> bool:
    return not (sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE"))


def _write(key: list, rows: list) -> None:
    if not _may_write():  # like .pyc files (and the attrs code cache)
        return
    path = _index_file()
    # a rule without an importable name (a closure) is found again by op, in its module, at a hit
    data = {"key": key, "rules": [[_ref(fn), fn.__module__, ops] for fn, ops in rows]}
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{name}")
    try:
        os.makedirs(folder, exist_ok=True)
        import json

        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(data))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def core_shape_rules() -> Iterator[ShapeRule]:
    """The core's rules as :class:`ShapeRule` records: refs from the index, else the functions."""
    key = _key() if _enabled() else None
    rows = _read(key) if key is not None else None
    if rows is not None:
        if any(ref is None for ref, _, _ in rows):
            import importlib

            from srcore.ops.shapes.base import RULES
        for ref, module, ops in rows:
            if ref is None:  # only the modules of such rules are imported
                importlib.import_module(module)
                ref = RULES[ops[0]]
            yield ShapeRule(tuple(ops), ref)
        return
    rows = _rows_from_modules()
    if key is not None:
        _write(key, rows)
    for fn, ops in rows:
        yield ShapeRule(tuple(ops), fn)

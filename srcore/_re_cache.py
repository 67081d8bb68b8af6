"""Compiled regular expressions kept on disk: ``re``'s pure-Python compiler skipped at a cold start.

``re.compile`` parses a pattern and writes its SRE code in Python: ~4 M instructions for the IR lexer's one
pattern, on every start that parses a graph (a load without the prepared-model cache, a cache's first start).
What it hands the C engine (``_sre.compile``: flags, code, group count, group names) depends only on the
pattern, its flags and the engine, so :func:`compile` keeps those arguments in
``$SRCORE_CACHE_DIR/re/<python>-<sre magic>.marshal`` (plain data: str, int, list, dict, tuple) and builds
the pattern from them on a hit. An entry is stored only if the pattern it builds equals ``re.compile``'s
(``Pattern.__eq__`` compares the flags and the whole code), and a hit whose build fails is compiled as usual.
Nothing is written under ``PYTHONDONTWRITEBYTECODE``; ``SRCORE_NO_RE_CACHE=1`` turns the cache off.
"""
from __future__ import annotations

import os
import re
import sys

__all__ = ["compile"]

_entries: dict | None = None   # (pattern, flags) -> _sre.compile's arguments after the pattern


def _path() -> str:
    import _sre

    from .cachedir import cache_dir_str

    return cache_dir_str("re", f"{sys.implementation.cache_tag}-{_sre.MAGIC}-{_sre.CODESIZE}.marshal")


def _read() -> dict:
    global _entries
    if _entries is None:
        _entries = {}
        try:
            import marshal

            from .cachedir import read_bytes

            data = marshal.loads(read_bytes(_path()))
            if type(data) is dict:
                _entries = data
        except (OSError, ValueError, EOFError, TypeError):
            pass
    return _entries


def _enabled() -> bool:
    return os.environ.get("SRCORE_NO_RE_CACHE", "") in ("", "0") and sys.implementation.name == "cpython"


def compile(pattern: str, flags: int = 0) -> re.Pattern:
    """``re.compile(pattern, flags)``, from the cache when this pattern was compiled before."""
    if not _enabled() or flags & re.DEBUG:
        return re.compile(pattern, flags)
    args = _read().get((pattern, int(flags)))
    if args is not None:
        try:
            import _sre

            return _sre.compile(pattern, *args)
        except Exception:  # noqa: BLE001 - a damaged entry: compiled as usual (and stored again)
            pass
    compiled = re.compile(pattern, flags)
    _store(pattern, int(flags), compiled)
    return compiled


def _store(pattern: str, flags: int, compiled: re.Pattern) -> None:
    if sys.dont_write_bytecode:
        return
    try:
        import _sre
        from re import _compiler, _parser

        p = _parser.parse(pattern, flags)
        code = _compiler._code(p, flags)
        groupindex = dict(p.state.groupdict)
        indexgroup = [None] * p.state.groups
        for k, i in groupindex.items():
            indexgroup[i] = k
        # (the code holds re's named int constants: plain ints for marshal, the same values for _sre)
        args = (int(flags | p.state.flags), [int(c) for c in code], p.state.groups - 1, groupindex, tuple(indexgroup))
        if _sre.compile(pattern, *args) != compiled:   # what re.compile built, flags and code alike
            return
    except Exception:  # noqa: BLE001 - another re: nothing cached
        return
    entries = _read()
    entries[(pattern, flags)] = args
    _write(entries)


def _write(entries: dict) -> None:
    import marshal
    import tempfile

    path = _path()
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        data = marshal.dumps(entries)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".marshal")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)  # atomic: a concurrent start never reads half a file
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError):
        pass  # an unwritable cache directory only costs the compilation

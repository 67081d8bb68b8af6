"""Where srcore keeps its on-disk caches (parsed schemas, plugin discovery, attrs' generated code).

The caches a start reads (attrs' code, schemas, the plugin discovery check, a selection's parse) name their
files with :func:`cache_dir_str` and plain ``os`` calls: ``pathlib`` and what it imports (``urllib.parse``,
``ipaddress``, ``ntpath``, ``fnmatch``: ~3-8 ms of CPU on the reference VM, more than any srcore module) are
not imported by a start. :func:`cache_root` gives the same directory as a ``Path`` for everything else.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def cache_dir_str(*parts: str) -> str:
    """``$SRCORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/srcore``, else ``~/.cache/srcore`` (joined with ``parts``),
    as a string."""
    root = os.environ.get("SRCORE_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "srcore")
    return os.path.join(root, *parts)


def cache_root() -> Path:
    """``$SRCORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/srcore``, else ``~/.cache/srcore``."""
    from pathlib import Path

    return Path(cache_dir_str())


def read_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of ``path`` (``OSError`` if it cannot be read), without ``pathlib``."""
    with open(path, "rb") as f:
        return f.read()

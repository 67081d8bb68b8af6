"""Where srcore keeps its on-disk caches (parsed schemas, plugin discovery)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$SRCORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/srcore``, else ``~/.cache/srcore``."""
    root = os.environ.get("SRCORE_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "srcore")
    return Path(root)

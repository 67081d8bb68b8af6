"""Regular expressions compiled at their first use.

Compiling a pattern runs ``re``'s pure-Python compiler: 0.03-0.2 ms each, ~2 ms of a cold start for the
patterns srcore's modules compiled at import, several of which a load never uses (docs/performance.md).
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["LazyPattern"]


class LazyPattern:
    """``re.compile(pattern, flags)`` on first use; every attribute of the compiled pattern (``match``,
    ``fullmatch``, ``search``, ``sub``, ``pattern``...) is there."""

    __slots__ = ("_source", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self._source = (pattern, flags)
        self._compiled = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._source)
        return getattr(compiled, name)

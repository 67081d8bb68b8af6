"""A small bounded mapping: per-signature caches must not grow with every new input shape."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

#: how many input signatures a module (and each runtime) remembers
MAX_SIGNATURES = 64


class LRU(OrderedDict):
    """An OrderedDict that keeps only the ``maxsize`` most recently used entries."""

    def __init__(self, maxsize: int = MAX_SIGNATURES):
        super().__init__()
        self.maxsize = maxsize

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            value = self[key]
        except KeyError:
            return default
        self.move_to_end(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)

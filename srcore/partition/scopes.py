"""Forced fallback by module (Torch-TensorRT's ``torch_executed_modules``): which nodes came from
the modules a user keeps out of engines.

A node's ``meta["scope"]`` is the module hierarchy it was called in, as the TorchScript frontend
records it (``layer1(Sequential).0(BasicBlock).conv1(Conv2d)``) or as torch prints a traced graph's
scope (``__module.layer1/__module.layer1.0``); a node fused from several (``srcore::conv2d_relu``)
has theirs joined by ``|``. An entry of ``Options.engine_fallback_modules`` matches a node when it
is a prefix of the node's module path (``layer1`` or ``layer1.0``, by whole components) or the
class name of a module on it (``BasicBlock``, or qualified: ``torchvision.models.resnet.BasicBlock``
matches by its last component).
"""
from __future__ import annotations

import re

_COMPONENT = re.compile(r"([^.()]+)(?:\(([^()]*)\))?")


def parse_scope(scope: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each part of ``scope`` (split at ``|``) as (module path components, class names on the path)."""
    out = []
    for part in scope.split("|"):
        part = part.strip()
        if not part:
            continue
        if part.startswith("__module"):   # a traced graph's ``__module.a/__module.a.b``
            last = part.split("/")[-1]
            path = tuple(c for c in last.split(".")[1:] if c)
            out.append((path, ()))
            continue
        path, types = [], []
        for m in _COMPONENT.finditer(part):
            name, cls = m.group(1), m.group(2)
            if name == "SELF":   # the method's own module, already on the path
                continue
            path.append(name)
            if cls:
                types.append(cls.split(".")[-1])
        out.append((tuple(path), tuple(types)))
    return out


class ScopeMatcher:
    """Matches node scopes against module entries (see the module docstring)."""

    def __init__(self, entries: tuple[str, ...] = ()):
        self.entries = tuple(entries)
        self._paths = [(e, tuple(e.split("."))) for e in self.entries]
        self._types = [(e, e.split(".")[-1]) for e in self.entries]

    def match(self, scope: str | None) -> str | None:
        """The first entry matching ``scope`` (None: no entry matches, or the node has no scope)."""
        if not self.entries or not scope:
            return None
        for path, types in parse_scope(scope):
            for entry, parts in self._paths:
                if path[:len(parts)] == parts:
                    return entry
            for entry, cls in self._types:
                if cls in types:
                    return entry
        return None

"""The module scope of a node (``node.meta["scope"]``): the module hierarchy it was called in, as
a frontend records it (``layer1(Sequential).0(BasicBlock).conv1(Conv2d)``) and the IR text writes it
(``, scope: ...`` after a node's arguments). A node made from several keeps all of theirs."""
from __future__ import annotations

from typing import Iterable


def joined(nodes: Iterable) -> str | None:
    """The scope of a node fused from ``nodes``: their distinct scopes joined by ``|`` (None: none)."""
    parts: list[str] = []
    for n in nodes:
        for p in (n.meta.get("scope") or "").split("|"):
            if p and p not in parts:
                parts.append(p)
    return "|".join(parts) or None

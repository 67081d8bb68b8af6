"""Op aliases: names torch gives one op twice (``aten::absolute`` is ``aten::abs``).

The table is ``aliases.yaml`` (torch's own alias map). An alias is declared like any op but
has no shape rule and no kernel: :func:`srcore.passes.normalize_aliases` rewrites its nodes to
the op it names when a model is loaded, so one kernel and one rule serve both names.
"""
from __future__ import annotations

import functools
import os

__all__ = ["alias_table", "canonical"]


@functools.lru_cache(maxsize=1)
def alias_table() -> dict[str, str]:
    """``{alias: op}`` for every alias srcore knows (``"aten::absolute": "aten::abs"``)."""
    path = os.path.join(os.path.dirname(__file__), "aliases.yaml")
    if os.path.isfile(path):  # the package is a directory: no importlib.resources (~10 ms of imports at start-up)
        with open(path, encoding="utf-8") as f:
            text = f.read()
    else:  # a zipped install
        from importlib import resources

        text = (resources.files("srcore.ops") / "aliases.yaml").read_text(encoding="utf-8")
    table = {}
    for line in text.splitlines():  # "alias: op" lines (a YAML mapping), read without importing yaml
        line = line.split("#", 1)[0].strip()
        if line:
            alias, op = line.split(": ", 1)  # op names hold "::", so the separator is ": "
            table[alias.strip()] = op.strip()
    return table


def canonical(kind: str) -> str:
    """The op a node kind names: ``kind`` itself unless it is an alias."""
    return alias_table().get(kind, kind)

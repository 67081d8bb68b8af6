"""Evaluating tensor ops on constants with the kernels of the loaded plugins (constant folding).

The node is dispatched exactly as the runtime would dispatch it (``srcore.dispatch.resolve_node``
on the ``cpu`` backend by default) and its kernel called with the kernel calling convention
(``docs/architecture.md``): positional schema arguments positionally, keyword-only ones by name,
``out=None`` for out variants. Anything that cannot be dispatched raises ``NotImplementedError``
so the folder leaves the node alone.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ir.graph import Node


def _default(arg) -> Any:
    value = arg.default.value
    size = getattr(arg.type, "size", None)
    if size and not isinstance(value, (tuple, list)) and value is not None:
        return [value] * size
    return list(value) if isinstance(value, tuple) else value


def _table():
    from ..plugin.manager import get_plugin_manager

    return get_plugin_manager().registry.kernel_table


def evaluate_with_kernels(node: Node, args: list, *, backends: Sequence[str] = ("cpu",), table=None) -> list:
    """Run ``node``'s kernel on the constant ``args``; one value per output."""
    from ..dispatch.resolve import node_schema, resolve_node

    try:
        table = table if table is not None else _table()
        schema = node_schema(node, table)
        resolved = resolve_node(node, table, backends) if schema is not None else None
    except Exception as exc:  # no plugins, no schema: not foldable
        raise NotImplementedError(f"cannot dispatch {node.kind}: {exc}") from exc
    if resolved is None:
        raise NotImplementedError(f"no kernel for {node.kind}")
    full: list[tuple[str | None, Any]] = []
    sargs = list(schema.arguments)
    for i, value in enumerate(args):
        kw = sargs[i].name if i < len(sargs) and sargs[i].kwarg_only else None
        full.append((kw, value))
    for a in sargs[len(args):]:
        if a.default is None:
            raise NotImplementedError(f"argument {a.name} missing")
        full.append((a.name if a.kwarg_only else None, _default(a)))
    spec = resolved.specialized
    if spec is not None:
        from ..plugin.types import Const

        def pick(i):   # a matcher binds some arguments at load (e.g. a scalar as numpy.float32)
            return i.value if isinstance(i, Const) else full[i][1]

        pos = [pick(i) for i in spec.args]
        kwargs = {name: pick(i) for name, i in spec.kwargs}
    else:
        pos = [v for kw, v in full if kw is None]
        kwargs = {kw: v for kw, v in full if kw is not None}
    if resolved.kind == "out":
        kwargs["out"] = None
    result = resolved.fn(*pos, **kwargs)
    results = list(result) if len(node.outputs) != 1 else [result]
    return [np.asarray(r) if isinstance(r, np.generic) else r for r in results]

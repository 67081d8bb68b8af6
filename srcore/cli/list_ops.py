"""``srcore list-ops``: every declared op overload and every kernel that implements it."""
from __future__ import annotations

import fnmatch
import json

from ..plugin.types import KERNEL_KINDS

NAME = "list-ops"
HELP = "list declared ops and the kernels each installed plugin provides"


def configure_parser(p) -> None:
    p.add_argument("--backend", metavar="B", help="only kernels for backend B")
    p.add_argument("--plugin", metavar="P", help="only kernels from plugin P (entry-point or distribution name)")
    p.add_argument("--kind", choices=KERNEL_KINDS, help="only kernels of this kind")
    p.add_argument("--op", metavar="GLOB", help="only ops whose name matches, e.g. 'aten::add*' or 'example::*'")
    p.add_argument("--format", choices=("table", "json"), default="table")


def _kernel_json(k) -> dict:
    p = k.provider
    return {"backend": k.backend, "kind": k.kind, "dtypes": list(k.dtypes),
            "plugin": (p.dist or p.name) if p else None, "plugin_version": p.version if p else None}


def collect(registry, *, backend=None, plugin=None, kind=None, op=None) -> list[dict]:
    """The ``--format json`` list: ``{name, overload, schema, kernels}`` sorted by (name, overload)."""
    filtering = any(x is not None for x in (backend, plugin, kind))
    out = []
    for qualified, (schema, _who) in registry.declared.items():
        if op is not None and not (fnmatch.fnmatchcase(qualified, op) or fnmatch.fnmatchcase(schema.name, op)):
            continue
        kernels = [k for k in registry.kernel_table.kernels_for(qualified)
                   if (backend is None or k.backend == backend) and (kind is None or k.kind == kind)
                   and (plugin is None or (k.provider and plugin in (k.provider.name, k.provider.dist)))]
        if filtering and not kernels:
            continue
        out.append({"name": schema.name, "overload": schema.overload_name, "schema": str(schema),
                    "kernels": [_kernel_json(k) for k in kernels]})
    return sorted(out, key=lambda e: (e["name"], e["overload"]))


def run(args) -> int:
    from ..plugin.manager import get_plugin_manager
    from .main import format_table

    entries = collect(get_plugin_manager().registry, backend=args.backend, plugin=args.plugin,
                      kind=args.kind, op=args.op)
    if args.format == "json":
        print(json.dumps(entries, indent=2))
        return 0
    rows = []
    for e in entries:
        op = e["name"] + (f".{e['overload']}" if e["overload"] else "")
        if not e["kernels"]:
            rows.append([op, "-", "-", "-", "(no kernel)"])
        for k in e["kernels"]:
            rows.append([op, k["backend"], k["kind"], ",".join(k["dtypes"]),
                         f"{k['plugin']} {k['plugin_version'] or ''}".strip()])
    print(format_table(["OP", "BACKEND", "KIND", "DTYPES", "PLUGIN"], rows))
    n_k = sum(len(e["kernels"]) for e in entries)
    print(f"\n{len(entries)} op overload(s), {n_k} kernel(s)")
    return 0

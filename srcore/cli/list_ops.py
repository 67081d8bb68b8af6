"""``srcore list-ops``: every declared op overload and every kernel that implements it."""
from __future__ import annotations

import difflib
import fnmatch

from ..errors import SrcoreError, UnknownBackendError
from ..plugin.types import KERNEL_KINDS

NAME = "list-ops"
HELP = "list declared ops and the kernels each installed plugin provides"


def configure_parser(p) -> None:
    p.add_argument("--backend", metavar="B", help="only kernels for backend B")
    p.add_argument("--plugin", metavar="P", help="only kernels from plugin P (entry-point or distribution name)")
    p.add_argument("--kind", choices=KERNEL_KINDS, help="only kernels of this kind")
    p.add_argument("--op", metavar="GLOB", help="only ops whose name matches, e.g. 'aten::add*' or 'example::*'")
    p.add_argument("--engine", metavar="BACKEND", help="only the ops engine backend BACKEND (e.g. trt_like) takes "
                   "into an engine, with the arguments it needs as constants and its conditions")
    from .output import add_format_argument

    add_format_argument(p, ("table", "json"), what="the ops")


class UnknownNameError(SrcoreError):
    """A filter that names no installed plugin or declared op (a typo must not read as "nothing")."""


def _did_you_mean(name: str, known) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_filters(registry, plugin_reports, *, backend=None, plugin=None, op=None) -> None:
    """Every name a filter gives exists: a backend some plugin provides, an installed plugin
    (entry-point or distribution name), and for ``--op`` without wildcards a declared op."""
    if backend is not None and backend not in registry.backends:
        raise UnknownBackendError(f"--backend {backend}: unknown backend{_did_you_mean(backend, registry.backends)}; "
                                  f"installed backends: {', '.join(sorted(registry.backends)) or 'none'}")
    if plugin is not None:
        names = {r.name for r in plugin_reports} | {r.dist for r in plugin_reports if r.dist}
        if plugin not in names:
            exc = UnknownNameError(f"--plugin {plugin}: no such plugin{_did_you_mean(plugin, names)}; installed: "
                                   + ", ".join(f"{r.name} ({r.dist})" if r.dist else r.name for r in plugin_reports))
            exc.hint = "run 'srcore plugins' to see the installed plugins"
            raise exc
    if op is not None and not any(c in op for c in "*?["):
        names = {q for q in registry.declared} | {s.name for s, _who in registry.declared.values()}
        if op not in names:
            exc = UnknownNameError(f"--op {op}: no op of that name is declared{_did_you_mean(op, names)}")
            exc.hint = "--op takes a glob too, e.g. --op 'aten::add*'"
            raise exc


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


def _short(names: list[str], limit: int = 6) -> str:
    if not names:
        return "-"
    return ", ".join(names) if len(names) <= limit else ", ".join(names[:limit]) + f", ... ({len(names)} in all)"


def engine_entries(registry, backend: str, entries: list[dict]) -> list[dict]:
    """``entries`` restricted to the ops engine backend ``backend`` takes, each with an ``engine``
    object ``{backend, constants, notes}`` (the builder's op table, ``EngineBuilder.ops``)."""
    from ..dispatch.lazy import resolve_ref

    eb = registry.engine_builders.get(backend)
    if eb is None:
        known = sorted(registry.engine_builders)
        raise UnknownBackendError(f"--engine {backend}: not an engine backend{_did_you_mean(backend, known)}; "
                                  f"engine backends: {', '.join(known) or 'none installed'}")
    if eb.ops is None:
        raise UnknownNameError(f"--engine {backend}: its builder publishes no op table")
    table = {}
    for row in resolve_ref(eb.ops, provider=eb.provider, op="srcore::engine", what=f"ops of the {backend} builder")():
        table[row.op] = {"backend": backend, "constants": list(row.constants), "notes": row.notes}
    out = []
    for e in entries:
        full = e["name"] + (f".{e['overload']}" if e["overload"] else "")
        row = table.get(full) or (table.get(e["name"]) if not e["overload"] else None)
        if row is not None:
            out.append({**e, "engine": row})
    return out


def run(args) -> int:
    from ..plugin.manager import get_plugin_manager
    from .main import format_table

    from .output import print_json

    pm = get_plugin_manager()
    check_filters(pm.registry, pm.reports, backend=args.backend, plugin=args.plugin, op=args.op)
    entries = collect(pm.registry, backend=args.backend, plugin=args.plugin, kind=args.kind, op=args.op)
    if args.engine:
        entries = engine_entries(pm.registry, args.engine, entries)
    if args.format == "json":
        print_json(entries)
        return 0
    if args.engine:
        rows = [[e["name"] + (f".{e['overload']}" if e["overload"] else ""), _short(e["engine"]["constants"]),
                 e["engine"]["notes"] or "-"] for e in entries]
        print(format_table(["OP", "MUST BE CONSTANT", "CONDITIONS"], rows))
        print(f"\n{len(entries)} op overload(s) go into {args.engine} engines (with tensors of the dtypes it "
              f"computes in); any other node runs outside them")
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

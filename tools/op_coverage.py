"""How many declared op overloads can run on a backend, and by which tier.

    python tools/op_coverage.py [--backend cpu] [--json]

Each declared overload is counted once, in the first tier that runs it:

* ``kernel``: an out or native kernel of its own on the backend (srcore-cpu's numpy kernels);
* ``decomposition``: a decomposition whose ops all run (by a kernel, or decomposed in turn);
* ``fallback``: a fallback kernel whose matcher takes it (srcore-cpu's torch fallback: torch has
  the overload); needs torch;
* ``none``: nothing runs it (structural ``prim::`` nodes, which the runtime runs itself, are
  counted apart).

An alias (``aten::absolute``) counts in the tier of the op it names, which a load runs instead.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def coverage(registry, backend: str = "cpu") -> dict:
    from srcore.dispatch.resolve import STRUCTURAL_KINDS
    from srcore.plugin.types import NodeInfo

    table = registry.kernel_table

    def own_kernel(q: str) -> bool:
        return any(not k.is_wildcard for kind in ("out", "native") for k in table.lookup(q, backend, kind))

    decomposable: dict[str, bool] = {}

    def decomposes(q: str, depth: int = 0) -> bool:
        if q in decomposable:
            return decomposable[q]
        decomposable[q] = False  # a cycle does not decompose
        schema = registry.declared[q][0]
        try:
            found = registry.decompositions.graph_for(schema, registry.schemas)
        except Exception:
            found = None
        ok = found is not None and depth < 8 and all(
            n.kind in STRUCTURAL_KINDS or n.kind == "prim::Constant"
            or own_kernel(n.schema.qualified_name) or decomposes(n.schema.qualified_name, depth + 1)
            for n in found[0].all_nodes())
        decomposable[q] = ok
        return ok

    fallbacks = [k for k in table.lookup("aten::__any__", backend, "fallback") if k.is_wildcard]

    def falls_back(q: str) -> bool:
        from srcore.dispatch.lazy import resolve_ref

        schema = registry.declared[q][0]
        for k in fallbacks:
            if k.op[:-1] != q.split("::", 1)[0] + "::":
                continue
            matcher = resolve_ref(k.matcher, provider=k.provider, op=q, what="matcher") if k.matcher else None
            if matcher is None or matcher(NodeInfo(q, schema, (), ())) is not None:
                return True
        return False

    from srcore.ops.aliases import canonical

    def runs_as(q: str) -> str:
        """An alias (``aten::absolute``) runs as the op it names: a load rewrites it (normalize_aliases)."""
        base, dot, overload = q.partition(".")
        target = canonical(base) + dot + overload
        return target if target in registry.declared else q

    counts = {"kernel": [], "decomposition": [], "fallback": [], "none": [], "structural": []}
    for name in registry.declared:
        q = runs_as(name)
        if q in STRUCTURAL_KINDS or q.split(".")[0] in STRUCTURAL_KINDS:
            counts["structural"].append(name)
        elif own_kernel(q):
            counts["kernel"].append(name)
        elif decomposes(q):
            counts["decomposition"].append(name)
        elif falls_back(q):
            counts["fallback"].append(name)
        else:
            counts["none"].append(name)
    return counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--json", action="store_true", help="the overloads of each tier, as JSON")
    args = p.parse_args(argv)
    from srcore.plugin.manager import get_plugin_manager

    registry = get_plugin_manager().registry
    counts = coverage(registry, args.backend)
    if args.json:
        print(json.dumps(counts, indent=1))
        return 0
    total = sum(len(v) for v in counts.values())
    print(f"{total} declared overloads, backend {args.backend}:")
    for tier, ops in counts.items():
        print(f"  {tier:14s} {len(ops):5d}")
    runs = len(counts["kernel"]) + len(counts["decomposition"]) + len(counts["fallback"])
    print(f"  {'can run':14s} {runs:5d} of {total - len(counts['structural'])} (structural ops aside)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

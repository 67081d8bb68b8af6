"""Where the full registry build spends its time: CPU ms per phase of ``build_registry``, in fresh processes.

    env -u PYTHONDONTWRITEBYTECODE python -m benchmarks.registry_phases [--runs 7] [--json FILE]

Each child imports numpy and srcore, discovers the plugins, then builds the full registry with the
phases of :func:`srcore.plugin.registry.build_registry` wrapped in ``time.process_time`` counters
(collecting the hooks' records, declaring the op schemas, kernel checks, the kernel table, shape rules,
decompositions), and in a second pass outside the build times every hook's call and the stamping of its
records (``provided_by``): the modules are imported by then, so a hook's share of ``collect_records``
beyond its call here is its imports. Also counts the modules first imported during the build. Medians over ``--runs``
children; the first child (filling the caches) is not counted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import numpy
import srcore
from srcore.plugin import registry as R
from srcore.dispatch import table as DT
from srcore.plugin.hookspecs import HOOK_RECORDS
from srcore.plugin.types import PluginInfo

pm = srcore.get_plugin_manager()
phases = {}


def timed(owner, name, label):
    f = getattr(owner, name)

    def wrapper(*a, **k):
        c = time.process_time()
        try:
            return f(*a, **k)
        finally:
            phases[label] = phases.get(label, 0.0) + (time.process_time() - c) * 1e3
    setattr(owner, name, wrapper)


for fn in ("collect_records", "new_schema_registry", "_add_schemas", "_library_kernels", "_check_kernel",
           "_shape_rules", "_decompositions"):
    timed(R, fn, fn.lstrip("_"))
timed(DT.KernelTable, "add", "kernel_table.add")
before = set(sys.modules)
c0 = time.process_time()
reg = pm.registry
total = (time.process_time() - c0) * 1e3
imported = sorted(set(sys.modules) - before)
hooks = {}
for hook in HOOK_RECORDS:
    for impl in pm.hookimpls(hook):
        c = time.process_time()
        items = list(impl.function() or ())
        call = (time.process_time() - c) * 1e3
        c = time.process_time()
        for r in items:
            r.provided_by(PluginInfo("x"))
        stamp = (time.process_time() - c) * 1e3
        hooks[f"{hook} {impl.plugin_name}"] = {"records": len(items), "call_ms": call, "stamp_ms": stamp}
print("@@", json.dumps({"total_ms": total, "phases": phases, "hooks": hooks, "imported": imported,
                        "ops": len(reg.declared), "kernels": len(reg.kernel_table)}))
"""


def _child() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, cwd=ROOT)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@ ")), None)
    if p.returncode or line is None:
        raise SystemExit(f"child failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return json.loads(line[3:])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    _child()  # warm-up: fills the schema, entry-point and attrs caches
    runs = [_child() for _ in range(args.runs)]
    med = statistics.median
    out = {"runs": args.runs, "total_ms": med(r["total_ms"] for r in runs),
           "phases": {k: med(r["phases"].get(k, 0.0) for r in runs) for k in runs[0]["phases"]},
           "hooks": {k: {f: med(r["hooks"][k][f] for r in runs) for f in ("records", "call_ms", "stamp_ms")}
                     for k in runs[0]["hooks"]},
           "imported": runs[0]["imported"], "ops": runs[0]["ops"], "kernels": runs[0]["kernels"]}
    print(f"registry build, CPU ms, median of {args.runs}: {out['total_ms']:.1f} "
          f"({out['ops']} ops, {out['kernels']} kernels)")
    for k, v in sorted(out["phases"].items(), key=lambda kv: -kv[1]):
        print(f"  {k:24s} {v:7.1f}")
    print("hook calls outside the build (CPU ms: call / stamp):")
    for k, v in sorted(out["hooks"].items(), key=lambda kv: -kv[1]["call_ms"]):
        if v["call_ms"] + v["stamp_ms"] >= 0.1:
            print(f"  {k:40s} {int(v['records']):5d} records {v['call_ms']:6.1f} / {v['stamp_ms']:5.1f}")
    print(f"{len(out['imported'])} modules first imported during the build")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

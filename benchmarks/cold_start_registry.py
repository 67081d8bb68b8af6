"""Cold start: ``import srcore`` -> a ready registry, measured in fresh processes.

"Ready" means: plugins discovered (entry points) and imported, every hook
called, the op schemas loaded and the kernel table built. Run with and
without the caches (parsed schemas, ``SRCORE_NO_SCHEMA_CACHE``; the
entry-point scan, ``SRCORE_NO_PLUGIN_CACHE``); also checks that no kernel
module (and no numpy, if the plugins keep to the rules) was imported on the
way, and whether ``importlib.metadata`` was (a warm start does not need it).

    .venv/bin/python benchmarks/cold_start_registry.py [--runs 15] [--json FILE]

Both modes run with Python's bytecode cache (in a temporary PYTHONPYCACHEPREFIX).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time, json
t0, c0 = time.perf_counter(), time.process_time()
import srcore
t_import = time.perf_counter()
pm = srcore.get_plugin_manager()
t_load = time.perf_counter()
reg = pm.registry
t_ready, c_ready = time.perf_counter(), time.process_time()
kernel_modules = sorted(m for m in sys.modules if ".kernels" in m and m.startswith("srcore_"))
print(json.dumps({
    "import_ms": (t_import - t0) * 1e3, "discover_ms": (t_load - t_import) * 1e3,
    "registry_ms": (t_ready - t_load) * 1e3, "total_ms": (t_ready - t0) * 1e3,
    "cpu_ms": (c_ready - c0) * 1e3,
    "ops": len(reg.declared), "kernels": len(reg.kernel_table),
    "plugins": {r.name: r.status for r in pm.reports},
    "kernel_modules_imported": kernel_modules, "numpy_imported": "numpy" in sys.modules,
    "metadata_imported": "importlib.metadata" in sys.modules,
}))
"""


def run_once(env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-X", "frozen_modules=on", "-c", CHILD], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def measure(label: str, env: dict[str, str], runs: int) -> dict:
    samples = [run_once(env) for _ in range(runs)]
    summary = {k: round(statistics.median(s[k] for s in samples), 1)
               for k in ("import_ms", "discover_ms", "registry_ms", "total_ms", "cpu_ms")}
    summary["min_total_ms"] = round(min(s["total_ms"] for s in samples), 1)
    summary["min_cpu_ms"] = round(min(s["cpu_ms"] for s in samples), 1)
    last = samples[-1]
    summary.update({k: last[k] for k in ("ops", "kernels", "plugins", "kernel_modules_imported", "numpy_imported",
                                         "metadata_imported")})
    print(f"{label:<16} total {summary['total_ms']:6.1f} ms (min {summary['min_total_ms']:.1f}, "
          f"cpu {summary['cpu_ms']:.1f}) = import "
          f"{summary['import_ms']:.1f} + discover {summary['discover_ms']:.1f} + registry "
          f"{summary['registry_ms']:.1f}; {summary['ops']} ops, {summary['kernels']} kernels; kernel modules "
          f"imported: {summary['kernel_modules_imported'] or 'none'}; numpy imported: {summary['numpy_imported']}; "
          f"importlib.metadata imported: {summary['metadata_imported']}")
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        # bytecode is cached as it would be for an installed package (outside the source tree), even
        # where PYTHONDONTWRITEBYTECODE is set: otherwise every start recompiles every module
        env = {**os.environ, "SRCORE_CACHE_DIR": cache, "PYTHONPYCACHEPREFIX": os.path.join(cache, "pyc")}
        for var in ("SRCORE_NO_SCHEMA_CACHE", "SRCORE_NO_PLUGIN_CACHE", "PYTHONDONTWRITEBYTECODE"):
            env.pop(var, None)
        no_cache = {**env, "SRCORE_NO_SCHEMA_CACHE": "1", "SRCORE_NO_PLUGIN_CACHE": "1"}
        run_once(env)  # fill the caches
        run_once(no_cache)
        results = {"with_cache": measure("with caches", env, args.runs),
                   "without_cache": measure("without caches", no_cache, args.runs)}
    results["python"] = sys.version.split()[0]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a cold start's time goes, phase by phase, beside the interpreter's and numpy's own start.

    env -u PYTHONDONTWRITEBYTECODE python -m benchmarks.cold_start_phases [--models mlp_tiny,digits] [--runs 9]
        [--prepared] [--json FILE]

For each model and registry (full: every installed plugin; selection: ``SRCORE_SELECTION`` = the file
``srcore select`` writes), ``--runs`` fresh processes run the ``benchmarks.cold_start_selection`` child
split into phases: numpy (its import and ``np.load`` of the input), ``import srcore.plugin`` (attrs,
pluggy, the record types), plugin discovery (``get_plugin_manager``: entry points, the plugin modules),
the registry build, ``srcore.load`` (the ``.srm`` read and IR parse), importing the runtime, each load
stage of ``StaticModule`` and the first call. Each phase's CPU time (``time.process_time``) is reported,
median and best of the runs; a second set of children with a meta-path hook that times every module's
import says how much of each phase is importing code, how the imports split by package, and how many
attrs classes the start builds in what CPU time. The same rounds also start ``python -c pass``,
``python -c "import numpy"`` and ``python -c "import numpy, attrs, pluggy"`` (srcore's run-time
dependencies): the floor below srcore (process wall time, and whole-process CPU time). Children run interleaved (so machine load hits
all alike), from a directory outside the checkout, with bytecode caching on and one BLAS thread; one
warm-up child per case fills the caches. ``--prepared``: the models saved prepared
(``StaticModule.save(path, prepared=True)``, once per registry), which load without the passes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .cold_start_selection import PREPARE
from .cold_start_selection import _artifacts

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time, json
P = time.process_time
HOOK = {hook}
imports = {{}}    # top-level package -> CPU ms importing its modules after numpy (own code, finders included)
phase_imports = {{}}
state = {{"phase": "numpy"}}
stack = []
if HOOK:
    class _Timed:
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            c = P()
            spec = None
            for f in sys.meta_path:
                fs = getattr(f, "find_spec", None) if f is not cls else None
                if fs is not None:
                    spec = fs(name, path, target)
                    if spec is not None:
                        break
            found = P() - c
            loader = getattr(spec, "loader", None)
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            run = loader.exec_module

            class _Loader:
                def __getattr__(self, a):
                    return getattr(loader, a)

                def create_module(self, s):   # an extension module's dlopen happens here
                    nonlocal found
                    c0 = P()
                    try:
                        return loader.create_module(s)
                    finally:
                        found += P() - c0

                def exec_module(self, module):
                    stack.append(0.0)   # the time of this module's own nested imports
                    c0 = P()
                    try:
                        run(module)
                        if name in ("attr._make", "attr._next_gen"):
                            _count_attrs_classes(module)
                    finally:
                        dt = P() - c0
                        nested = stack.pop()
                        top = name.split(".")[0]   # its own code and its finders, charged to its package
                        if state["phase"] != "numpy":   # what srcore's start imports (numpy's own: the floor)
                            imports[top] = imports.get(top, 0.0) + (dt - nested + found) * 1e3
                        if stack:
                            stack[-1] += dt + found
                        else:   # an outermost import: charged (nested ones included) to the phase
                            ph = state["phase"]
                            phase_imports[ph] = phase_imports.get(ph, 0.0) + (dt + found) * 1e3

            spec.loader = _Loader()
            return spec

    def _count_attrs_classes(module):
        # attrs' class decorator, wrapped: how many classes the start builds after attrs' import (srcore's
        # and its plugins'), and their CPU time (define/frozen call the attrs() bound in attr._next_gen)
        build = module.attrs

        def timed(maybe_cls=None, *args, **kwargs):
            if maybe_cls is None:   # @define(...) with options: the class comes next
                return lambda cls: timed(cls, *args, **kwargs)
            c0 = P()
            try:
                return build(maybe_cls, *args, **kwargs)
            finally:
                attrs_classes[0] += 1
                attrs_classes[1] += (P() - c0) * 1e3

        module.attrs = timed

    sys.meta_path.insert(0, _Timed)
attrs_classes = [0, 0.0]
phases = {{}}
c = P()


def mark(name, nxt):
    global c
    now = P()
    phases[name] = (now - c) * 1e3
    c = now
    state["phase"] = nxt


import numpy as np
x = np.load({inp!r})
mark("numpy", "srcore.plugin")
import srcore.plugin
mark("srcore.plugin", "discovery")
pm = srcore.get_plugin_manager()
mark("discovery", "registry")
pm.registry
mark("registry", "load")
m = srcore.load({srm!r})
mark("load", "runtime import")
import srcore.runtime.static_module as S, types
S.time = types.SimpleNamespace(perf_counter=P)   # StaticModule's stage clock in CPU time
mark("runtime import", "StaticModule")
sm = srcore.StaticModule(m)
mark("StaticModule", "first call")
y = sm(x)
mark("first call", "-")
print("@@", json.dumps({{"phases": phases, "stages": {{k: v * 1e3 for k, v in sm.load_stages.items()}},
                        "imports": imports, "phase_imports": phase_imports, "modules": len(sys.modules),
                        "attrs_classes": attrs_classes}}))
"""

_cpu = [0.0]   # the CPU ms of the last child _run ran (its exit included)
FLOORS = {"python -c pass": "pass", 'python -c "import numpy"': "import numpy",
          # srcore's two other run-time dependencies on every start: the floor of any srcore start
          'python -c "import numpy, attrs, pluggy"': "import numpy, attrs, pluggy"}


def _run(args: list[str], env: dict, cwd: str) -> tuple[float, dict | None]:
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True)
    wall = (time.perf_counter() - t0) * 1e3
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)   # the one child run since r0: its whole CPU time
    _cpu[0] = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1e3
    if p.returncode:
        raise RuntimeError(p.stderr.strip()[-1500:])
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@")), None)
    return wall, (json.loads(line[2:]) if line else None)


def measure(models: list[str], runs: int, out: Path, cwd: str, prepared: bool = False) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("SRCORE_SELECTION", "PYTHONDONTWRITEBYTECODE")}
    base.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cases = []
    for model in models:
        srm, inp = _artifacts(model, out)
        selection = out / "artifacts" / model / "selection.yaml"
        subprocess.run([sys.executable, "-c", "import sys; from srcore.cli.main import main; sys.exit(main())",
                        "select", str(srm), "-o", str(selection)], check=True, cwd=ROOT, capture_output=True)
        for mode, env in (("full", base), ("selection", {**base, "SRCORE_SELECTION": str(selection)})):
            loaded = srm
            if prepared:  # saved prepared under the registry it is loaded with (benchmarks.cold_start_ab)
                loaded = selection.with_name(f"{srm.stem}.prepared-{mode}.srm")
                prep = PREPARE.format(srm=str(srm), inp=str(inp), out=str(loaded))
                subprocess.run([sys.executable, "-c", prep], check=True,
                               env=env, cwd=cwd, capture_output=True)
            for hook in (False, True):
                code = CHILD.format(inp=str(inp), srm=str(loaded), hook=hook)
                cases.append(((model, mode, hook), [sys.executable, "-c", code], env))
    for name, stmt in FLOORS.items():
        cases.append(((name, None, False), [sys.executable, "-c", stmt], base))
    for _, args, env in cases:   # warm the caches and the bytecode
        _run(args, env, cwd)
    samples: dict = {key: [] for key, _, _ in cases}
    cpu: dict = {key: [] for key, _, _ in cases}
    for _ in range(runs):
        for key, args, env in cases:
            samples[key].append(_run(args, env, cwd))
            cpu[key].append(_cpu[0])
    result: dict = {"floors": {name: statistics.median(w for w, _ in samples[(name, None, False)]) for name in FLOORS},
                    "floors_cpu_best": {name: min(cpu[(name, None, False)]) for name in FLOORS}}
    for model in models:
        for mode in ("full", "selection"):
            plain, hooked = samples[(model, mode, False)], samples[(model, mode, True)]
            row: dict = {"wall_ms_median": statistics.median(w for w, _ in plain),
                         "modules": plain[0][1]["modules"], "phases": {}, "stages": {}, "imports": {}}
            for ph in plain[0][1]["phases"]:
                vals = [d["phases"][ph] for _, d in plain]
                row["phases"][ph] = {"median": statistics.median(vals), "best": min(vals),
                                     "imports_best": min(d["phase_imports"].get(ph, 0.0) for _, d in hooked)}
            for st in plain[0][1]["stages"]:
                vals = [d["stages"].get(st, 0.0) for _, d in plain]
                row["stages"][st] = {"median": statistics.median(vals), "best": min(vals)}
            row["attrs_classes"] = {"count": hooked[0][1]["attrs_classes"][0],
                                    "cpu_ms_best": min(d["attrs_classes"][1] for _, d in hooked)}
            tops = {t for _, d in hooked for t in d["imports"]}
            row["imports"] = {t: min(d["imports"].get(t, 0.0) for _, d in hooked) for t in tops}
            result[f"{model}/{mode}"] = row
    return result


def report(result: dict, runs: int) -> None:
    f, fc = result["floors"], result["floors_cpu_best"]
    print(f"process wall ms, median of {runs} (whole-process CPU ms, best): "
          + ", ".join(f"{k} {v:.0f} ({fc[k]:.1f})" for k, v in f.items()))
    for key, row in result.items():
        if key in ("floors", "floors_cpu_best"):
            continue
        print(f"\n{key}: process wall median {row['wall_ms_median']:.0f} ms, {row['modules']} modules; CPU ms:")
        print(f"  {'phase':<26}{'median':>9}{'best':>9}{'imports (best)':>16}")
        for ph, v in row["phases"].items():
            print(f"  {ph:<26}{v['median']:>9.1f}{v['best']:>9.1f}{v['imports_best']:>16.1f}")
            if ph == "StaticModule":
                for st, s in row["stages"].items():
                    print(f"    {st:<24}{s['median']:>9.1f}{s['best']:>9.1f}")
        a = row["attrs_classes"]
        print(f"  attrs classes built (srcore's): {a['count']}, {a['cpu_ms_best']:.1f} ms CPU (best; "
              "inside the imports above)")
        total = sum(row["imports"].values())
        top = sorted(row["imports"].items(), key=lambda kv: -kv[1])[:8]
        print(f"  imports after numpy's, by package (best, CPU ms; {total:.0f} in all): "
              + ", ".join(f"{k} {v:.1f}" for k, v in top))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cold_start_phases", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp_tiny,digits")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--prepared", action="store_true", help="load the models saved prepared (StaticModule.save)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="srcore-phases-") as cwd:
        result = measure(args.models.split(","), args.runs, out, cwd, args.prepared)
    report(result, args.runs)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

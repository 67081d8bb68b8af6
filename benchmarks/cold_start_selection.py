"""Cold start with a selective build vs the full registry: a fresh process to the first result.

    python -m benchmarks.cold_start_selection [--models mlp_tiny,digits] [--runs 7] [--json FILE]

For each model: ``srcore select`` writes a selection; then fresh processes run ``import srcore``,
``srcore.load``, ``StaticModule`` and the first call, alternately with the full registry (the three
plugins installed) and with ``SRCORE_SELECTION``. Reported per mode (median of ``--runs``, the two
modes interleaved so that machine load hits both alike; a third mode, ``prepared``, is the selection
with the model saved prepared under it, ``StaticModule.save(path, prepared=True)``, so the load runs no
pass; a fourth, ``prepared_full``, the selection with the model saved prepared under the full registry
(backends cpu, as ``srcore select`` loads), which the selection, made under that registry, accepts;
``cached`` and ``cached_full``: the model as converted with the selection / the full registry, its prepared
form read from the prepared-model cache, ``srcore.runtime.prepared_cache``, which the other modes have off;
its ``prepared/`` folder of the children's cache root is emptied first, so the first child of these modes,
the warm-up, starts with a cold prepared cache and fills it: ``cold_cache_first_ms`` is its first result):
process wall time, in-child time (from the
child's first statement) and in-child CPU time (less disturbed by other processes), first result (from
spawning the process to the result in hand: the interpreter's start included, its exit not; what the
cold-start goals measure), the registry build, modules imported, max RSS;
and, in one more child per mode with ``tracemalloc`` on, the bytes allocated while the registry is
built (``registry bytes``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits"

CHILD = r"""
import time, sys
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
x = np.load({inp!r})
t_in = time.perf_counter()
import srcore
m = srcore.load({srm!r})
sm = srcore.StaticModule(m)
y = sm(x)
t_end, c_end, t_result = time.perf_counter(), time.process_time(), time.time()
pm = srcore.get_plugin_manager()
import json


def _hwm_mb():  # VmHWM: this process's peak RSS (ru_maxrss would count the parent's, inherited over exec)
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM")) / 1024


print("@@", json.dumps({{"t_result": t_result, "in_child_ms": (t_end - t0) * 1e3, "cpu_ms": (c_end - c0) * 1e3, "srcore_ms": (t_end - t_in) * 1e3,
                        "registry_ms": pm.timings.get("registry", 0) * 1e3, "plugins_ms": pm.timings.get("load", 0) * 1e3,
                        "modules": len(sys.modules), "max_rss_mb": _hwm_mb(), "prepared_before": sm.prepared_before,
                        "ops": len(sm.registry.declared), "kernels": len(sm.registry.kernel_table)}}))
"""

#: save the model prepared, after one call with the benchmark's input (so the record keeps that signature's layouts)
PREPARE = ("import numpy as np, srcore; sm = srcore.StaticModule(srcore.load({srm!r})); sm(np.load({inp!r})); "
           "sm.save({out!r}, prepared=True)")
#: ... under the full registry, for the backends ``srcore select`` loads with (cpu): a selection made under that
#: registry loads it as saved (``Selection.made_under``)
PREPARE_FULL = ("import numpy as np, srcore; sm = srcore.StaticModule(srcore.load({srm!r}), backends=('cpu',)); "
                "sm(np.load({inp!r})); sm.save({out!r}, prepared=True)")

BYTES = r"""
import tracemalloc
import srcore
pm = srcore.get_plugin_manager()
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
reg = pm.registry
print("@@", tracemalloc.get_traced_memory()[0] - before)
"""


def _artifacts(model: str, out: Path) -> tuple[Path, Path]:
    if model == "digits":
        import numpy as np

        (out / "artifacts" / "digits").mkdir(parents=True, exist_ok=True)
        inp = out / "artifacts" / "digits" / "input.npy"
        np.save(inp, np.load(DIGITS / "digits_test.npz")["x"][:1])
        return DIGITS / "digits.srm", inp
    from .prepare import prepare

    prepare(model, out)
    art = out / "artifacts" / model
    import numpy as np

    with np.load(art / "inputs.npz") as feeds:   # what benchmarks.prepare writes, by input name
        if len(feeds.files) != 1:
            raise SystemExit(f"{model}: {len(feeds.files)} inputs; the cold-start child feeds one")
        np.save(art / "input.npy", feeds[feeds.files[0]])
    return art / "model.srm", art / "input.npy"


def _child(code: str, env: dict) -> tuple[float, dict | int]:
    t0, spawned = time.perf_counter(), time.time()
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    wall = (time.perf_counter() - t0) * 1e3
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@")), None)
    if line is None:
        raise RuntimeError(p.stderr.strip()[-800:])
    data = json.loads(line[2:])
    if isinstance(data, dict) and "t_result" in data:  # the goal's measure: spawn to first result (not to exit)
        data["first_result_ms"] = (data.pop("t_result") - spawned) * 1e3
    return wall, data


def _empty_prepared_cache() -> None:
    import shutil

    from srcore.cachedir import cache_dir_str

    shutil.rmtree(cache_dir_str("prepared"), ignore_errors=True)


def measure(model: str, out: Path, runs: int) -> dict:
    srm, inp = _artifacts(model, out)
    selection = out / "artifacts" / model / "selection.yaml"
    subprocess.run([sys.executable, "-c", "import sys; from srcore.cli import main; sys.exit(main())", "select",
                    str(srm), "-o", str(selection)], check=True,
                   cwd=ROOT, capture_output=True)
    # bytecode caching on (a deployment has its .pyc files), no selection unless asked for
    base = {k: v for k, v in os.environ.items() if k not in ("SRCORE_SELECTION", "PYTHONDONTWRITEBYTECODE")}
    base.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cached = {"full": base, "selection": {**base, "SRCORE_SELECTION": str(selection)}}
    # the modes measured before the prepared-model cache existed: without it
    base = {**base, "SRCORE_NO_PREPARED_CACHE": "1"}
    envs = {"full": base, "selection": {**base, "SRCORE_SELECTION": str(selection)}}
    envs["prepared"] = envs["prepared_full"] = envs["selection"]
    envs["cached"], envs["cached_full"] = cached["selection"], cached["full"]
    files = {"full": srm, "selection": srm, "cached": srm, "cached_full": srm}
    for mode, template, env in (("prepared", PREPARE, envs["selection"]), ("prepared_full", PREPARE_FULL, base)):
        # beside the selection, never in examples/
        files[mode] = selection.with_name(f"{srm.stem}.{mode.replace('_', '-')}-selection.srm")
        subprocess.run([sys.executable, "-c", template.format(srm=str(srm), inp=str(inp), out=str(files[mode]))],
                       env=env, check=True, cwd=ROOT, capture_output=True)
    codes = {mode: CHILD.format(inp=str(inp), srm=str(files[mode])) for mode in envs}
    samples: dict[str, list] = {mode: [] for mode in envs}
    _empty_prepared_cache()
    cold = {}
    for mode, env in envs.items():  # warm the schema and entry-point caches and the bytecode (and prepared cache)
        cold[mode] = _child(codes[mode], env)[1]
    for _ in range(runs):
        for mode, env in envs.items():
            samples[mode].append(_child(codes[mode], env))
    result = {"selection": str(selection)}
    for mode, ss in samples.items():
        row = {"wall_ms": statistics.median(w for w, _ in ss)}
        for key in ss[0][1]:
            row[key] = statistics.median(d[key] for _, d in ss)
        # the least disturbed start (on a loaded machine the medians measure the load)
        row["first_result_best_ms"] = min(d["first_result_ms"] for _, d in ss)
        row["prepared_before"] = all(d["prepared_before"] for _, d in ss)
        row["cold_cache_first_ms"] = cold[mode]["first_result_ms"]   # the warm-up child's
        row["cold_cache_prepared_before"] = cold[mode]["prepared_before"]
        row["registry_bytes"] = _child(BYTES, envs[mode])[1]
        result[mode] = row
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cold_start_selection", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp_tiny,digits")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    cols = ("first_result_ms", "first_result_best_ms", "cold_cache_first_ms", "wall_ms", "in_child_ms", "cpu_ms", "registry_ms", "registry_bytes", "modules",
            "max_rss_mb", "ops", "kernels")
    print(f"{'model':<10}{'mode':<14}" + "".join(f"{c:>22}" for c in cols))
    for model in args.models.split(","):
        results[model] = r = measure(model, out, args.runs)
        for mode in ("full", "selection", "prepared", "prepared_full", "cached", "cached_full"):
            if mode.startswith(("prepared", "cached")) and not r[mode]["prepared_before"]:
                print(f"{model}: {mode}: the prepared model ran its passes again (its record did not match)")
            if mode.startswith("cached") and r[mode]["cold_cache_prepared_before"]:
                print(f"{model}: {mode}: the first child found the prepared cache filled")
            print(f"{model:<10}{mode:<14}" + "".join(f"{r[mode][c]:>22,.1f}" if isinstance(r[mode][c], float)
                                                     else f"{r[mode][c]:>22,}" for c in cols), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cold start, A/B: an older commit against this checkout, in one interleaved run.

    env -u PYTHONDONTWRITEBYTECODE python -m benchmarks.cold_start_ab --old COMMIT [--runs 25]
        [--models mlp_tiny,digits] [--prepared] [--json FILE]

Each round runs, for every model and registry (full: every installed plugin; selection:
``SRCORE_SELECTION`` = the file ``srcore select`` writes for the model), one fresh child of each arm
in turn, so that machine load hits both arms alike. A child is the ``benchmarks.cold_start_selection``
child: import numpy, load the input, ``import srcore``, ``load``, ``StaticModule``, first call. The old
arm is a ``git worktree add --detach`` of COMMIT (removed afterwards) put first on ``PYTHONPATH`` with
its plugins (``plugins/cpu``, ``quantized``, ``trt_like``, ``openvino``), the new arm this checkout the
same way; children start outside both checkouts, with bytecode caching on, one BLAS thread
(``--blas-threads env``: the environment's count) and one ``SRCORE_CACHE_DIR`` per arm (filled by each
arm's warm-up child). Reported per row: in-child CPU ms (``time.process_time``: less disturbed by other processes than wall time) and
srcore's share of it (after numpy and the input are loaded), median and best round, the CPU ms of the
plugin registry's build (the child builds it right after ``import srcore``, before ``load``, which
would otherwise build it), the process's wall time (median) and the time from spawning it to the first
result (median and best: the cold-start goals' measure, the interpreter's start included, its exit not),
old -> new. ``--prepared``: both arms load the model saved prepared (``StaticModule.save(path,
prepared=True)``, by each arm's own checkout: the record's format may differ; once per registry: a
selective load's file is prepared under its selection), which a checkout that knows the record loads
without running the passes; ``--prepared full``: saved once under the full registry for the cpu backend
(what ``srcore select`` loads with), and both rows load that file (a selection made under that registry
may accept it: ``Selection.made_under``). Each arm writes its own selection with its own ``srcore select``.
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

from .cold_start_selection import PREPARE, PREPARE_FULL, _artifacts

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ("cpu", "quantized", "trt_like", "openvino")

CHILD = """import time
c0 = time.process_time()
import numpy as np
x = np.load({inp!r})
c1 = time.process_time()
import srcore
cr = time.process_time()
srcore.get_plugin_manager().registry  # built here rather than inside load: its CPU time on its own
cr = time.process_time() - cr
m = srcore.load({srm!r})
y = srcore.StaticModule(m)(x)
c2, t_result = time.process_time(), time.time()
print("@@", (c2 - c0) * 1e3, (c2 - c1) * 1e3, cr * 1e3, repr(t_result))
"""


#: the BLAS thread variables the arms' children start with: one thread (the default), or the environment's
#: own (``--blas-threads env``: the goal's measure, ``benchmarks.cold_start_selection``, sets none)
_BLAS_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _env(arm: Path, selection: str | None, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SRCORE_SELECTION", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    # each arm its own cache directory: some caches are one file per package (the plugins' kernel records,
    # the rule index) keyed on the arm's sources, and two arms sharing it would overwrite each other's
    # entries and both pay a miss on every start
    env.update(_BLAS_ENV, SRCORE_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(arm)] + [str(arm / "plugins" / p) for p in PLUGINS]))
    if selection:
        env["SRCORE_SELECTION"] = selection
    return env


def _child(code: str, env: dict, cwd: str) -> tuple[float, float, float, float, float]:
    t0, spawned = time.perf_counter(), time.time()
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)
    wall = (time.perf_counter() - t0) * 1e3
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@")), None)
    if line is None:
        raise RuntimeError(p.stderr.strip()[-1500:])
    total, share, registry, t_result = (float(v) for v in line.split()[1:])
    return total, share, wall, registry, (t_result - spawned) * 1e3




def run(old: Path, new: Path, models: list[str], runs: int, out: Path, cwd: str, prepared: str | None = None) -> dict:
    cases = []
    for model in models:
        srm, inp = _artifacts(model, out)
        for arm_name, arm in (("old", old), ("new", new)):
            # each arm its own selection, written by its own `srcore select` (the file's keys may differ)
            selection = out / "artifacts" / model / f"selection-{arm_name}.yaml"
            subprocess.run([sys.executable, "-c", "import sys; from srcore.cli.main import main; sys.exit(main())",
                            "select", str(srm), "-o", str(selection)], check=True, cwd=cwd, capture_output=True,
                           env=_env(arm, None, Path(cwd).parent / f"cache-{arm_name}"))
            for mode, sel in (("full", None), ("selection", str(selection))):
                env = _env(arm, sel, Path(cwd).parent / f"cache-{arm_name}")
                loaded = srm
                if prepared:  # by the arm's own checkout (its record's format), beside the selection (never in examples/)
                    # "own": under the registry it loads with; "full": once, under the full registry, for cpu
                    loaded = selection.with_name(f"{srm.stem}.prepared-{mode if prepared == 'own' else 'full'}-{arm_name}.srm")
                    if prepared == "own" or mode == "full":
                        prep = (PREPARE if prepared == "own" else PREPARE_FULL).format(srm=str(srm), inp=str(inp),
                                                                                       out=str(loaded))
                        subprocess.run([sys.executable, "-c", prep], check=True,
                                       env=_env(arm, sel if prepared == "own" else None,
                                                Path(cwd).parent / f"cache-{arm_name}"),
                                       cwd=cwd, capture_output=True)
                cases.append(((model, mode, arm_name), CHILD.format(inp=str(inp), srm=str(loaded)), env))
    for _, code, env in cases:  # warm the caches (entry points, schemas, selections) and the bytecode
        _child(code, env, cwd)
    samples: dict[tuple, list] = {key: [] for key, _, _ in cases}
    for _ in range(runs):
        for key, code, env in cases:
            samples[key].append(_child(code, env, cwd))
    result = {}
    for model in models:
        for mode in ("full", "selection"):
            row = {}
            for arm_name in ("old", "new"):
                ss = samples[(model, mode, arm_name)]
                row[arm_name] = {"cpu_ms_median": statistics.median(t for t, *_ in ss),
                                 "cpu_ms_best": min(t for t, *_ in ss),
                                 "srcore_ms_median": statistics.median(s[1] for s in ss),
                                 "srcore_ms_best": min(s[1] for s in ss),
                                 "registry_ms_median": statistics.median(s[3] for s in ss),
                                 "registry_ms_best": min(s[3] for s in ss),
                                 "wall_ms_median": statistics.median(s[2] for s in ss),
                                 "first_result_ms_median": statistics.median(s[4] for s in ss),
                                 "first_result_ms_best": min(s[4] for s in ss)}
            result[f"{model}/{mode}"] = row
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cold_start_ab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the commit to compare against (a git revision)")
    ap.add_argument("--models", default="mlp_tiny,digits")
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--prepared", nargs="?", const="own", choices=("own", "full"),
                    help="both arms load the models saved prepared: under the registry each row loads with "
                         "(own, the default), or once under the full registry for cpu (full: what a selection "
                         "made under that registry may accept)")
    ap.add_argument("--blas-threads", choices=("one", "env"), default="one",
                    help="one: the children start with OMP/OPENBLAS/MKL_NUM_THREADS=1 (the default); env: with "
                         "this environment's (as benchmarks.cold_start_selection, the goal's measure)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.blas_threads == "env":
        _BLAS_ENV.clear()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="srcore-ab-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.old], check=True,
                       capture_output=True)
        try:
            rev = subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip()
            new_rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip()
            cwd = Path(tmp) / "cwd"
            cwd.mkdir()
            result = run(old, ROOT, args.models.split(","), args.runs, out, str(cwd), args.prepared)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    print(f"old {rev} vs new {new_rev} (this checkout{', with uncommitted changes' if _dirty() else ''}), "
          f"{args.runs} interleaved rounds{f', models saved prepared ({args.prepared})' if args.prepared else ''}; "
          f"in-child CPU ms and srcore's share (after numpy and the input), "
          f"process wall ms (spawn to exit), first result ms (spawn to the result in hand)")
    print(f"{'model/registry':<20}{'CPU median':>20}{'CPU best':>20}{'srcore median':>20}{'srcore best':>20}"
          f"{'registry median':>20}{'registry best':>20}{'wall median':>20}{'1st result median':>20}"
          f"{'1st result best':>20}")
    for key, row in result.items():
        cells = [f"{row['old'][c]:.0f} -> {row['new'][c]:.0f}"
                 for c in ("cpu_ms_median", "cpu_ms_best", "srcore_ms_median", "srcore_ms_best", "registry_ms_median",
                           "registry_ms_best", "wall_ms_median", "first_result_ms_median", "first_result_ms_best")]
        print(f"{key:<20}" + "".join(f"{c:>20}" for c in cells))
    if args.json:
        Path(args.json).write_text(json.dumps({"old": rev, "new": new_rev, "runs": args.runs, "rows": result}, indent=1))
    return 0


def _dirty() -> bool:
    return bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    sys.exit(main())

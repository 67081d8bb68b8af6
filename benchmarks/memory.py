"""Arena size vs the liveness lower bound and the no-reuse sum, per model and planner (and the
trt_like engines' arenas).

``python -m benchmarks.memory [--models ...]`` (from ``StaticModule.memory_report``, summed
over the blocks of the graph; no timing, so it runs in this process).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .artifacts import load_inputs
from .models import ALL_MODELS, MODELS
from .prepare import prepare
from .run import ROOT

PLANNERS = ("standard_resizing", "precomputed_offsets")


def memory_rows(srm: Path, xs: list) -> dict[str, dict]:
    import srcore

    model = srcore.load(str(srm))
    out = {}
    for pl in PLANNERS:
        rows = srcore.StaticModule(model, options=srcore.Options(memory_planner_algorithm=pl)).memory_report(*xs)
        tot = {k: sum(r[k] for r in rows) for k in ("arena_bytes", "lower_bound_bytes", "no_reuse_bytes",
                                                    "managed_tensors")}
        tot["blocks"] = len(rows)
        out[pl] = tot
    # the trt_like engines' own arenas (precomputed offsets over their intermediates)
    pm = srcore.get_plugin_manager()
    if "trt_like" in pm.registry.engine_builders:
        sm = srcore.StaticModule(model, backends=("trt_like", "cpu"))
        tot = {"arena_bytes": 0, "lower_bound_bytes": 0, "no_reuse_bytes": 0, "managed_tensors": 0}
        for seg in sm.partition.engines:
            mem = seg.engine.memory() if hasattr(seg.engine, "memory") else {}
            for k in ("arena_bytes", "lower_bound_bytes", "no_reuse_bytes"):
                tot[k] += mem.get(k, 0)
            tot["managed_tensors"] += mem.get("tensors", 0)
        tot["blocks"] = len(sm.partition.engines)
        out["trt_like engines"] = tot
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of {','.join(ALL_MODELS)}")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    results = {}
    print(f"{'model':<28}{'planner':<22}{'tensors':>8}{'arena KiB':>11}{'lower KiB':>11}{'no-reuse KiB':>13}"
          f"{'arena/lower':>12}{'arena/no-reuse':>15}")
    for m in args.models.split(","):
        prepare(m, out)
        art = out / "artifacts" / m
        try:
            results[m] = memory_rows(art / "model.srm", load_inputs(art)[1])
        except Exception as e:  # noqa: BLE001 - recorded
            results[m] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{m:<28}error: {results[m]['error'][:100]}")
            continue
        for pl, t in results[m].items():
            lb, nr = t["lower_bound_bytes"], t["no_reuse_bytes"]
            print(f"{m:<28}{pl:<22}{t['managed_tensors']:>8}{t['arena_bytes'] / 1024:>11.1f}{lb / 1024:>11.1f}"
                  f"{nr / 1024:>13.1f}{t['arena_bytes'] / lb if lb else float('nan'):>12.3f}"
                  f"{t['arena_bytes'] / nr if nr else float('nan'):>15.3f}")
    (out / "memory.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

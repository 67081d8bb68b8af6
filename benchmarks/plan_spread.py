"""How much trt_like's plan moves from build to build, and whether the moves matter:
``python -m benchmarks.plan_spread [--models resnet_small] [--builds 4] [--threads 2] [--rounds 5]``.

Each build runs in a child process of its own with a fresh ``SRCORE_CACHE_DIR`` (nothing timed
before is reused; ``--shared-cache``: one for all, as a machine's builds one after the other) and writes its plan to an engine cache directory of its own, with the builder's
debug log (every layer's candidates and their timed seconds, the pool and layout choices) and the
load average when it started. Then one more child loads every build's plan (nothing is timed
again: the engine cache restores the tactics) beside ONNX Runtime and times them all interleaved,
clean calls only (``benchmarks.clean_calls``): the spread between the plans in one run, free of
the run-to-run noise of the machine. The report lists the layers whose tactic differs between
builds with what each build timed for the candidates, and each plan's ratio to ORT.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _threads_env(threads: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def _module(art: Path, options: dict):
    import srcore

    m = srcore.load(str(art / "model.srm"))
    sm = srcore.StaticModule(m, options=srcore.Options(engine_options=options), backends=("trt_like", "cpu"))
    return sm, sm.runtime()


def child_build(model: str, art: Path, work: Path) -> None:
    """Build ``model``'s trt_like engine once (fresh caches), plan to ``work/engines``."""
    from .artifacts import load_inputs

    load = os.getloadavg()
    handler = logging.FileHandler(work / "build.log")
    handler.setFormatter(logging.Formatter("%(message)s"))
    lg = logging.getLogger("srcore.trt_like")
    lg.addHandler(handler)
    lg.setLevel(logging.DEBUG)
    _, xs = load_inputs(art)
    _, rt = _module(art, {"engine_cache": str(work / "engines")})
    rt(*xs)
    (work / "load.json").write_text(json.dumps({"load_before": load, "load_after": os.getloadavg()}))


def child_time(model: str, art: Path, works: list[Path], rounds: int, threads: int, out: Path) -> None:
    """Every build's plan (from its engine cache) and ORT, timed interleaved, clean calls."""
    from .artifacts import load_inputs
    from .cell import load_runner
    from .clean_calls import clean_medians

    names, xs = load_inputs(art)
    # ORT's spinning intra-op workers in this process take the core the engines' second thread needs
    # (resnet_small's plans 1.3-2x slower beside it at load 2): SRCORE_PLAN_SPREAD_ORT=0 leaves it out
    with_ort = os.environ.get("SRCORE_PLAN_SPREAD_ORT", "1") != "0"
    calls = {"ort": load_runner(model, "ort", threads, art, xs, names, {})} if with_ort else {}
    keep = []
    for w in works:
        sm, rt = _module(art, {"engine_cache": str(w / "engines"), "timing_cache": False})
        keep.append((sm, rt))
        rt(*xs)
        calls[_label(w)] = (lambda rt=rt: rt(*xs))
    tally = clean_medians(calls, rounds, min_clean=30)
    res = {k: {"median_us": tally.median_us(k), "all_us": tally.all_median_us(k), "kept": tally.count(k),
               "seen": tally.seen.get(k, 0)} for k in calls}
    out.write_text(json.dumps({"load": os.getloadavg(), "times": res}))


def _label(work: Path) -> str:
    """A build's name in the timings: its run's directory and its own (``ps-before/build2``)."""
    return f"{work.parent.parent.name}/{work.name}"


def _plan_layers(work: Path) -> list[tuple[str, str, str]]:
    from srcore_trt_like.store import _read_plan_file

    files = sorted((work / "engines").glob("*.plan"))
    rows = []
    for f in files:
        meta, _ = _read_plan_file(f)
        rows += [(e["kind"], e.get("source") or "", e["tactic"]) for e in meta["layers"]]
    return rows


def report(model: str, works: list[Path], timed: dict) -> str:
    lines = [f"## {model}"]
    plans = [_plan_layers(w) for w in works]
    loads = [json.loads((w / "load.json").read_text())["load_before"][0] for w in works]
    t = timed["times"]
    lines.append(f"timed at load {timed['load'][0]:.1f}")
    ort = t["ort"]["median_us"]
    for w, ld in zip(works, loads):
        r = t[_label(w)]
        lines.append(f"{_label(w)}: load {ld:.1f} at build; {r['median_us']:.0f} us ({r['kept']}/{r['seen']} clean) "
                     f"= {r['median_us'] / ort:.2f}x ORT ({ort:.0f} us, {t['ort']['kept']}/{t['ort']['seen']}); "
                     f"all calls {r['all_us'] / t['ort']['all_us']:.2f}x")
    n = min(len(p) for p in plans)
    if any(len(p) != n for p in plans):
        lines.append("layer counts differ: " + ", ".join(str(len(p)) for p in plans))
    for i in range(n):
        tactics = [p[i][2] for p in plans]
        if len(set(tactics)) > 1:
            lines.append(f"layer {i} {plans[0][i][0]} ({plans[0][i][1]}): " + " | ".join(tactics))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.plan_spread", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet_small")
    ap.add_argument("--builds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shared-cache", action="store_true",
                    help="every build on one SRCORE_CACHE_DIR (a machine's builds one after the other: the timing "
                         "cache's winners and evidence carry over); default: a fresh one each")
    ap.add_argument("--work", default=None, help="directory for the builds (default: a new temporary one)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--child", choices=("build", "time"), help=argparse.SUPPRESS)
    ap.add_argument("--dirs", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    _threads_env(args.threads)
    art_of = lambda m: Path(args.out) / "artifacts" / m   # noqa: E731
    if args.child == "build":
        child_build(args.models, art_of(args.models), Path(args.work))
        return 0
    if args.child == "time":
        works = [Path(d) for d in args.dirs.split(",")]
        child_time(args.models, art_of(args.models), works, args.rounds, args.threads, Path(args.work) / "timed.json")
        return 0
    from .prepare import prepare

    base = Path(args.work or tempfile.mkdtemp(prefix="plan_spread-"))
    for model in args.models.split(","):
        prepare(model, Path(args.out))
        works = []
        for b in range(args.builds):
            w = base / model / f"build{b + 1}"
            w.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ, SRCORE_CACHE_DIR=str((base / model if args.shared_cache else w) / "cache"))
            subprocess.run([sys.executable, "-m", "benchmarks.plan_spread", "--child", "build", "--models", model,
                            "--work", str(w), "--threads", str(args.threads), "--out", args.out],
                           check=True, env=env, cwd=ROOT)
            works.append(w)
        tw = base / model
        env = dict(os.environ, SRCORE_CACHE_DIR=str(tw / "cache-time"))
        subprocess.run([sys.executable, "-m", "benchmarks.plan_spread", "--child", "time", "--models", model,
                        "--work", str(tw), "--dirs", ",".join(map(str, works)), "--threads", str(args.threads),
                        "--rounds", str(args.rounds), "--out", args.out], check=True, env=env, cwd=ROOT)
        print(report(model, works, json.loads((tw / "timed.json").read_text())), flush=True)
        print(f"(build logs: {base / model}/build*/build.log)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

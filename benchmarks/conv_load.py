"""The cpu plugin's load time at N threads, two trees in alternating processes:
``python -m benchmarks.conv_load [--models resnet_small,unet_small] [--threads 2] [--rounds 3] [--base DIR]``.

Each round loads every model once per arm, base first, each load in a fresh process with a fresh
``SRCORE_CACHE_DIR`` (``StaticModule`` of the artifacts' ``model.srm`` on the cpu plugin, its warm-up
run included, under ``threadpool_limits(N)``). ``--base DIR``: an older tree (``git archive COMMIT |
tar -x -C DIR``) put first on ``PYTHONPATH`` with its ``plugins/cpu``; without it, this tree only.
Per load: wall and process CPU seconds, the load stages, the seconds the conv timings slept waiting
for OpenBLAS's worker (``parallel.wait_blas_idle``, sleeps over 1 ms) and how many convs chose a
part-pool split (a tactic ``...@N``). The artifacts are ``benchmarks.prepare``'s.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(model: str, threads: int, art: Path) -> dict:
    """One load of ``model`` in this process (see the module doc)."""
    from threadpoolctl import threadpool_limits

    import srcore
    from srcore_cpu.kernels import conv as C
    from srcore_cpu.kernels import parallel as P

    made, slept = [], []
    make, wait = C.make_conv, P.wait_blas_idle

    def counted_make(*a, **kw):
        made.append(make(*a, **kw))
        return made[-1]

    def counted_wait():
        t = time.monotonic()
        wait()
        if time.monotonic() - t > 1e-3:
            slept.append(time.monotonic() - t)
    C.make_conv, P.wait_blas_idle = counted_make, counted_wait
    with threadpool_limits(threads):
        m = srcore.load(str(art / model / "model.srm"))
        w0, c0 = time.perf_counter(), time.process_time()
        sm = srcore.StaticModule(m)
        w1, c1 = time.perf_counter(), time.process_time()
    tactics = [str(getattr(f, "tactic", None)) for f in made]
    return {"model": model, "wall_s": w1 - w0, "cpu_s": c1 - c0, "slept_s": sum(slept), "waits": len(slept),
            "stages": sm.load_stages, "convs": len(made), "split": sum("@" in t for t in tactics)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.conv_load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet_small,unet_small")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", help="an older tree to load first in each round")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "ARTIFACTS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("@@LOAD@@", json.dumps(child(args.child[0], args.threads, Path(args.child[1]))), flush=True)
        return 0
    from .prepare import prepare

    arms = ([("base", args.base)] if args.base else []) + [("new", None)]
    for name in args.models.split(","):
        prepare(name, Path(args.out))
    for r in range(args.rounds):
        for name in args.models.split(","):
            for arm, tree in arms:
                env = dict(os.environ, SRCORE_CACHE_DIR=tempfile.mkdtemp(prefix="srcore_conv_load_"))
                if tree:
                    env["PYTHONPATH"] = os.pathsep.join((tree, str(Path(tree) / "plugins" / "cpu"),
                                                         env.get("PYTHONPATH", "")))
                load = os.getloadavg()[0]
                # run as a file outside both trees: srcore and its cpu plugin come from PYTHONPATH or the install
                p = subprocess.run([sys.executable, __file__, "--threads", str(args.threads),
                                    "--child", name, str(Path(args.out).resolve() / "artifacts")],
                                   env=env, cwd=env["SRCORE_CACHE_DIR"], capture_output=True, text=True, check=True)
                res = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("@@LOAD@@"))[9:])
                print(f"round {r + 1} {arm:4s} {name:14s} load {load:4.1f}   wall {res['wall_s']:5.2f} s   "
                      f"cpu {res['cpu_s']:5.2f} s   slept {res['slept_s']:4.2f} s ({res['waits']} waits)   "
                      f"warm-up {res['stages'].get('warm_up', 0):4.2f} s   split convs {res['split']}/{res['convs']}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

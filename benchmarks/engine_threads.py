"""Where a trt_like engine's time goes at 1 and 2 intra-op threads: per layer, and per thread.

``python -m benchmarks.engine_threads [--models resnet_small,unet_small] [--threads 1,2] [--calls 30]``

Each (model, thread count) runs in a fresh process with the environment of a ``benchmarks.run`` cell
(``OMP/MKL/OPENBLAS_NUM_THREADS=T``: MKL and OpenMP read their counts there) and
``threadpool_limits(T)`` before the engine is built; the child prints the variables and the BLAS
libraries' thread counts it saw. Printed per cell: the load time; the whole call's median and best wall
time; the CPU time per call of every thread of the process, from ``/proc/self/task/*/schedstat`` (the
calling thread, the OpenBLAS team's workers by their Python name, and threads Python does not know:
OpenBLAS's own workers, OpenMP's), so a thread that spins (a busy worker beside an idle-looking call) or
a second core left idle shows; the team's governor counts (regions run on the team, alone, waits); and
per layer its tactic and best time alone (``Engine.profile``, on the inputs the engine really gets:
``StaticModule.benchmark_individual_ops``). Linux only (``/proc``). The build's own tactic log (every
candidate's time on each pool) is ``--log``: the ``srcore.trt_like`` logger at DEBUG. ``--backend cpu``:
the same for the cpu plugin alone (no engine; per node instead of per layer, the 30 slowest).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _cpu_ns() -> dict[int, int]:
    out = {}
    for path in glob.glob("/proc/self/task/*/schedstat"):
        try:
            with open(path) as f:
                out[int(path.split("/")[4])] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):   # a thread that ended meanwhile
            pass
    return out


def _comm(tid: int) -> str:
    """A thread's kernel-side name (``/proc/self/task/TID/comm``; a library may name its threads)."""
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def engine_layers(sm, xs) -> list[tuple[str, float]]:
    """``(layer [tactic], ms alone)`` of every engine of ``sm``, each profiled on the inputs it really
    gets (not the model's: an engine may cover part of it, after an embedding say), by the per-op
    timing of ``srcore bench --per-op``; for a module without engines, its 30 slowest nodes
    (``op [kind backend]``, ms per run, in graph order)."""
    ops = sm.benchmark_individual_ops(xs, warmup=1, runs=3)
    layers = [layer for node in ops.nodes for layer in node.layers]
    if layers:
        return layers
    slow = sorted(ops.nodes, key=lambda t: -t.mean_ms)[:30]

    pns = {(b.index, pn.position): pn for b in sm.blocks for pn in b.nodes}

    def tactic(t) -> str:
        # (the cpu plugin's timed kernels say which way they run: "simd_rows", "simd@2" split on its part pool)
        pn = pns.get((t.block, t.position))
        got = getattr(getattr(getattr(pn, "fn", None), "fn", None), "tactic", None)
        return f" {got}" if got else ""
    return [(f"{t.op} [{t.kind} {t.backend}{tactic(t)}] {t.source or ''}".rstrip(), t.mean_ms)
            for t in sorted(slow, key=lambda t: (t.block, t.position))]


def cell(model: str, threads: int, calls: int, out: Path, backend: str = "trt_like") -> dict:
    """One (model, threads) cell in this process."""
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    from .artifacts import load_inputs
    from .prepare import prepare

    with threadpool_limits(threads):
        import srcore

        # as the engine is built (its MKL tactics then set each call's count themselves)
        blas = sorted({(lib["internal_api"], lib["num_threads"]) for lib in threadpool_info()})

        art = out / "artifacts" / model
        if not (art / "model.srm").exists():     # made once (torch), then read as they are
            prepare(model, out)
        _, xs = load_inputs(art)
        t0 = time.perf_counter()
        backends = ("cpu",) if backend == "cpu" else (backend, "cpu")
        sm = srcore.StaticModule(srcore.load(str(art / "model.srm")), backends=backends)
        rt = sm.runtime()
        load_s = time.perf_counter() - t0
        for _ in range(3):
            rt(*xs)
        from srcore_trt_like.kernels import mkl as trt_mkl, threads as team_threads

        counts0 = dict(team_threads.COUNTS)
        walls = []
        c0, mine0 = _cpu_ns(), time.thread_time_ns()
        for _ in range(calls):
            t = time.perf_counter()
            rt(*xs)
            walls.append(time.perf_counter() - t)
        c1, mine1 = _cpu_ns(), time.thread_time_ns()
        names = {t.native_id: t.name for t in threading.enumerate()}
        me = threading.get_native_id()
        per_thread = {}
        # a running thread's schedstat moves at context switches and ticks only: the caller's own
        # CPU time is read from its thread clock
        c1[me], c0[me] = mine1, mine0
        for tid, ns in c1.items():
            ms = (ns - c0.get(tid, 0)) / calls / 1e6
            if ms >= 0.001:
                label = "caller" if tid == me else names.get(tid, f"native ({_comm(tid)}: OpenBLAS / OpenMP)")
                per_thread[f"{label} [{tid}]"] = round(ms, 3)
        counts = {k: team_threads.COUNTS[k] - counts0[k] for k in counts0}
        layers = engine_layers(sm, xs)
        return {"model": model, "threads": threads, "backend": backend, "load_s": load_s,
                "median_ms": float(np.median(walls)) * 1e3, "best_ms": min(walls) * 1e3,
                "cpu_ms_per_call": per_thread, "governors": counts, "layers": layers,
                "env": {v: os.environ.get(v) for v in THREAD_VARS}, "blas": blas,
                "engine_mkl_threads": trt_mkl.intra_op_threads()}


def show(r: dict) -> None:
    print(f"\n{r['model']} ({r.get('backend', 'trt_like')}) at {r['threads']} thread(s): load {r['load_s']:.1f} s, call median "
          f"{r['median_ms']:.2f} ms (best {r['best_ms']:.2f}); team regions {r['governors']}")
    print("  " + " ".join(f"{v}={r['env'][v]}" for v in THREAD_VARS) + "; BLAS threads "
          + ", ".join(f"{api} {n}" for api, n in r["blas"]) + f"; the engine's MKL tactics "
          f"{r['engine_mkl_threads']}")
    for name, ms in sorted(r["cpu_ms_per_call"].items(), key=lambda p: -p[1]):
        print(f"  CPU {ms:8.2f} ms per call  {name}")
    for label, ms in r["layers"]:
        print(f"  {ms:8.3f} ms  {label}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet_small")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--backend", default="trt_like", help="trt_like (default; the cpu plugin for the rest) or cpu alone")
    p.add_argument("--log", action="store_true", help="the build's tactic log (srcore.trt_like at DEBUG)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--cell", help=argparse.SUPPRESS)          # MODEL:THREADS, in the child process
    a = p.parse_args(argv)
    if a.cell:
        import logging

        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        logging.getLogger("srcore.trt_like").setLevel(logging.DEBUG if a.log else logging.INFO)
        model, threads = a.cell.rsplit(":", 1)
        print("RESULT " + json.dumps(cell(model, int(threads), a.calls, Path(a.out), a.backend)), flush=True)
        return
    from .run import child_env     # here: the child imports no torch it does not need

    for model in a.models.split(","):
        for threads in map(int, a.threads.split(",")):
            cmd = [sys.executable, "-m", "benchmarks.engine_threads", "--cell", f"{model}:{threads}",
                   "--calls", str(a.calls), "--out", a.out, "--backend", a.backend] + (["--log"] if a.log else [])
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                  env=child_env(threads))     # MKL and OpenMP read their counts at load
            lines = proc.stdout.splitlines()
            if a.log:
                sys.stderr.write(proc.stderr)
            res = [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
            if proc.returncode or not res:
                print(f"{model} at {threads} thread(s): failed\n{proc.stderr[-2000:]}", flush=True)
                continue
            show(res[0])


if __name__ == "__main__":
    main()

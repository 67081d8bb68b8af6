"""Throughput with threads: ``python -m benchmarks.threads [--models mlp_wide,resnet_small] [--threads 1,2,4]``.

srcore's ``RuntimePool(sm, size=T)`` (cpu plugin, and the trt_like engine backend) called from
T Python threads, beside one
shared ONNX Runtime session called from T threads; intra-op threads 1 in both
(the parallelism is across calls). Each (model, runner) runs in a fresh process.
Reports calls per second, the speed-up over 1 thread, and how many cores other
processes kept busy during each count (``/proc/stat``): a figure taken while
another process held a core says nothing about scaling.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from .artifacts import load_inputs
from .prepare import prepare
from .run import ROOT, child_env


def make_call(runner: str, art: Path, threads: int):
    """A thread-safe callable for ``threads`` concurrent callers."""
    if runner in ("srcore", "trt_like"):
        import srcore

        backends = ("trt_like", "cpu") if runner == "trt_like" else ("cpu",)
        sm = srcore.StaticModule(srcore.load(str(art / "model.srm")), options=srcore.Options(executor="codegen"),
                                 backends=backends)
        pool = srcore.RuntimePool(sm, size=threads)
        return pool.run
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(art / "model.onnx"), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return lambda *xs: sess.run(None, dict(zip(names, xs)))


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine has been busy (``/proc/stat``), or None where there is none."""
    try:
        with open("/proc/stat") as f:
            v = [int(t) for t in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")   # all but idle and iowait


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


def throughput(call, xs: list, threads: int, seconds: float) -> tuple[float, float | None]:
    """Calls per second of ``threads`` threads calling ``call(*xs)`` for ``seconds`` (after a warm-up),
    and the cores other processes kept busy meanwhile (None without ``/proc/stat``): on a shared
    2-core machine one busy core elsewhere is enough to make 2 threads look like 1."""
    stop = threading.Event()
    counts = [0] * threads
    go = threading.Barrier(threads + 1)

    def worker(i):
        for _ in range(2):
            call(*xs)
        go.wait()
        n = 0
        while not stop.is_set():
            call(*xs)
            n += 1
        counts[i] = n

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    go.wait()
    b0, o0, t0 = _busy_seconds(), _own_seconds(), time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    b1, o1 = _busy_seconds(), _own_seconds()
    others = None if b0 is None or b1 is None else max(0.0, (b1 - b0) - (o1 - o0)) / wall
    return sum(counts) / wall, others


def child(model: str, runner: str, art: Path, thread_counts: list[int], seconds: float) -> dict:
    from threadpoolctl import threadpool_limits

    _, xs = load_inputs(art)
    out: dict = {"others": {}}
    with threadpool_limits(limits=1):
        for t in thread_counts:
            out[str(t)], out["others"][str(t)] = throughput(make_call(runner, art, t), xs, t, seconds)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.threads")
    ap.add_argument("--models", default="mlp_wide,resnet_small")
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--runners", default="srcore,trt_like,ort", help="srcore (cpu plugin), trt_like, ort")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "RUNNER"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out)
    counts = [int(t) for t in args.threads.split(",")]
    if args.child:
        m, r = args.child
        print("@@RESULT@@" + json.dumps(child(m, r, out / "artifacts" / m, counts, args.seconds)))
        return 0
    results: dict = {}
    for m in args.models.split(","):
        prepare(m, out)
        for r in args.runners.split(","):
            cmd = [sys.executable, "-m", "benchmarks.threads", "--child", m, r, "--threads", args.threads,
                   "--seconds", str(args.seconds), "--out", str(out)]
            p = subprocess.run(cmd, env=child_env(1), capture_output=True, text=True, cwd=ROOT)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@RESULT@@")), None)
            results.setdefault(m, {})[r] = (json.loads(line[10:]) if line
                                            else {"error": p.stderr.strip()[-800:]})
    print(f"{'model':<16}{'runner':<10}" + "".join(f"{t:>4} thr calls/s" for t in counts)
          + "   speed-up   other processes' busy cores per count")
    for m, rs in results.items():
        for r, v in rs.items():
            if "error" in v:
                print(f"{m:<16}{r:<10}error: {v['error'].splitlines()[-1] if v['error'] else ''}")
                continue
            cps = [v[str(t)] for t in counts]
            ups = " ".join(f"{c / cps[0]:.2f}x" for c in cps[1:])
            oth = v.get("others", {})
            busy = " ".join("?" if oth.get(str(t)) is None else f"{oth[str(t)]:.2f}" for t in counts)
            print(f"{m:<16}{r:<10}" + "".join(f"{c:>16.1f}" for c in cps) + f"   {ups}   {busy}")
    (out / "threads.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Throughput with threads: ``python -m benchmarks.threads [--models mlp_wide,resnet_small] [--threads 1,2,4]``.

srcore's ``RuntimePool(sm, size=T)`` called from T Python threads, beside one
shared ONNX Runtime session called from T threads; intra-op threads 1 in both
(the parallelism is across calls). Each (model, runner) runs in a fresh process.
Reports calls per second and the speed-up over 1 thread.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from .prepare import prepare
from .run import ROOT, child_env


def make_call(runner: str, art: Path, threads: int):
    """A thread-safe callable for ``threads`` concurrent callers."""
    if runner == "srcore":
        import srcore

        sm = srcore.StaticModule(srcore.load(str(art / "model.srm")), options=srcore.Options(executor="codegen"))
        pool = srcore.RuntimePool(sm, size=threads)
        return pool.run
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(art / "model.onnx"), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return lambda x: sess.run(None, {name: x})


def throughput(call, x, threads: int, seconds: float) -> float:
    """Calls per second of ``threads`` threads calling ``call(x)`` for ``seconds`` (after a warm-up)."""
    stop = threading.Event()
    counts = [0] * threads
    go = threading.Barrier(threads + 1)

    def worker(i):
        for _ in range(2):
            call(x)
        go.wait()
        n = 0
        while not stop.is_set():
            call(x)
            n += 1
        counts[i] = n

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def child(model: str, runner: str, art: Path, thread_counts: list[int], seconds: float) -> dict:
    import numpy as np
    from threadpoolctl import threadpool_limits

    x = np.load(art / "input.npy")
    out = {}
    with threadpool_limits(limits=1):
        for t in thread_counts:
            out[str(t)] = throughput(make_call(runner, art, t), x, t, seconds)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.threads")
    ap.add_argument("--models", default="mlp_wide,resnet_small")
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--seconds", type=float, default=3.0)
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
        for r in ("srcore", "ort"):
            cmd = [sys.executable, "-m", "benchmarks.threads", "--child", m, r, "--threads", args.threads,
                   "--seconds", str(args.seconds), "--out", str(out)]
            p = subprocess.run(cmd, env=child_env(1), capture_output=True, text=True, cwd=ROOT)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@RESULT@@")), None)
            results.setdefault(m, {})[r] = (json.loads(line[10:]) if line
                                            else {"error": p.stderr.strip()[-800:]})
    print(f"{'model':<16}{'runner':<8}" + "".join(f"{t:>4} thr calls/s" for t in counts) + "   speed-up")
    for m, rs in results.items():
        for r, v in rs.items():
            if "error" in v:
                print(f"{m:<16}{r:<8}error: {v['error'].splitlines()[-1] if v['error'] else ''}")
                continue
            cps = [v[str(t)] for t in counts]
            ups = " ".join(f"{c / cps[0]:.2f}x" for c in cps[1:])
            print(f"{m:<16}{r:<8}" + "".join(f"{c:>16.1f}" for c in cps) + f"   {ups}")
    (out / "threads.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

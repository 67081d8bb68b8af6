"""Where a trt_like process's memory goes: ``python -m benchmarks.trt_like_memory [--models resnet_small]
[--threads 1] [--pool 4]``.

Each case runs in a fresh process and reports the resident set (``VmRSS``) and its peak
(``VmHWM``) after every stage: numpy + srcore imported, the model file read, numba and the
kernels imported, the engines built (from scratch with a warm timing cache, or restored from
a serialized engine: ``srcore build``), the first call, 20 calls, and ``--pool N`` runtimes
called from N threads. ONNX Runtime (a session and 20 calls) is measured the same way for the
ratio. Artifacts come from ``benchmarks.prepare`` (made once under ``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0]) // 1024   # MiB
    return out


def child(case: str, art: Path, pool: int) -> dict:
    """One case in this (fresh) process: ``{stage: {VmRSS, VmHWM, RssAnon, RssFile}}`` in MiB."""
    stages = {}

    def mark(stage):
        stages[stage] = _status()

    from .artifacts import load_inputs
    names, xs = load_inputs(art)
    if case == "ort":
        import onnxruntime as ort
        mark("import")
        so = ort.SessionOptions()
        so.intra_op_num_threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
        sess = ort.InferenceSession(str(art / "model.onnx"), so, providers=["CPUExecutionProvider"])
        feed = dict(zip((i.name for i in sess.get_inputs()), xs))
        mark("session")
        for _ in range(20):
            sess.run(None, feed)
        mark("20 calls")
        return stages
    import srcore
    mark("import")
    path = art / ("model.engine.srm" if case == "serialized" else "model.srm")
    model = srcore.load(path)
    mark("read model")
    from srcore_trt_like import engine  # noqa: F401  (numba, the kernels' modules)
    mark("import numba")
    sm = srcore.StaticModule(model, backends=("trt_like", "cpu"))
    mark("engines " + ("restored" if case == "serialized" else "built"))
    sm(*xs)
    mark("first call")
    for _ in range(20):
        sm(*xs)
    mark("20 calls")
    if pool > 1:
        from concurrent.futures import ThreadPoolExecutor
        p = srcore.RuntimePool(sm, size=pool)
        with ThreadPoolExecutor(pool) as ex:
            list(ex.map(lambda _: p.run(*xs), range(20 * pool)))
        mark(f"pool of {pool}")
    return stages


def run(models, threads: int, pool: int, out: Path) -> list[dict]:
    from .prepare import prepare

    rows = []
    for model in models:
        prepare(model, out)
        art = out / "artifacts" / model
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
        # the serialized engine (and a warm timing cache and kernel cache for the built case)
        subprocess.run([sys.executable, "-m", "srcore", "build", str(art / "model.srm"), "-o",
                        str(art / "model.engine.srm"), "--backend", "trt_like,cpu"], env=env, check=True,
                       capture_output=True)
        for case in ("built", "serialized", "ort"):
            p = subprocess.run([sys.executable, "-m", "benchmarks.trt_like_memory", "--child", case, str(art),
                                str(pool)], env=env, capture_output=True, text=True, cwd=ROOT)
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
            if not line:
                rows.append({"model": model, "case": case, "error": p.stderr[-2000:]})
                continue
            rows.append({"model": model, "case": case, "threads": threads, "stages": json.loads(line[0][2:])})
    return rows


def format_rows(rows: list[dict]) -> str:
    out = []
    for r in rows:
        if "error" in r:
            out.append(f"{r['model']} {r['case']}: error: {r['error']}")
            continue
        out.append(f"{r['model']} {r['case']} ({r['threads']} thread(s)), MiB: rss / peak (anon + file)")
        for stage, s in r["stages"].items():
            out.append(f"  {stage:22s} {s['VmRSS']:5d} / {s['VmHWM']:5d}   ({s['RssAnon']} + {s['RssFile']})")
    peaks = {(r["model"], r["case"]): max(s["VmHWM"] for s in r["stages"].values()) for r in rows if "stages" in r}
    for model in dict.fromkeys(r["model"] for r in rows):
        ort = peaks.get((model, "ort"))
        if ort:
            out.append(f"{model}: peak / ORT's: built {peaks.get((model, 'built'), 0) / ort:.2f}x, "
                       f"serialized {peaks.get((model, 'serialized'), 0) / ort:.2f}x (ORT {ort} MiB)")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=3, metavar=("CASE", "ARTIFACTS", "POOL"), help=argparse.SUPPRESS)
    ap.add_argument("--models", default="resnet_small")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pool", type=int, default=4, help="runtimes (and threads) of the pool stage")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    if args.child:
        case, art, pool = args.child
        print("@@" + json.dumps(child(case, Path(art), int(pool))))
        return 0
    rows = run(args.models.split(","), args.threads, args.pool, args.out)
    print(format_rows(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

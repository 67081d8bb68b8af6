"""What torch's NaN semantics cost srcore's openvino engine on one model: the engine built with each
NaN check on or off, beside OpenVINO run directly on the model's ONNX file, interleaved in one process:

    .venv/bin/python -m benchmarks.openvino_nan_cost MODEL [--threads 1] [--rounds 15] [--wall]

Variants of srcore's engine (``backends=("openvino", "cpu")``; every other converter as shipped):

* ``default``: as shipped (``nan_checks=True``): inputs all finite and within the bound
  ``srcore_openvino.finite`` proves run the model without the checks, which then cannot fire;
* ``checked``: the model with every check, as for any other input (the bound left unproven);
* ``pool_unchecked``: no NaN check on max pools (OpenVINO's MaxPool skips NaNs);
* ``relu_plain``: relus fused into a convolution or fully connected layer are OpenVINO's Relu
  (NaN becomes 0) instead of ``Elu(alpha=0)``;
* ``unchecked``: ``nan_checks=False`` (all of the above and every other check off).

Only ``default`` and ``checked`` give torch's answers on every input; the others show where the
time goes. Each call is timed in the process's CPU time (``--wall``: wall time; at 2 threads CPU
time sums both). Ratios are medians of per-round ratios to ``ov_onnx`` (OpenVINO on the ONNX file). Artifacts come
from ``benchmarks.prepare``; runs in a child process with ``benchmarks.run``'s thread environment.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("default", "checked", "pool_unchecked", "relu_plain", "unchecked")


@contextlib.contextmanager
def variant(name: str):
    """Patch the converters for ``name`` while its engine is built (converters run at build time)."""
    from srcore_openvino import finite
    from srcore_openvino.convert import attention, conv, matrix, pointwise

    saved = []

    def patch(mod, attr, value):
        saved.append((mod, attr, getattr(mod, attr)))
        setattr(mod, attr, value)

    if name in ("checked", "pool_unchecked", "relu_plain"):   # each its checked model, as the names say
        patch(finite, "input_bound", lambda model: None)
    if name == "pool_unchecked":
        patch(conv, "nan_checks", lambda: False)
    elif name == "relu_plain":
        shipped = pointwise.relu

        def relu(o, x, after=None):
            return o.relu(x).output(0) if after is not None else shipped(o, x, after)
        for mod in (conv, matrix, attention):
            patch(mod, "relu", relu)
    try:
        yield
    finally:
        for mod, attr, value in reversed(saved):
            setattr(mod, attr, value)


def measure(model: str, threads: int, art: Path, rounds: int, round_s: float, wall: bool) -> dict:
    from threadpoolctl import threadpool_limits

    from .artifacts import flatten_outputs, load_inputs, load_refs, max_rel_err
    from .cell import load_runner, preimport

    names, xs = load_inputs(art)
    refs = load_refs(art)
    limits = threadpool_limits(limits=threads)
    preimport("openvino")
    calls, res = {}, {"model": model, "threads": threads, "clock": "wall" if wall else "cpu", "runners": {}}
    for name in ("ov_onnx", *VARIANTS):
        runner = "openvino_nan_unchecked" if name == "unchecked" else "openvino" if name in VARIANTS else name
        with variant(name if name in VARIANTS else ""):
            f = load_runner(model, runner, threads, art, xs, names, {})
        res["runners"][name] = {"max_rel_err": max_rel_err(flatten_outputs(f()), refs)}
        calls[name] = f
    for f in calls.values():   # warm-up
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.2:
            f()
    order = list(calls)
    n = {}
    for r in order:
        t0 = time.perf_counter()
        calls[r]()
        n[r] = max(1, min(500, int(round_s / max(time.perf_counter() - t0, 1e-7))))
    clock = time.perf_counter_ns if wall else time.process_time_ns
    times: dict[str, list[float]] = {r: [] for r in order}
    for k in range(rounds):
        for r in order[k % len(order):] + order[:k % len(order)]:
            per = []
            for _ in range(n[r]):
                t0 = clock()
                calls[r]()
                per.append(clock() - t0)
            times[r].append(float(np.median(per)) * 1e-3)
    del limits
    base = np.array(times["ov_onnx"])
    for r in order:
        t = np.array(times[r])
        res["runners"][r].update(median_us=float(np.median(t)), best_round_us=float(t.min()),
                                 vs_ov_onnx=float(np.median(t / base)))
    return res


def markdown(res: dict) -> str:
    lines = ["| srcore openvino variant | call (median of rounds) | ÷ OpenVINO (ONNX), per-round median | "
             "max rel. error vs torch |", "|---|---|---|---|"]
    for r, c in res["runners"].items():
        label = "OpenVINO on the ONNX file" if r == "ov_onnx" else r
        lines.append(f"| {label} | {c['median_us'] / 1e3:.2f} ms | {c['vs_ov_onnx']:.3f}x | {c['max_rel_err']:.1e} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.openvino_nan_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--round-seconds", type=float, default=0.1)
    ap.add_argument("--wall", action="store_true", help="time calls in wall time instead of the process's CPU time")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    out = Path(args.out)
    if args.child:
        res = measure(args.model, args.threads, out / "artifacts" / args.model, args.rounds, args.round_seconds,
                      args.wall)
        print("@@RESULT@@" + json.dumps(res))
        return 0
    from .models import ALL_MODELS
    from .prepare import prepare
    from .run import child_env

    if args.model not in ALL_MODELS:
        ap.error(f"unknown model {args.model!r}; known: {', '.join(ALL_MODELS)}")
    prepare(args.model, out)
    cmd = [sys.executable, "-m", "benchmarks.openvino_nan_cost", args.model, "--child", "--threads", str(args.threads),
           "--rounds", str(args.rounds), "--round-seconds", str(args.round_seconds), "--out", str(out)]
    if args.wall:
        cmd.append("--wall")
    p = subprocess.run(cmd, env=child_env(args.threads), capture_output=True, text=True, cwd=ROOT)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@RESULT@@")), None)
    if line is None:
        raise SystemExit(f"no result (exit {p.returncode}): {p.stderr[-2000:]}")
    print(markdown(json.loads(line[len("@@RESULT@@"):])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

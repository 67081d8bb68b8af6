"""Per-node overhead of each executor: a chain of cheap elementwise ops vs the numpy ``out=`` floor.

The graph is ``n`` ops on a 1x128 float32 tensor, cycling through
``y = y + x``, ``y = y * 0.999``, ``y = y - x``. The floor is the same numpy calls
written straight-line with ``out=`` into one preallocated buffer: what a
perfect Python code generator would emit. Everything is measured in one
process, interleaved round by round, and reported as best-round medians.

    python -m benchmarks.overhead [--ops 1000] [--rounds 15]
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

import numpy as np

OPS = ("add", "mul", "sub")


def build_graph(n: int):
    from srcore.ir.builder import GraphBuilder
    from srcore.ir.types import TensorType

    b = GraphBuilder()
    x = b.input("x", TensorType("float32", (1, 128)))
    y = x
    for i in range(n):
        op = OPS[i % 3]
        if op == "add":
            y = b.op("aten::add", y, x, 1)
        elif op == "mul":
            y = b.op("aten::mul", y, 0.999)
        else:
            y = b.op("aten::sub", y, x, 1)
    b.output(y)
    return b.graph


def make_floor(n: int):
    """A generated straight-line numpy function: the floor for Python + numpy."""
    lines = ["def floor(x, y=_buf):", "    _copyto(y, x)"]
    for i in range(n):
        op = OPS[i % 3]
        if op == "add":
            lines.append("    _add(y, x, out=y)")
        elif op == "mul":
            lines.append("    _mul(y, _c, out=y)")
        else:
            lines.append("    _sub(y, x, out=y)")
    lines.append("    return y")
    env = {"_buf": np.empty((1, 128), np.float32), "_copyto": np.copyto, "_add": np.add,
           "_mul": np.multiply, "_sub": np.subtract, "_c": np.float32(0.999)}
    exec(compile("\n".join(lines) + "\n", "<floor>", "exec"), env)
    return env["floor"]


def reference(x: np.ndarray, n: int) -> np.ndarray:
    y = x.copy()
    for i in range(n):
        op = OPS[i % 3]
        y = y + x if op == "add" else (y * np.float32(0.999) if op == "mul" else y - x)
    return y


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=200, help="calls per round")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass
    import srcore
    from srcore.model import Model

    g = build_graph(args.ops)
    x = np.random.default_rng(0).standard_normal((1, 128)).astype(np.float32)
    runners = {"numpy out= (floor)": make_floor(args.ops)}
    for ex in ("codegen", "interpreter"):
        sm = srcore.StaticModule(Model.from_graph(g), options=srcore.Options(executor=ex, optimize=False))
        runners[f"srcore {ex}"] = sm.runtime()
    ref = reference(x, args.ops)
    for name, fn in runners.items():
        np.testing.assert_allclose(fn(x), ref, rtol=1e-4, atol=1e-5, err_msg=name)
        for _ in range(20):
            fn(x)
    per_round = {name: [] for name in runners}
    gc.disable()
    try:
        for _ in range(args.rounds):
            for name, fn in runners.items():   # interleaved: every runner sees the same machine phase
                ts = []
                for _ in range(args.calls):
                    t0 = time.perf_counter_ns()
                    fn(x)
                    ts.append(time.perf_counter_ns() - t0)
                per_round[name].append(statistics.median(ts))
    finally:
        gc.enable()
    best = {name: min(v) / 1e3 for name, v in per_round.items()}
    floor = best["numpy out= (floor)"]
    print(f"chain of {args.ops} elementwise ops on 1x128 float32, best-round median per call:")
    result = {}
    for name, us in best.items():
        per_node_ns = 1e3 * us / args.ops
        print(f"  {name:22s} {us:9.1f} us  {per_node_ns:6.0f} ns/node  {us / floor:5.2f}x floor")
        result[name] = {"us": us, "ns_per_node": per_node_ns, "ratio_to_floor": us / floor}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ops": args.ops, "results": result}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""ONNX Runtime's own per-layer profile of a benchmark model, to set beside srcore's
(``srcore bench MODEL.srm --per-op``): ``python -m benchmarks.ort_profile MODEL [--runs 60] [--threads 1]``.

Runs ``benchmarks/results/artifacts/MODEL/model.onnx`` (made by ``benchmarks.prepare``) on its
stored inputs with one intra-op thread (``--threads``) and ORT's profiler on, then prints the kernel time per run
by op type and the slowest nodes. ORT's graph transformers have rewritten the graph by then (on
x86 the NCHWc layout: ``ReorderInput``/``ReorderOutput`` nodes, convs with fused activations), so
node names are ORT's, not the ONNX file's.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def profile(model: str, runs: int, out: Path, threads: int = 1) -> tuple[dict[str, float], dict[str, int], dict[str, float]]:
    """(µs per run by op type, nodes per op type, µs per run by node)."""
    import onnxruntime as ort

    from .artifacts import load_inputs
    from .cell import _feed

    art = out / "artifacts" / model
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.enable_profiling = True
    so.profile_file_prefix = str(out / f"ort_profile_{model}")
    sess = ort.InferenceSession(str(art / "model.onnx"), so, providers=["CPUExecutionProvider"])
    names, xs = load_inputs(art)
    feeds = _feed([i.name for i in sess.get_inputs()], names, xs)     # as benchmarks.cell's ort runner
    for _ in range(runs):
        sess.run(None, feeds)
    path = sess.end_profiling()
    try:
        events = [e for e in json.loads(Path(path).read_text())
                  if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    finally:
        os.remove(path)
    by_op: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter = collections.Counter()
    by_node: dict[str, float] = collections.defaultdict(float)
    for e in events:
        by_op[e["args"]["op_name"]] += e["dur"] / runs
        count[e["args"]["op_name"]] += 1
        by_node[e["name"][:-len("_kernel_time")]] += e["dur"] / runs
    return dict(by_op), {k: v // runs for k, v in count.items()}, dict(by_node)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--threads", type=int, default=1, help="ORT's intra-op threads")
    ap.add_argument("--priority", type=int, default=None, metavar="NICE",
                    help="run in an autogroup of its own at this nice (2 threads on a shared machine: a plain "
                         "nice does not reach across the scheduler's autogroups)")
    a = ap.parse_args(argv)
    if a.priority is not None:
        import sys

        from .clean_calls import raise_priority

        rc = raise_priority("benchmarks.ort_profile", list(sys.argv[1:] if argv is None else argv), a.priority)
        if rc is not None:
            raise SystemExit(rc)
    by_op, count, by_node = profile(a.model, a.runs, a.out, a.threads)
    print(f"{a.model}: ONNX Runtime, {a.threads} thread(s), {sum(by_op.values()):.0f} us of kernels per run")
    for op, us in sorted(by_op.items(), key=lambda kv: -kv[1]):
        print(f"  {op:<28} {us:8.0f} us  x{count[op]}")
    print("slowest nodes:")
    for node, us in sorted(by_node.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"  {node[:60]:<60} {us:7.0f} us")


if __name__ == "__main__":
    main()

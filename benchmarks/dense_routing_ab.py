"""A routed mixture-of-experts layer in its two forms side by side in one process, rounds alternating:
``python -m benchmarks.dense_routing_ab [--sizes 64x32x64x4x2,...] [--backend trt_like|cpu] [--rounds 5]``.

Each size is tokens x width x hidden x experts x top-k of ``tests/test_passes_dense_routing.py``'s
``TopKWhere`` (softmax router, ``topk``, ``where`` + gather + GELU MLP + ``index_add`` per expert),
loaded three times: with ``srcore.passes.dense_routing`` off (``max_macs=0``: the routed form), with no
bound (the dense form), and as a load chooses (``auto``: by the count far from the break-even, else by
timing both forms at load, with a fresh routing cache: its CPU seconds are printed), and exported to ONNX
Runtime (1 thread, all optimizations). Outputs are checked against torch, then each is timed in process
CPU time (1 thread), best-round medians; the line gives the dense form's multiply-adds an expert
(the layer's: times the experts), dense ÷ routed, auto's form and auto ÷ the faster of the two, and each
load's CPU seconds (auto's includes its timing of both forms).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from .families_ab import interleaved_best

ROOT = Path(__file__).resolve().parent.parent


def _calls(tokens: int, d: int, h: int, n: int, k: int, backend: str) -> dict:
    import numpy as np
    import onnxruntime as ort
    import torch

    import srcore.passes.dense_routing as dr

    sys.path.insert(0, str(ROOT / "tests"))
    from test_passes_dense_routing import TopKWhere, _load, _mlp

    torch.manual_seed(0)
    m = TopKWhere(d=d, n=n, k=k).eval()
    m.experts = torch.nn.ModuleList([_mlp(d, h) for _ in range(n)]).eval()
    x = torch.randn(1, tokens, d)
    with torch.no_grad():
        want = m(x)[0].numpy()
    xs = x.numpy()
    backends = ("trt_like", "cpu") if backend == "trt_like" else ("cpu",)
    calls = {}
    saved = dr.dense_routing.__kwdefaults__["max_macs"]
    try:
        for name, bound in (("routed", 0), ("dense", 1 << 62)):
            dr.dense_routing.__kwdefaults__["max_macs"] = bound
            t0 = time.process_time()
            sm = _load(m, (x,), backends)
            calls[f"{name}_load_s"] = time.process_time() - t0
            np.testing.assert_allclose(sm(xs)[0], want, rtol=1e-4, atol=1e-5)
            calls[name] = lambda sm=sm: sm(xs)
    finally:
        dr.dense_routing.__kwdefaults__["max_macs"] = saved

    import srcore.runtime.routing_choice as rc

    tag = rc.machine_tag   # a fresh routing cache (the other caches as the two loads above had them)
    rc.machine_tag = lambda: f"bench-{os.getpid()}-{tokens}x{d}x{h}x{n}x{k}"
    try:
        t0 = time.process_time()
        sm = _load(m, (x,), backends)
        calls["auto_load_s"] = time.process_time() - t0
        cache = rc._Cache.get()
        graphs = [sm.graph] + [n.attrs["subgraph"] for n in sm.graph.all_nodes() if "subgraph" in n.attrs]
        routed = any(n.kind.startswith("aten::index_add") for g in graphs for n in g.all_nodes())
        calls["auto_form"] = ("routed" if routed else "dense") + (" (timed)" if cache.evidence else " (by count)")
        cache.path.unlink(missing_ok=True)
    finally:
        rc.machine_tag = tag
    np.testing.assert_allclose(sm(xs)[0], want, rtol=1e-4, atol=1e-5)
    calls["auto"] = lambda sm=sm: sm(xs)
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "m.onnx")
        with torch.no_grad():
            torch.onnx.export(m, (x,), f, dynamo=False, opset_version=17)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(f, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: xs}
    calls["ort"] = lambda: sess.run(None, feed)
    return calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dense_routing_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="12x8x16x4x2,64x32x64x4x2,64x64x64x4x2,64x64x64x8x1,128x64x128x4x2")
    ap.add_argument("--backend", default="trt_like", choices=("trt_like", "cpu"))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    with threadpool_limits(1):
        for size in args.sizes.split(","):
            tokens, d, h, n, k = (int(v) for v in size.split("x"))
            calls = _calls(tokens, d, h, n, k, args.backend)
            load = {k: calls.pop(f"{k}_load_s") for k in ("routed", "dense", "auto")}
            form = calls.pop("auto_form")
            best = interleaved_best(calls, args.rounds, cpu_time=True)
            print(f"{size:18s} dense MACs/expert {tokens * 2 * d * h:9d}  "
                  + "  ".join(f"{r} {v:8.1f} µs" for r, v in best.items())
                  + f"  dense÷routed {best['dense'] / best['routed']:.2f}x"
                  + f"  auto: {form} ÷best {best['auto'] / min(best['dense'], best['routed']):.2f}x"
                  + f" (load s: routed {load['routed']:.1f} dense {load['dense']:.1f} auto {load['auto']:.1f})"
                  + f"  auto÷ort {best['auto'] / best['ort']:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

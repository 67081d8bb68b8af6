"""trt_like's per-layer profile beside ONNX Runtime's per-node profile of the same model, in one
process, interleaved, one thread: ``python -m benchmarks.layer_profile MODEL [--rounds 12]
[--factory pkg.module:NAME] [--path script]``.

Each round runs ORT (profiler on) ``--calls`` times, then times every layer of trt_like's engine
on its own as many times (``Plan.profile``); a layer's or node's figure is its minimum over all
its samples (the least disturbed on a shared machine; per-node means moved 3x with the load), the
same number of samples on both sides. Both lists are printed
in execution order with their sums; ORT's nodes are its own after its graph transformers (NCHWc
convs with fused activations, ``ReorderInput``/``ReorderOutput``), so layers are matched by hand.
Artifacts come from ``benchmarks.prepare`` (made if missing); with ``--factory`` (as
``benchmarks.heldout_ab`` has: ``NAME`` maps a model name to a callable giving ``(module, example
inputs)``, e.g. ``heldout6_models:MODELS``) the model is built by its factory instead, converted
through ``--path`` (tests/parity/heldout_paths.py) and exported to ONNX as heldout_ab does. Build the engine with a fresh
``SRCORE_CACHE_DIR`` after kernel changes: the timing cache keeps winners timed on older kernels.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _from_artifacts(model: str, out: Path):
    """(ONNX file, srcore model, input arrays, ORT feed builder) from ``benchmarks.prepare``."""
    import srcore

    from .artifacts import load_inputs
    from .cell import _feed
    from .prepare import prepare

    prepare(model, out)
    art = out / "artifacts" / model
    names, xs = load_inputs(art)
    return art / "model.onnx", srcore.load(str(art / "model.srm")), xs, lambda sess: _feed(
        [i.name for i in sess.get_inputs()], names, xs)


def _from_factory(model: str, factory: str, path: str, tmp: Path):
    """The same four from a factory table: the module converted through ``path``, exported to ONNX
    by heldout_ab's exporter (ORT's inputs in order, as heldout_ab feeds them)."""
    from .heldout_ab import _export_onnx, _factories

    factories = _factories(factory)   # (puts tests/parity on sys.path for the two imports below)
    from heldout_paths import convert

    from _harness import to_numpy

    if model not in factories:
        raise SystemExit(f"{model}: not in {factory} (has {', '.join(sorted(factories))})")
    module, inputs = factories[model]()
    xs = to_numpy(inputs)
    f = tmp / f"{model}.onnx"
    _export_onnx(module, inputs, str(f))
    return f, convert(module, inputs, path), xs, lambda sess: {
        i.name: x for i, x in zip(sess.get_inputs(), xs)}


def profile(model: str, out: Path, rounds: int, calls: int, factory: str | None = None, path: str = "script"):
    """(trt_like ``[(layer, µs)]``, ORT ``[(node, op type, µs)]``), minima over the rounds."""
    import tempfile

    import onnxruntime as ort

    import srcore

    with tempfile.TemporaryDirectory() as tmp:
        if factory is None:
            onnx_file, graph, xs, feed = _from_artifacts(model, out)
        else:
            onnx_file, graph, xs, feed = _from_factory(model, factory, path, Path(tmp))
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.enable_profiling = True
        so.profile_file_prefix = str(out / f"layer_profile_{model}")
        sess = ort.InferenceSession(str(onnx_file), so, providers=["CPUExecutionProvider"])
    feeds = feed(sess)
    sm = srcore.StaticModule(graph, options=srcore.Options(backends=("trt_like", "cpu")))
    sm(*xs)
    engines = [pn.fn.fn for b in sm.blocks for pn in b.nodes if pn.fn is not None and hasattr(pn.fn.fn, "profile")]
    # only the engines that take the model's inputs (crnn's LSTM on the cpu plugin splits it in two:
    # the second engine's inputs are made inside the model)
    shapes = tuple(tuple(x.shape) for x in xs)
    engines = [e for e in engines if shapes in getattr(getattr(e.profile, "__self__", None), "plans", {shapes: 0})]
    if not engines:
        raise SystemExit(f"{model}: no trt_like engine in the module")
    best: dict[tuple[int, int], tuple[str, float]] = {}
    for _ in range(rounds):
        for _ in range(calls):
            sess.run(None, feeds)
        for e, eng in enumerate(engines):
            # an engine's inputs are the model's when it is the whole model (the usual case here)
            for i, (label, sec) in enumerate(eng.profile(*xs, rounds=calls)):
                old = best.get((e, i))
                best[(e, i)] = (label, min(sec, old[1]) if old else sec)
    path = sess.end_profiling()
    try:
        events = [ev for ev in json.loads(Path(path).read_text())
                  if ev.get("cat") == "Node" and ev["name"].endswith("_kernel_time")]
    finally:
        os.remove(path)
    nodes: dict[str, list] = collections.OrderedDict()
    for ev in events:
        name = ev["name"][:-len("_kernel_time")]
        cur = nodes.setdefault(name, [ev["args"]["op_name"], float("inf")])
        cur[1] = min(cur[1], float(ev["dur"]))
    return ([(label, sec * 1e6) for _, (label, sec) in sorted(best.items())],
            [(name, op, us) for name, (op, us) in nodes.items()])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--calls", type=int, default=10, help="ORT runs per round")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--factory", default=None,
                    help="pkg.module:NAME, a table of model factories (e.g. heldout6_models:MODELS) instead of artifacts")
    ap.add_argument("--path", default="script", help="import path of a factory's model (tests/parity/heldout_paths.py)")
    a = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    # srcore's intra-op thread count follows the process's OpenMP / BLAS limits: without this the
    # engine was built and profiled at the machine's thread count beside a 1-thread ORT
    with threadpool_limits(1):
        layers, nodes = profile(a.model, a.out, a.rounds, a.calls, a.factory, a.path)
    print(f"{a.model}: trt_like, 1 thread, sum of per-layer minima {sum(us for _, us in layers):.0f} us")
    for label, us in layers:
        print(f"  {us:7.1f}  {label}")
    print(f"{a.model}: ONNX Runtime, 1 thread, sum of per-node minima {sum(us for *_, us in nodes):.0f} us")
    for name, op, us in nodes:
        print(f"  {us:7.1f}  {name[:70]:<70} {op}")


if __name__ == "__main__":
    main()

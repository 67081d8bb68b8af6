"""Models built by a factory (default: the held-out zoo, tests/parity/heldout_models.py) timed side by
side in one process, rounds alternating: ``python -m benchmarks.heldout_ab [--models a,b]
[--factory pkg.module:NAME] [--path script] [--rounds 9] [--cpu-time]``.

No artifacts: each model is built by its factory (``NAME`` maps a model name to a callable giving
``(module, example inputs)``), converted through ``--path``
(an import path of tests/parity/heldout_paths.py) and loaded by every runner: torch eager, ONNX
Runtime (the model exported by torch.onnx's TorchScript exporter, all graph optimizations, sequential;
a model that exporter refuses is timed without ORT, the reason printed on its line),
srcore cpu (codegen, standard_resizing) and srcore trt_like + cpu. Every runner's output is checked
against eager before it is timed; each prints its best-round median and its ratio to eager and
to ORT. 1 intra-op thread; ``--cpu-time`` times calls in process CPU time (a loaded machine).
A srcore runner takes ``benchmarks.families_ab``'s suffixes (``srcore_cpu+nolate``: loaded with
``SRCORE_CPU_LATE_COMPILED=0``), an A/B in one process.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

from .families_ab import _suffix_env, interleaved_best, peer_ratios

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ("eager", "ort", "srcore_cpu", "trt_like")


def _factories(spec: str) -> dict:
    sys.path[:0] = [str(ROOT / "tests" / "parity"), str(ROOT)]
    module, _, name = spec.partition(":")
    table = getattr(importlib.import_module(module), name)
    return dict(table)


def _runners(module, inputs, path: str, names, skipped: dict | None = None) -> dict:
    import numpy as np
    import torch

    import srcore
    from heldout_paths import convert

    from _harness import to_numpy   # bfloat16 inputs as ml_dtypes' bfloat16

    xs = to_numpy(inputs)
    calls = {}
    for r in names:
        if r == "eager":
            def eager():
                with torch.inference_mode():
                    return module(*inputs)
            calls[r] = eager
        elif r == "ort":
            import onnxruntime as ort

            with tempfile.TemporaryDirectory() as d:
                f = os.path.join(d, "m.onnx")
                try:
                    _export_onnx(module, inputs, f)
                except Exception as exc:  # noqa: BLE001 - the peer cannot take this model: no ORT column for it
                    if skipped is not None:
                        skipped[r] = f"torch.onnx cannot export it: {type(exc).__name__}: {_first_line(exc)}"
                    continue
                so = ort.SessionOptions()
                so.intra_op_num_threads = so.inter_op_num_threads = 1
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                sess = ort.InferenceSession(f, so, providers=["CPUExecutionProvider"])
            feed = {i.name: x for i, x in zip(sess.get_inputs(), xs)}
            calls[r] = lambda sess=sess, feed=feed: sess.run(None, feed)
        else:
            base, env = _suffix_env(r)
            backends = ("cpu",) if base == "srcore_cpu" else ("trt_like", "cpu")
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                sm = srcore.StaticModule(convert(module, inputs, path), options=srcore.Options(backends=backends))
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            calls[r] = lambda sm=sm: sm(*xs)
    want = _flat(calls["eager"]()) if "eager" in calls else None
    for r, fn in calls.items():
        if want is not None:
            got = _flat(fn())
            err = max(float(np.max(np.abs(np.asarray(g, np.float64) - w))) / (float(np.max(np.abs(w))) or 1.0)
                      for g, w in zip(got, want))
            if not err <= _tolerance(inputs):
                raise AssertionError(f"{r}: wrong output (max relative error {err:.2e})")
    return calls


def _first_line(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text if len(text) <= limit else text[:limit] + "..."


def _tolerance(inputs) -> float:
    """1e-3; a few units in the last place of a half model's dtype (the zoo's HALF_RTOL): bfloat16's is
    2**-8, and a batch norm folded into its conv at load rounds once where eager rounds twice."""
    names = {str(getattr(x, "dtype", "")) for x in inputs}
    return 3e-2 if "torch.bfloat16" in names else 4e-3 if "torch.float16" in names else 1e-3


def _export_onnx(module, inputs, f: str) -> None:
    """torch.onnx's TorchScript exporter; without autograd, ``nn.MultiheadAttention`` and
    ``nn.TransformerEncoderLayer`` take their fused fast paths (``aten::_native_multi_head_attention``,
    ``aten::_transformer_encoder_layer_fwd``, which the exporter cannot write), so a model refused
    that way is exported again with autograd on: the written-out layers, same values."""
    import torch

    try:
        with torch.no_grad():
            torch.onnx.export(module, inputs, f, dynamo=False, opset_version=17)
    except torch.onnx.errors.UnsupportedOperatorError as exc:
        if not any(op in str(exc) for op in ("_native_multi_head_attention", "_transformer_encoder_layer_fwd")):
            raise
        with torch.enable_grad():
            torch.onnx.export(module, inputs, f, dynamo=False, opset_version=17)


def _flat(out) -> list:
    import numpy as np

    if isinstance(out, (tuple, list)):
        return [y for o in out for y in _flat(o)]
    return [np.asarray(out.detach().double().numpy() if hasattr(out, "numpy") else out, np.float64)]


def measure(factories: dict, models, runners, path: str, rounds: int, cpu_time: bool) -> list[dict]:
    rows = []
    for name in models:
        module, inputs = factories[name]()
        skipped: dict[str, str] = {}
        calls = _runners(module, inputs, path, runners, skipped)
        best = interleaved_best(calls, rounds, cpu_time)
        row = {"model": name, **{f"{r}_us": v for r, v in best.items()}, "skipped": skipped}
        line = [f"{name:18s}"] + [f"{r} {v:8.1f} µs" for r, v in best.items()]
        ratios = peer_ratios(best)
        row.update(ratios)
        line += [f"{k.replace('/', '÷')} {v:.2f}x" for k, v in ratios.items()]
        line += [f"({r} skipped: {why})" for r, why in skipped.items()]
        print("  ".join(line), flush=True)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.heldout_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--factory", default="heldout_models:HELDOUT")
    ap.add_argument("--models", default="")
    ap.add_argument("--runners", default=",".join(RUNNERS))
    ap.add_argument("--path", default="script", help="import path srcore's runners convert through")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cpu-time", action="store_true", help="time calls in process CPU time (loaded machines)")
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    factories = _factories(args.factory)
    models = args.models.split(",") if args.models else list(factories)
    with threadpool_limits(1):
        measure(factories, models, args.runners.split(","), args.path, args.rounds, args.cpu_time)
    return 0


if __name__ == "__main__":
    sys.exit(main())

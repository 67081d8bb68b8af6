"""int8 beside float: ``python -m benchmarks.int8 [--models ...] [--rounds 10] [--json PATH]``.

Per model (resnet_small and mlp_wide of the benchmark set, and ``dwsep_convnet``, a depthwise-separable
convnet defined here), one process, one intra-op thread everywhere (numpy's BLAS through
threadpoolctl, torch, ONNX Runtime), runners timed in alternation (round r times every runner once,
in turn), best-round medians and their ratios:

* ``srcore_float``: the float model on the ``cpu`` plugin; ``srcore_trt_like``: on ``trt_like, cpu``;
* ``srcore_int8``: :func:`srcore.quantize` (histogram/percentile observer) on the calibration batches,
  run on ``quantized_cpu, cpu``;
* ``torch_int8``: torch's FX post-training static quantization, x86 qconfig, same calibration;
* ``ort_float`` and ``ort_int8``: the model exported to ONNX, and the same file quantized by
  ``onnxruntime.quantization.quantize_static`` (QDQ, per channel, uint8 activations, int8 weights)
  with the same calibration batches.

Besides wall-clock medians, each round records the CPU time of the thread per call
(``time.thread_time``, one thread everywhere): on a shared, loaded machine the wall clock counts
the time other processes held the core, the CPU time does not (it still moves with cache and
frequency effects). Both are reported, with the ratio ``cpu time int8/ort_int8``.

Calibration: 4 batches of the model's bench input plus noise (seeded). Every runner's output is
checked against torch float (relative max error printed). File sizes: ``.srm`` float and int8.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _dwsep_convnet():
    import torch
    from torch import nn

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU(),
                             nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class DWSep(nn.Module):
        """MobileNet-v1 layout at width 0.5 on 1x3x160x160: depthwise 3x3 + pointwise 1x1 blocks."""

        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            cfg = [(16, 32, 1), (32, 64, 2), (64, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2),
                   (256, 256, 1), (256, 256, 1), (256, 512, 2), (512, 512, 1)]
            self.blocks = nn.Sequential(*[block(*c) for c in cfg])
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, 1000)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))

    torch.manual_seed(5)
    m = DWSep()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.1, 0.1)
    return m.eval(), (torch.randn(1, 3, 160, 160),)


def build(name: str):
    if name == "dwsep_convnet":
        return _dwsep_convnet()
    from benchmarks.models import MODELS

    return MODELS[name][0]()


MODELS = ("resnet_small", "mlp_wide", "dwsep_convnet")


def _calibration(x: np.ndarray, n: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [x + np.float32(0.1) * rng.standard_normal(x.shape).astype(np.float32) for _ in range(n)]


def _torch_int8(net, x, calib):
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    import copy

    prepared = prepare_fx(copy.deepcopy(net), get_default_qconfig_mapping("x86"), (torch.from_numpy(x),))
    with torch.no_grad():
        for c in calib:
            prepared(torch.from_numpy(c))
    q = convert_fx(prepared)
    q.eval()
    return q


def _ort(net, x, calib, tmp: Path):
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    f32 = tmp / "model.onnx"
    torch.onnx.export(net, (torch.from_numpy(x),), str(f32), input_names=["x"], output_names=["y"], dynamo=False)
    pre = tmp / "model.pre.onnx"
    try:
        from onnxruntime.quantization.shape_inference import quant_pre_process

        quant_pre_process(str(f32), str(pre))
    except Exception:  # noqa: BLE001 - pre-processing is an optimization only
        pre = f32

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": c} for c in calib])

        def get_next(self):
            return next(self.it, None)

    i8 = tmp / "model.int8.onnx"
    quantize_static(str(pre), str(i8), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sf = ort.InferenceSession(str(f32), so, providers=["CPUExecutionProvider"])
    si = ort.InferenceSession(str(i8), so, providers=["CPUExecutionProvider"])
    return (lambda: sf.run(None, {"x": x})[0]), (lambda: si.run(None, {"x": x})[0]), os.path.getsize(i8), \
        os.path.getsize(f32)


def run_model(name: str, rounds: int, min_time: float, skip: set[str]) -> dict:
    import torch
    from threadpoolctl import threadpool_limits

    import srcore

    torch.set_num_threads(1)
    net, ins = build(name)
    x = ins[0].numpy()
    calib = _calibration(x)
    with torch.inference_mode():
        ref = net(ins[0]).numpy()
    runners, sizes, info = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="srcore-int8-") as tmpdir, threadpool_limits(1):
        tmp = Path(tmpdir)
        model = srcore.from_torchscript(net, ins)
        fpath = tmp / "float.srm"
        srcore.save(model, fpath)
        sizes["srcore_float"] = os.path.getsize(fpath)
        t0 = time.perf_counter()
        qmodel, report = srcore.quantize(model, [(c,) for c in calib], with_report=True)
        info["quantize_seconds"] = round(time.perf_counter() - t0, 2)
        info["kept_float"] = sorted({n.op for n in report.nodes if n.status == "float"})
        qpath = tmp / "int8.srm"
        srcore.save(qmodel, qpath)
        sizes["srcore_int8"] = os.path.getsize(qpath)
        fsm = srcore.StaticModule(srcore.load(fpath), backends=("cpu",))
        runners["srcore_float"] = lambda: fsm(x)
        if "trt_like" not in skip:
            try:
                tsm = srcore.StaticModule(srcore.load(fpath), backends=("trt_like", "cpu"))
                runners["srcore_trt_like"] = lambda: tsm(x)
            except srcore.SrcoreError as exc:
                info["trt_like_error"] = str(exc)
        qsm = srcore.StaticModule(srcore.load(qpath))
        runners["srcore_int8"] = lambda: qsm(x)
        if "torch" not in skip:
            tq = _torch_int8(net, x, calib)
            tx = torch.from_numpy(x)
            runners["torch_int8"] = lambda: tq(tx).numpy()
        if "ort" not in skip:
            ort_f, ort_i, sizes["ort_int8"], sizes["ort_float"] = _ort(net, x, calib, tmp)
            runners["ort_float"], runners["ort_int8"] = ort_f, ort_i
        errors = {}
        with torch.inference_mode():
            for k, fn in runners.items():
                y = np.asarray(fn(), np.float64)
                errors[k] = float(np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-12))
            # warm up (>= 0.3 s and >= 5 calls each), then rounds in alternation
            calls = {}
            for k, fn in runners.items():
                t0, n = time.perf_counter(), 0
                while n < 5 or time.perf_counter() - t0 < 0.3:
                    fn()
                    n += 1
                per = (time.perf_counter() - t0) / n
                calls[k] = max(3, int(min_time / per))
            samples = {k: [] for k in runners}
            cpu = {k: [] for k in runners}
            for _ in range(rounds):
                for k, fn in runners.items():
                    ts = []
                    c0 = time.thread_time_ns()
                    for _ in range(calls[k]):
                        t = time.perf_counter_ns()
                        fn()
                        ts.append(time.perf_counter_ns() - t)
                    samples[k].append(statistics.median(ts) / 1e6)
                    cpu[k].append((time.thread_time_ns() - c0) / calls[k] / 1e6)
    best = {k: min(v) for k, v in samples.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    pooled = {k: statistics.median(v) for k, v in samples.items()}
    ratios = {"int8/float_cpu": best["srcore_int8"] / best["srcore_float"]}
    if "ort_int8" in best:
        ratios["int8/ort_int8"] = best["srcore_int8"] / best["ort_int8"]
        ratios["ort_int8/ort_float"] = best["ort_int8"] / best["ort_float"]
    if "torch_int8" in best:
        ratios["int8/torch_int8"] = best["srcore_int8"] / best["torch_int8"]
    ratios["file int8/float"] = sizes["srcore_int8"] / sizes["srcore_float"]
    if "ort_int8" in best_cpu:
        ratios["cpu time int8/ort_int8"] = best_cpu["srcore_int8"] / best_cpu["ort_int8"]
    return {"model": name, "best_ms": best, "median_of_rounds_ms": pooled, "best_cpu_ms": best_cpu, "ratios": ratios,
            "rel_error_vs_torch_float": errors, "bytes": sizes, **info}


def _table(results: list[dict]) -> str:
    cols = ["srcore_float", "srcore_trt_like", "srcore_int8", "torch_int8", "ort_float", "ort_int8"]
    lines = [f"{'model':14s} " + " ".join(f"{c:>15s}" for c in cols)]
    for r in results:
        lines.append(f"{r['model']:14s} " + " ".join(
            f"{r['best_ms'][c]:>12.2f} ms" if c in r["best_ms"] else f"{'-':>15s}" for c in cols))
    lines.append("CPU time of the thread per call (best round; what other processes took of the core left out):")
    for r in results:
        lines.append(f"{r['model']:14s} " + " ".join(
            f"{r['best_cpu_ms'][c]:>12.2f} ms" if c in r["best_cpu_ms"] else f"{'-':>15s}" for c in cols))
    lines.append("")
    for r in results:
        lines.append(f"{r['model']}: " + ", ".join(f"{k} {v:.2f}x" for k, v in r["ratios"].items()))
        lines.append("  rel. max error vs torch float: " + ", ".join(
            f"{k} {v:.1e}" for k, v in r["rel_error_vs_torch_float"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.int8", description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per runner per round (default 0.2)")
    p.add_argument("--skip", nargs="*", default=[], choices=("trt_like", "torch", "ort"))
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = p.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore")   # torch's deprecation notices for FX quantization and the ONNX exporter
    from benchmarks.machine import machine_facts

    results = []
    for name in args.models:
        print(f"{name} ...", file=sys.stderr, flush=True)
        results.append(run_model(name, args.rounds, args.min_time, set(args.skip)))
    doc = {"machine": machine_facts(), "threads": 1, "rounds": args.rounds,
           "load_average": os.getloadavg(), "results": results}
    print(_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

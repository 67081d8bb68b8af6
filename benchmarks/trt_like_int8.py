"""INT8 engines: ``python -m benchmarks.trt_like_int8 [--models resnet_small,mlp_wide] [--rounds N]``.

Each bench model quantized by torch's FX post-training static quantization (x86 qconfig, 8
calibration batches), imported with ``srcore.from_torchscript`` and run, in one process with
alternating rounds (best-round median of each runner), by:

* ``trt_like int8``: backends ``("trt_like", "quantized_cpu", "cpu")``: the quantized segments
  in int8 engines, the rest node by node;
* ``quantized_cpu``: srcore's default backends on the same quantized model;
* ``trt_like float32``: the float model in trt_like engines;
* ``torch int8``: torch's quantized model (x86 backend, fbgemm);
* ``ORT int8``: ONNX Runtime on the float model quantized by
  ``onnxruntime.quantization.quantize_static`` (QDQ, per-channel weights, the same calibration
  batches), when onnxruntime and onnx are installed.

Prints medians and ratios to trt_like float32. Intra-op threads: 1 (``OMP_NUM_THREADS`` etc. set
before numpy loads), as the latency protocol of ``benchmarks.run``.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402


def _quantize_fx(model, x, batches):
    import torch
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    prepared = prepare_fx(model, tq.get_default_qconfig_mapping("x86"), (x,))
    with torch.no_grad():
        for b in batches:
            prepared(b)
    return convert_fx(prepared)


def _ort_int8(model, x, batches, path):
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    fp = os.path.join(path, "float.onnx")
    torch.onnx.export(model, (x,), fp, input_names=["x"], output_names=["y"], dynamo=False)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": b.numpy()} for b in batches])

        def get_next(self):
            return next(self.it, None)

    qp = os.path.join(path, "int8.onnx")
    quantize_static(fp, qp, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(qp, so, providers=["CPUExecutionProvider"])
    return lambda a: sess.run(None, {"x": a})[0]


def runners(name: str):
    import torch

    import srcore
    from benchmarks.models import MODELS

    build, _ = MODELS[name]
    model, (x,) = build()
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(x.shape, generator=g) for _ in range(8)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = _quantize_fx(model, x, batches)
        ts = torch.jit.freeze(torch.jit.script(qmodel).eval())
        qm = srcore.from_torchscript(ts, (x,))
        fm = srcore.from_torchscript(torch.jit.freeze(torch.jit.script(model).eval()), (x,))
    out = {
        "trt_like int8": srcore.StaticModule(qm, srcore.Options(backends=("trt_like", "quantized_cpu", "cpu"))),
        "quantized_cpu": srcore.StaticModule(qm),
        "trt_like float32": srcore.StaticModule(fm, srcore.Options(backends=("trt_like", "cpu"))),
    }

    def torch_int8(a, _m=ts):
        with torch.no_grad():
            return _m(torch.from_numpy(a)).numpy()
    out["torch int8"] = torch_int8
    try:
        out["ORT int8"] = _ort_int8(model, x, batches, tempfile.mkdtemp())
    except Exception as exc:   # onnxruntime's quantization or onnx missing: say so, measure the rest
        print(f"  (ORT int8 left out: {type(exc).__name__}: {exc})", file=sys.stderr)
    return out, x.numpy()


def measure(fns: dict, x: np.ndarray, rounds: int, calls: int) -> dict[str, float]:
    for fn in fns.values():
        for _ in range(3):
            fn(x)
    best: dict[str, float] = {k: float("inf") for k in fns}
    for r in range(rounds):
        order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
        for k in order:
            ts = []
            for _ in range(calls):
                t0 = time.perf_counter()
                fns[k](x)
                ts.append(time.perf_counter() - t0)
            best[k] = min(best[k], statistics.median(ts))
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet_small,mlp_wide")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    args = ap.parse_args(argv)
    for name in args.models.split(","):
        fns, x = runners(name)
        ref = fns["quantized_cpu"](x)
        same = np.array_equal(fns["trt_like int8"](x), ref)
        best = measure(fns, x, args.rounds, args.calls)
        base = best["trt_like float32"]
        print(f"{name} (trt_like int8 == quantized_cpu bit for bit: {same})")
        for k, v in best.items():
            print(f"  {k:18s} {v * 1e3:9.3f} ms  {v / base:5.2f}x trt_like float32")
    return 0


if __name__ == "__main__":
    sys.exit(main())

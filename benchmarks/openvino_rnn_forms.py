"""One torch LSTM layer (lstm_gru's shape: batch 1, 100 steps, 128 hidden) in the OpenVINO forms a
converter could build, beside OpenVINO on torch's ONNX export of the layer and ONNX Runtime on it,
interleaved in one process, 1 thread, each call timed in CPU time:

    .venv/bin/python -m benchmarks.openvino_rnn_forms [--input-size 128] [--rounds 15]

* ``sequence``: one ``LSTMSequence`` (what srcore's converter builds, ``convert/rnn.py``);
* ``cells``: 100 ``LSTMCell`` nodes, unrolled;
* ``hoisted``: the input projection of all steps as one MatMul, then per step a MatMul of the
  hidden state and the gates as elementwise ops (what a converter without the recurrent ops would
  build, with the input half of the work batched);
* ``ov_onnx``, ``ort``: the layer exported by ``torch.onnx.export`` (an ONNX ``LSTM`` node).

Every form's output is checked against torch's before it is timed. Ratios are medians of per-round
ratios to ``sequence``. Prints the runtime layers each form compiles to.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

T, H = 100, 128
CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1,
          "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}


def _fico(a):
    """torch's gate order (i, f, g, o) -> OpenVINO's (f, i, c, o)."""
    i, f, g, o = np.split(a, 4, 0)
    return np.ascontiguousarray(np.concatenate([f, i, g, o], 0), dtype=np.float32)


def forms(ov, o, W, R, B, size: int) -> dict:
    """The OpenVINO models of the layer: input (1, T, size), output the hidden states (T, H)."""
    zeros = lambda *s: o.constant(np.zeros(s, np.float32))   # noqa: E731
    axis0 = o.constant(np.int64([0]))

    def sequence():
        p = o.parameter([1, T, size], np.float32)
        y = o.lstm_sequence(p, zeros(1, 1, H), zeros(1, 1, H), o.constant(np.array([T], np.int32)),
                            o.constant(W[None]), o.constant(R[None]), o.constant(B[None]), H, "forward")
        return ov.Model([o.reshape(y.output(0), o.constant(np.int64([T, H])), False).output(0)], [p])

    def cells():
        p = o.parameter([1, T, size], np.float32)
        xs = o.split(o.squeeze(p, axis0), o.constant(np.int64(0)), T)
        h, c = zeros(1, H).output(0), zeros(1, H).output(0)
        Wc, Rc, Bc, hs = o.constant(W), o.constant(R), o.constant(B), []
        for t in range(T):
            cell = o.lstm_cell(xs.output(t), h, c, Wc, Rc, Bc, H)
            h, c = cell.output(0), cell.output(1)
            hs.append(h)
        return ov.Model([o.concat(hs, 0).output(0)], [p])

    def hoisted():
        p = o.parameter([1, T, size], np.float32)
        xw = o.add(o.matmul(o.squeeze(p, axis0), o.constant(W), False, True), o.constant(B))   # (T, 4H)
        xs = o.split(xw, o.constant(np.int64(0)), T)
        Rc, one = o.constant(R), o.constant(np.int64(1))
        h, c, hs = zeros(1, H).output(0), zeros(1, H).output(0), []
        for t in range(T):
            g = o.split(o.add(xs.output(t), o.matmul(h, Rc, False, True)), one, 4)
            f, i, gg, og = o.sigmoid(g.output(0)), o.sigmoid(g.output(1)), o.tanh(g.output(2)), o.sigmoid(g.output(3))
            c = o.add(o.multiply(f, c), o.multiply(i, gg)).output(0)
            h = o.multiply(og, o.tanh(c)).output(0)
            hs.append(h)
        return ov.Model([o.concat(hs, 0).output(0)], [p])

    return {"sequence": sequence, "cells": cells, "hoisted": hoisted}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.openvino_rnn_forms", description=__doc__.split("\n\n")[0])
    ap.add_argument("--input-size", type=int, default=128, help="the layer's input features (lstm_gru: 40, then 128)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=30)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    import onnxruntime as ort
    import openvino as ov
    import openvino.opset14 as o
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    lstm = torch.nn.LSTM(args.input_size, H, batch_first=True).eval()
    x = np.random.default_rng(0).standard_normal((1, T, args.input_size)).astype(np.float32)
    with torch.no_grad():
        want = lstm(torch.from_numpy(x))[0][0].numpy()
    W, R = _fico(lstm.weight_ih_l0.detach().numpy()), _fico(lstm.weight_hh_l0.detach().numpy())
    B = _fico((lstm.bias_ih_l0 + lstm.bias_hh_l0).detach().numpy())
    core = ov.Core()
    calls, layers = {}, {}
    for name, build in forms(ov, o, W, R, B, args.input_size).items():
        compiled = core.compile_model(build(), "CPU", CONFIG)
        req = compiled.create_infer_request()
        calls[name] = (lambda req=req: (req.infer({0: x}), req.get_output_tensor(0).data.reshape(T, H))[1])
        kinds = {op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ordered_ops()}
        layers[name] = sorted(kinds - {"Const", "Input", "Output", "Reshape"})
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "lstm.onnx")
        torch.onnx.export(lstm, (torch.from_numpy(x),), path, dynamo=False)
        compiled = core.compile_model(core.read_model(path), "CPU", CONFIG)
        req = compiled.create_infer_request()
        calls["ov_onnx"] = lambda: (req.infer({0: x}), req.get_output_tensor(0).data.reshape(T, H))[1]
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        name0 = sess.get_inputs()[0].name
        calls["ort"] = lambda: sess.run(None, {name0: x})[0].reshape(T, H)
    for name, f in calls.items():
        err = float(np.abs(f() - want).max())
        if err > 1e-5:
            raise SystemExit(f"{name}: max abs error {err:.2e} against torch")
    times = {n: [] for n in calls}
    names = list(calls)
    for r in range(args.rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            per = []
            for _ in range(args.calls):
                t0 = time.process_time_ns()
                calls[n]()
                per.append(time.process_time_ns() - t0)
            times[n].append(float(np.median(per)) * 1e-3)
    base = np.array(times["sequence"])
    print("| form | runtime layers | call, µs (median of rounds) | ÷ sequence |\n|---|---|---|---|")
    for n, t in times.items():
        t = np.array(t)
        print(f"| {n} | {', '.join(layers.get(n, ['(ONNX)']))} | {np.median(t):.0f} | {np.median(t / base):.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

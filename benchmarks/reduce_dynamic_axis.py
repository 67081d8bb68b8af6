"""The price of ONNX ReduceMax over an axis known only at run time (padded by one identity element so
that an empty axis gives ONNX's -inf), against the same graph with the axis static, in one process.

    python -m benchmarks.reduce_dynamic_axis [--rounds 7] [--calls 20]

ReduceMax(axis 1, keepdims) + Sub on an [8, 128, 512] float32 input, cpu backend; per arm the median of
the best 4 rounds' process time per call (``time.process_time``), and the ratio.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper

import srcore


def _model(seq):
    g = h.make_graph([h.make_node("ReduceMax", ["x", "ax"], ["a"], keepdims=1), h.make_node("Sub", ["x", "a"], ["y"])],
                     "g", [h.make_tensor_value_info("x", T.FLOAT, [8, seq, 512])],
                     [h.make_tensor_value_info("y", T.FLOAT, [8, seq, 512])],
                     [numpy_helper.from_array(np.array([1], np.int64), "ax")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    arms = {"dynamic": srcore.StaticModule(srcore.from_onnx(_model("S")), backends=("cpu",)),
            "static": srcore.StaticModule(srcore.from_onnx(_model(128)), backends=("cpu",))}
    x = np.random.default_rng(0).standard_normal((8, 128, 512)).astype(np.float32)
    np.testing.assert_array_equal(arms["dynamic"](x=x), arms["static"](x=x))
    took = {k: [] for k in arms}
    for _ in range(a.rounds):
        for k, sm in arms.items():   # interleaved: load hits both arms alike
            t = time.process_time()
            for _ in range(a.calls):
                sm(x=x)
            took[k].append((time.process_time() - t) / a.calls * 1e3)
    ms = {k: float(np.median(sorted(v)[:4])) for k, v in took.items()}
    print(f"dynamic {ms['dynamic']:.3f} ms, static {ms['static']:.3f} ms, ratio {ms['dynamic'] / ms['static']:.2f}")


if __name__ == "__main__":
    main()

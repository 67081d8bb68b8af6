"""trt_like's depthwise conv tactics on MobileNet-style layers, beside torch eager, 1 thread:
``python -m benchmarks.depthwise [--rounds 5] [--calls 20]``.

Layers: (input channels, plane, kernel, stride) of MobileNetV2/V3 and EfficientNet blocks, padding
k // 2, relu epilogue. Every implementation of a layer is timed in the same rounds, interleaved;
a figure is the best round's mean in µs.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

LAYERS = [(16, 112, 3, 2), (72, 56, 3, 2), (72, 28, 5, 2), (120, 28, 5, 1), (240, 28, 3, 2),
          (200, 14, 3, 1), (480, 14, 3, 1), (672, 14, 5, 2), (960, 7, 5, 1)]


def _best(fn, rounds: int, calls: int) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def main(argv=None) -> None:
    import torch
    from srcore_trt_like.conv import ConvSpec, DepthwiseChannelsLastTactic, DepthwiseDirectTactic, DepthwiseSimdTactic

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"{'C':>5} {'HxW':>8} {'k':>2} {'s':>2} {'direct':>9} {'chan_last':>10} {'simd':>8} {'torch':>8}   (us, 1 thread)")
    for C, hw, k, s in LAYERS:
        spec = ConvSpec((1, C, hw, hw), C, k, s, k // 2, groups=C, relu=True)
        x = rng.standard_normal(spec.x_shape, np.float32)
        w = rng.standard_normal(spec.weight_shape, np.float32)
        b = rng.standard_normal(C, np.float32)
        out = np.empty(spec.out_shape, np.float32)
        times = [_best(lambda t=T(spec, w, b): t(x, out), a.rounds, a.calls)
                 for T in (DepthwiseDirectTactic, DepthwiseChannelsLastTactic, DepthwiseSimdTactic)]
        xt, wt, bt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
        with torch.inference_mode():
            times.append(_best(lambda: torch.relu_(torch.nn.functional.conv2d(xt, wt, bt, s, k // 2, 1, C)),
                               a.rounds, a.calls))
        print(f"{C:>5} {hw:>4}x{hw:<3} {k:>2} {s:>2} {times[0]:>9.0f} {times[1]:>10.0f} {times[2]:>8.0f} {times[3]:>8.0f}")


if __name__ == "__main__":
    main()

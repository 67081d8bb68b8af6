"""trt_like's depthwise conv tactics on MobileNet-style layers, beside torch eager, 1 thread:
``python -m benchmarks.depthwise [--rounds 5] [--calls 20] [--split]``.

Layers: (input channels, plane, kernel, stride) of MobileNetV2/V3 and EfficientNet blocks, padding
k // 2, relu epilogue. Every implementation of a layer is timed in the same rounds, interleaved;
a figure is the best round's mean in µs. ``--split`` adds the SIMD kernel's copy of the input
channels into its padded, stride-phase-split buffer timed alone (``copy``) beside the kernel's call
(``kernel``, which includes that copy: each channel is copied just before its outputs are computed).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

LAYERS = [(16, 112, 3, 2), (72, 56, 3, 2), (72, 28, 5, 2), (120, 28, 5, 1), (240, 28, 3, 2),
          (200, 14, 3, 1), (480, 14, 3, 1), (672, 14, 5, 2), (960, 7, 5, 1),
          # mobilenet_v3 (benchmarks/models.py) layers not above
          (88, 28, 3, 1), (96, 28, 5, 2), (240, 14, 5, 1), (288, 14, 5, 2), (576, 7, 5, 1)]


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
    from srcore_trt_like.conv import (ConvSpec, DepthwiseBlockedTactic, DepthwiseChannelsLastTactic,
                                      DepthwiseDirectTactic, DepthwiseSimd8Tactic, DepthwiseSimdTactic)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--split", action="store_true", help="time the SIMD kernel's input copy alone too")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    split = f" {'copy':>6} {'kernel':>7}" if a.split else ""
    print(f"{'C':>5} {'HxW':>8} {'k':>2} {'s':>2} {'direct':>9} {'chan_last':>10} {'simd':>8} {'simd8':>8} "
          f"{'blocked':>8} {'torch':>8}{split}   (us, 1 thread)")
    for C, hw, k, s in LAYERS:
        spec = ConvSpec((1, C, hw, hw), C, k, s, k // 2, groups=C, relu=True)
        x = rng.standard_normal(spec.x_shape, np.float32)
        w = rng.standard_normal(spec.weight_shape, np.float32)
        b = rng.standard_normal(C, np.float32)
        out = np.empty(spec.out_shape, np.float32)
        times = [_best(lambda t=T(spec, w, b): t(x, out), a.rounds, a.calls)
                 for T in (DepthwiseDirectTactic, DepthwiseChannelsLastTactic, DepthwiseSimdTactic,
                           DepthwiseSimd8Tactic, DepthwiseBlockedTactic)]
        xt, wt, bt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
        with torch.inference_mode():
            times.append(_best(lambda: torch.relu_(torch.nn.functional.conv2d(xt, wt, bt, s, k // 2, 1, C)),
                               a.rounds, a.calls))
        parts = "".join(f" {t:>6.0f}" for t in _simd_parts(spec, w, b, x, a.rounds, a.calls)) if a.split else ""
        print(f"{C:>5} {hw:>4}x{hw:<3} {k:>2} {s:>2} {times[0]:>9.0f} {times[1]:>10.0f} {times[2]:>8.0f} {times[3]:>8.0f} "
              f"{times[4]:>8.0f} {times[5]:>8.0f}{parts}")


def _simd_parts(spec, w, b, x, rounds: int, calls: int) -> tuple[float, float]:
    """µs of the SIMD depthwise conv's copy of every input channel into its padded, stride-phase
    buffer, alone, and of the kernel's whole call (image 0; the copy is part of it: each channel
    is copied just before its outputs are computed)."""
    from srcore.plugin import simd_depthwise

    conv = simd_depthwise.SimdDepthwiseConv(w, b, spec.stride, spec.padding, spec.dilation, lo=0.0)
    out = np.empty(conv.out_shape(x.shape), np.float32)
    run = conv.bind(x, out)
    _, _, _, _, Hq, Wq, J0, J1, _ = conv._plan(x.shape)
    (sh, sw), (pt, pl), (C, H, W) = spec.stride, spec.padding, x.shape[1:]
    flat = np.ascontiguousarray(x).reshape(-1)
    copy_all = _copier()

    def copy():
        copy_all(flat, C, H, W, sh, sw, pt, pl, Hq, Wq, J0, J1, conv.tag, conv.nl)
    return _best(copy, rounds, calls), _best(lambda: run.run_tasks(0, 0, C), rounds, calls)


def _copier():
    import numba
    from srcore.conv import depthwise as dw
    from srcore.conv.simd import fptr, vsplat

    @numba.njit(nogil=True, error_model="numpy", boundscheck=False)
    def copy_all(x, C, H, W, sh, sw, pt, pl, Hq, Wq, J0, J1, tag, nl):
        xq = np.zeros(sh * sw * Hq * Wq, np.float32)
        for c in range(C):
            dw._copy_channel(fptr(x), c * H * W, H, W, sh, sw, pt, pl, fptr(xq), Hq, Wq, J0, J1, vsplat(tag, 0.0), nl)
        return xq[0]
    return copy_all


if __name__ == "__main__":
    main()

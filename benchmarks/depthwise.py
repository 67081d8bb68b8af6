"""trt_like's depthwise conv tactics on MobileNet-style layers, beside torch eager, 1 thread:
``python -m benchmarks.depthwise [--rounds 5] [--calls 20] [--split]``.

Layers: (input channels, plane, kernel, stride) of MobileNetV2/V3 and EfficientNet blocks, padding
k // 2, relu epilogue. Every implementation of a layer is timed in the same rounds, interleaved;
a figure is the best round's mean in µs. ``--split`` adds the SIMD tactic's two parts timed alone:
the copy of the input into its padded, stride-phase-split buffer (``fill``) and the kernel on that
buffer (``kernel``); a call runs both (and at stride 2 their working set can exceed L2).
"""
from __future__ import annotations

import argparse
import inspect
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
    from srcore_trt_like.conv import ConvSpec, DepthwiseChannelsLastTactic, DepthwiseDirectTactic, DepthwiseSimdTactic

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--split", action="store_true", help="time the SIMD tactic's fill and kernel alone too")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    split = f" {'fill':>6} {'kernel':>7}" if a.split else ""
    print(f"{'C':>5} {'HxW':>8} {'k':>2} {'s':>2} {'direct':>9} {'chan_last':>10} {'simd':>8} {'torch':>8}{split}"
          f"   (us, 1 thread)")
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
        parts = "".join(f" {t:>6.0f}" for t in _simd_parts(spec, w, b, x, a.rounds, a.calls)) if a.split else ""
        print(f"{C:>5} {hw:>4}x{hw:<3} {k:>2} {s:>2} {times[0]:>9.0f} {times[1]:>10.0f} {times[2]:>8.0f} {times[3]:>8.0f}"
              f"{parts}")


def _simd_parts(spec, w, b, x, rounds: int, calls: int) -> tuple[float, float]:
    """µs of the SIMD depthwise conv's padded copy and of its kernel, each alone (image 0)."""
    from srcore.conv import depthwise as dw
    from srcore.plugin import simd_depthwise

    conv = simd_depthwise.SimdDepthwiseConv(w, b, spec.stride, spec.padding, spec.dilation, lo=0.0)
    Ho, Wo, rb, cb, Hq, Wq, taps = conv._plan(x.shape)
    (sh, sw), (pt, pl), C = spec.stride, spec.padding, x.shape[1]
    xq = np.empty(C * sh * sw * Hq * Wq, np.float32)
    out = np.empty(conv.out_shape(x.shape), np.float32).reshape(-1)
    flat = np.ascontiguousarray(x).reshape(x.shape[0], -1)[0]

    def fill():
        dw.fill_padded(flat, C, x.shape[2], x.shape[3], sh, sw, pt, pl, xq, Hq, Wq, conv.tag)

    # by keyword: the kernel's parameters change with its epilogue (a fused leaky relu: off here)
    known = dict(xq=xq, Wq=Wq, cstep=sh * sw * Hq * Wq, mult=1, taps=taps, w=conv.w, b=conv.b, out=out,
                 res=conv._none, has_res=False, leaky=False, slope=np.float32(1.0), lo=conv.lo, hi=conv.hi, n=0,
                 O=conv.O, Ho=Ho, Wo=Wo, rb=rb, cb=cb, tag=conv.tag, nl=conv.nl, t0=0, t1=conv.O)
    kwargs = {p: known[p] for p in inspect.signature(dw.dw_tasks.py_func).parameters}

    def kernel():
        dw.dw_tasks(**kwargs)
    fill()
    return _best(fill, rounds, calls), _best(kernel, rounds, calls)


if __name__ == "__main__":
    main()

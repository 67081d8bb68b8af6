"""srcore.conv's one-thread kernels on a few conv shapes, two source trees A/B:
``python -m benchmarks.conv_kernels_ab OLD_ROOT NEW_ROOT [--rounds 6] [--calls 200] [--only NAMES]``.

Each round runs one process per tree (``PYTHONPATH=ROOT``, alternating which goes first), each
process times every shape (its conv called ``calls`` times per batch on one thread, process CPU per
call, best of 5 batches) after a warm-up; the numba cache of the trees' kernels is ``NUMBA_CACHE_DIR``
(set it: the first round compiles). Printed per shape: each tree's best-round µs per call and
new/old. Every process checks its output against a float64 numpy reference (a kernel change that
breaks the arithmetic fails here, not just a test). ``--only``: comma-separated shape names.
``python -m benchmarks.conv_kernels_ab --one`` (with ``PYTHONPATH``) is one process's timing, as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

#: name -> (conv class, input NCHW shape, weight shape, keyword arguments, residual, blocked input/output)
SHAPES = {
    "direct3x3": ("direct", (1, 64, 28, 28), (64, 64, 3, 3), dict(stride=1, pads=1, dilation=1, lo=0.0)),
    "direct3x3s2": ("direct", (1, 64, 28, 28), (128, 64, 3, 3), dict(stride=2, pads=1, dilation=1, lo=0.0)),
    "pointwise": ("pointwise", (1, 64, 28, 28), (128, 64, 1, 1), dict(lo=0.0, hi=6.0)),
    "pointwise7x7_res": ("pointwise", (1, 160, 7, 7), (320, 160, 1, 1), dict(activation="hardswish", residual=True)),
    "depthwise3x3": ("depthwise", (1, 96, 28, 28), (96, 1, 3, 3), dict(stride=1, pads=1, lo=0.0, hi=6.0)),
    "depthwise5x5s2": ("depthwise", (1, 120, 28, 28), (120, 1, 5, 5), dict(stride=2, pads=2, activation="hardswish")),
    "dw_blocked3x3": ("dw_blocked", (1, 96, 28, 28), (96, 1, 3, 3), dict(stride=1, pads=1, lo=0.0, hi=6.0)),
    "dw_blocked5x5s2_nchwc": ("dw_blocked", (1, 120, 28, 28), (120, 1, 5, 5),
                              dict(stride=2, pads=2, activation="hardswish", blocked_in=True, blocked_out=True)),
    "pw_blocked": ("pw_blocked", (1, 112, 14, 14), (672, 112, 1, 1), dict(lo=0.0, hi=6.0)),
    "pw_blocked_res_nchw": ("pw_blocked", (1, 96, 14, 14), (40, 96, 1, 1), dict(blocked_out=False, residual=True)),
    "dense_nchwc3x3": ("dense_nchwc", (1, 64, 28, 28), (64, 64, 3, 3), dict(stride=1, pads=1, lo=0.0)),
    "dense_nchwc3x3s2": ("dense_nchwc", (1, 64, 28, 28), (128, 64, 3, 3), dict(stride=2, pads=1, lo=0.0,
                                                                             residual=False)),
    "stem_blocked": ("dense_blocked", (1, 3, 112, 112), (32, 3, 3, 3), dict(stride=2, pads=1, activation="hardswish")),
}


def _reference(x, w, b, stride, pads, groups, res, lo, hi, act):
    import torch
    import torch.nn.functional as F

    y = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), torch.from_numpy(b).double(),
                 stride, pads, 1, groups)
    if res is not None:
        y = y + torch.from_numpy(res).double()
    y = y.clamp(lo, hi)
    if act == "hardswish":
        y = F.hardswish(y)
    return y.numpy()


def _case(name):
    from srcore.conv import dense_blocked, dense_nchwc, depthwise, depthwise_blocked, direct, nchwc, pointwise
    from srcore.conv import pointwise_blocked

    kind, xs, ws, kw = SHAPES[name]
    kw = dict(kw)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    lo, hi, act = kw.get("lo", -np.inf), kw.get("hi", np.inf), kw.get("activation")
    stride, pads = kw.get("stride", 1), kw.get("pads", 0)
    with_res = kw.pop("residual", False)
    bin_, bout = kw.get("blocked_in", kind in ("pw_blocked", "dense_nchwc")), kw.get("blocked_out", kind in (
        "pw_blocked", "dense_nchwc", "dense_blocked"))
    groups = ws[0] if kind in ("depthwise", "dw_blocked") else 1
    classes = {"direct": direct.SimdDirectConv, "pointwise": pointwise.SimdPointwiseConv,
               "depthwise": depthwise.SimdDepthwiseConv, "dw_blocked": depthwise_blocked.BlockedDepthwiseConv,
               "pw_blocked": pointwise_blocked.BlockedPointwiseConv, "dense_nchwc": dense_nchwc.NchwcDenseConv,
               "dense_blocked": dense_blocked.BlockedDenseConv}
    conv = classes[kind](w, b, **kw)
    ref = _reference(x, w, b, stride, pads, groups, None, lo, hi, act)
    res = rng.standard_normal(ref.shape).astype(np.float32) if with_res else None
    if res is not None:
        ref = _reference(x, w, b, stride, pads, groups, res, lo, hi, act)
    to = lambda a: nchwc.to_blocked(a, 16)  # noqa: E731
    xin = to(x) if bin_ else x
    out = np.zeros(to(ref).shape if bout else ref.shape, np.float32)
    rin = None if res is None else (to(res) if bout else res)
    call = (lambda: conv(xin, out)) if kind == "dense_blocked" else (lambda: conv(xin, out, rin))
    call()
    got = nchwc.from_blocked(out, ref.shape[1]) if bout else out
    err = float(np.max(np.abs(got - ref)))
    if not err < 1e-3:
        raise SystemExit(f"{name}: max error {err} against the float64 reference")
    return call


def one(names, calls: int) -> dict:
    result = {}
    for name in names:
        call = _case(name)
        for _ in range(max(3, calls // 10)):
            call()
        best = float("inf")
        for _ in range(5):
            t = time.process_time()
            for _ in range(calls):
                call()
            best = min(best, (time.process_time() - t) / calls)
        result[name] = best * 1e6
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="*")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--only", default=",".join(SHAPES))
    ap.add_argument("--one", action="store_true")
    args = ap.parse_args(argv)
    names = args.only.split(",")
    if args.one:
        print(json.dumps(one(names, args.calls)))
        return 0
    old, new = args.roots
    best = {old: {}, new: {}}
    for r in range(args.rounds):
        for root in ((old, new) if r % 2 == 0 else (new, old)):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.getcwd()]))
            out = subprocess.run([sys.executable, "-m", "benchmarks.conv_kernels_ab", "--one", "--calls",
                                  str(args.calls), "--only", args.only], env=env, check=True, capture_output=True,
                                 text=True).stdout
            for k, v in json.loads(out.strip().splitlines()[-1]).items():
                best[root][k] = min(best[root].get(k, float("inf")), v)
        print(f"round {r + 1}/{args.rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(f"{'shape':24s} {'old us':>9s} {'new us':>9s} {'new/old':>8s}")
    for k in names:
        print(f"{k:24s} {best[old][k]:9.1f} {best[new][k]:9.1f} {best[new][k] / best[old][k]:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The SGEMM-tile 1x1 (NCHW out) and stem convs of detection_head and mobilenet_v3 at 2 intra-op threads,
one layer at a time, in one process, rounds alternating: ``python -m benchmarks.tile_split_threads [--rounds 9]
[--calls 30] [--priority NICE]``.

Ways per layer (detection_head's and mobilenet_v3's, and resnet_small's stem without its pool): the NCHW16c kernel on 8-lane vectors that a 2-thread build ran before 2026-11-29
(``pointwise_nchw16c_h8`` / ``dense_nchw16c_h8``, one thread; the stem's split twin ``dense_nchw16c_h8_omp``),
the tile tactic on one thread (``pointwise_sgemm`` / ``dense_tile_nchw16c``, then offered at one thread
only) and its OpenMP twin (``pointwise_sgemm_omp`` / ``dense_tile_nchw16c_omp``), the split ones forced
on their team as the build's timing runs them. Printed: each way's best-round median µs (wall), its
ratio to the first way, and its process CPU µs per call; every tile way's output is checked to be the
one-thread tile tactic's bits. Run it idle or under the bench lock with ``--priority -10`` (an
autogroup of its own) and say the load.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

#: (name, input shape, output channels, kernel, stride, padding, activation, input blocked)
LAYERS = [("det head 64->75 @32x32", (1, 64, 32, 32), 75, 1, 1, 0, "none", True),
          ("det head 128->75 @16x16", (1, 128, 16, 16), 75, 1, 1, 0, "none", True),
          ("det head 256->75 @8x8", (1, 256, 8, 8), 75, 1, 1, 0, "none", True),
          ("mob 96->576 @7x7", (1, 96, 7, 7), 576, 1, 1, 0, "hardswish", True),
          ("det stem 3->16 3x3/2 @256", (1, 3, 256, 256), 16, 3, 2, 1, "leaky_relu", False),
          ("mob stem 3->16 3x3/2 @224", (1, 3, 224, 224), 16, 3, 2, 1, "hardswish", False),
          ("resnet stem 3->64 7x7/2 @224", (1, 3, 224, 224), 64, 7, 2, 3, "none", False)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--priority", type=int, default=None, metavar="NICE",
                    help="run in an autogroup of its own at this nice (e.g. -10)")
    args = ap.parse_args(argv)
    if args.priority is not None:
        from .clean_calls import raise_priority

        rc = raise_priority("benchmarks.tile_split_threads", list(argv or sys.argv[1:]), args.priority)
        if rc is not None:
            return rc
    import numpy as np
    from threadpoolctl import threadpool_limits

    from srcore.conv.nchwc import to_blocked
    from srcore_trt_like.conv import ConvSpec
    from srcore_trt_like.conv.dense_tile import DenseTileTactic
    from srcore_trt_like.conv.nchwc import DenseNchwcHalvesTactic, PointwiseNchwcHalvesTactic
    from srcore_trt_like.conv.nchwc_split import DenseNchwcHalvesOmpTactic
    from srcore_trt_like.conv.pointwise_sgemm import PointwiseSgemmTactic
    from srcore_trt_like.conv.tile_split import DenseTileOmpTactic, PointwiseSgemmOmpTactic
    from srcore_trt_like.kernels import threads

    print(f"load {os.getloadavg()[0]:.1f}", flush=True)
    with threadpool_limits(2):
        if threads.count() != 2:
            print("not 2 intra-op threads here")
            return 1
        rng = np.random.default_rng(0)
        for name, xs, O, k, s, p, act, blocked in LAYERS:
            spec = ConvSpec(xs, O, k, s, p, activation=act, negative_slope=0.1)
            w = rng.standard_normal(spec.weight_shape).astype(np.float32) * 0.1
            b = rng.standard_normal(O).astype(np.float32)
            x = rng.standard_normal(xs).astype(np.float32)
            if k == 1:
                xin = to_blocked(x, 16)
                ways = {"pointwise_nchw16c_h8": PointwiseNchwcHalvesTactic(spec, w, b, (True, False), threads=1),
                        "pointwise_sgemm": PointwiseSgemmTactic(spec, w, b, True),
                        "pointwise_sgemm_omp": PointwiseSgemmOmpTactic(spec, w, b, True, threads=2)}
            else:
                xin = x
                ways = {"dense_nchw16c_h8": DenseNchwcHalvesTactic(spec, w, b, (False, True), threads=1),
                        "dense_nchw16c_h8_omp": DenseNchwcHalvesOmpTactic(spec, w, b, (False, True), threads=2),
                        "dense_tile_nchw16c": DenseTileTactic(spec, w, b),
                        "dense_tile_nchw16c_omp": DenseTileOmpTactic(spec, w, b, threads=2)}
            outs = {kk: np.zeros(t.out_shape, np.float32) for kk, t in ways.items()}
            med = {kk: [] for kk in ways}
            cpu = {kk: [] for kk in ways}
            for _ in range(args.rounds):
                for kk, t in ways.items():
                    with threads.timing_on_team():
                        t._run(xin, outs[kk], None)
                        ts = []
                        c0 = time.process_time_ns()
                        for _ in range(args.calls):
                            t0 = time.perf_counter_ns()
                            t._run(xin, outs[kk], None)
                            ts.append(time.perf_counter_ns() - t0)
                        cpu[kk].append((time.process_time_ns() - c0) / args.calls / 1e3)
                    med[kk].append(statistics.median(ts) / 1e3)
            tile = [kk for kk in ways if "tile" in kk or "sgemm" in kk]
            for kk in tile[1:]:
                assert np.array_equal(outs[kk], outs[tile[0]]), (name, kk)
            first = min(med[next(iter(ways))])
            print(f"{name}:")
            for kk in ways:
                best = min(med[kk])
                print(f"  {kk:26s} {best:8.1f} µs  {best / first:5.2f}x  CPU {min(cpu[kk]):8.1f} µs/call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

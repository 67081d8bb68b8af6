"""resnet_small's NCHW16c dense convs at 2 intra-op threads, one layer at a time, four ways in one process,
rounds alternating: ``python -m benchmarks.nchwc_conv_threads [--rounds 15] [--calls 20] [--priority]``.

* ``one``: ``conv_nchw16c`` on one thread;
* ``pyteam``: ``conv_nchw16c`` built for 2 threads: its tasks split on ``srcore.conv``'s Python team
  (``run_bound``; the caller claims the parts a late worker has not started);
* ``omp_blocks`` / ``omp_rows``: ``conv_nchw16c_omp`` / ``conv_nchw16c_rows_omp``, one region on numba's
  OpenMP team per image (by ranges of block-group tasks / of bands of rows), forced on the team as the
  build's timing runs them (``threads.timing_on_team``: no governor hold after a wait);
* ``one_h8``, ``h8_blocks``, ``h8_rows``: the same on the 8-lane tiles (``conv_nchw16c_h8`` and its twins
  ``conv_nchw16c_h8_omp`` / ``conv_nchw16c_h8_rows_omp``: AVX2-sized register blocks). ``--ways`` picks some.

Printed per layer: each way's best-round and median-round median (µs, wall), its ratio to ``one`` (best
rounds) and its process CPU per call; every way's output is checked to be ``one``'s bits. ``--priority``
runs at nice -20 in an autogroup of its own (``clean_calls.raise_priority``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

#: (input shape, output channels, stride) of resnet_small's 3x3 convs, and a small one (~0.1 ms)
SHAPES = [((1, 64, 56, 56), 64, 1), ((1, 64, 56, 56), 128, 2), ((1, 128, 28, 28), 128, 1),
          ((1, 128, 28, 28), 256, 2), ((1, 256, 14, 14), 256, 1), ((1, 256, 14, 14), 512, 2),
          ((1, 512, 7, 7), 512, 1), ((1, 32, 28, 28), 32, 1)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--priority", action="store_true", help="run at nice -20 in an autogroup of its own")
    ap.add_argument("--ways", default="one,pyteam,omp_blocks,omp_rows,one_h8,h8_blocks,h8_rows")
    args = ap.parse_args(argv)
    if args.priority:
        from .clean_calls import raise_priority

        rc = raise_priority("benchmarks.nchwc_conv_threads", [a for a in (argv or sys.argv[1:])])
        if rc is not None:
            return rc
    import numpy as np
    from threadpoolctl import threadpool_limits

    from srcore.conv.nchwc import to_blocked
    from srcore_trt_like.conv import ConvSpec
    from srcore_trt_like.conv.nchwc import ConvNchwcHalvesTactic, ConvNchwcTactic
    from srcore_trt_like.conv.nchwc_split import (ConvNchwcHalvesOmpTactic, ConvNchwcHalvesRowsTactic, ConvNchwcOmpTactic,
                                                  ConvNchwcRowsTactic)
    from srcore_trt_like.kernels import threads

    print(f"load {os.getloadavg()}", flush=True)
    with threadpool_limits(2):
        if threads.count() != 2:
            print("not 2 intra-op threads here")
            return 1
        rng = np.random.default_rng(0)
        for xs, O, s in SHAPES:
            spec = ConvSpec(xs, O, 3, s, 1, relu=True)
            w = rng.standard_normal(spec.weight_shape).astype(np.float32) * 0.05
            b = rng.standard_normal(O).astype(np.float32)
            make = {"one": lambda: ConvNchwcTactic(spec, w, b, (True, True), threads=1),
                    "pyteam": lambda: ConvNchwcTactic(spec, w, b, (True, True), threads=2),
                    "omp_blocks": lambda: ConvNchwcOmpTactic(spec, w, b, (True, True), threads=2),
                    "omp_rows": lambda: ConvNchwcRowsTactic(spec, w, b, (True, True), threads=2),
                    "one_h8": lambda: ConvNchwcHalvesTactic(spec, w, b, (True, True), threads=1),
                    "h8_blocks": lambda: ConvNchwcHalvesOmpTactic(spec, w, b, (True, True), threads=2),
                    "h8_rows": lambda: ConvNchwcHalvesRowsTactic(spec, w, b, (True, True), threads=2)}
            names = ["one"] + [k for k in args.ways.split(",") if k != "one"]
            ways = {k: make[k]() for k in names}
            x = to_blocked(rng.standard_normal(xs).astype(np.float32), 16)
            outs = {k: np.zeros(t.out_shape, np.float32) for k, t in ways.items()}
            med = {k: [] for k in ways}
            cpu = {k: [] for k in ways}
            for _ in range(args.rounds):
                for k, t in ways.items():
                    with threads.timing_on_team():
                        t._run(x, outs[k], None)
                        ts = []
                        c0 = time.process_time()
                        for _ in range(args.calls):
                            t0 = time.perf_counter()
                            t._run(x, outs[k], None)
                            ts.append(time.perf_counter() - t0)
                        cpu[k].append((time.process_time() - c0) / args.calls)
                    med[k].append(statistics.median(ts))
            assert all(np.array_equal(outs["one"], o) for o in outs.values()), "a split's bits differ"
            best = {k: min(v) * 1e6 for k, v in med.items()}
            print(f"{xs} -> {O} s{s}: " + "  ".join(
                f"{k} {best[k]:.0f}/{statistics.median(med[k]) * 1e6:.0f} ({best[k] / best['one']:.2f}x, "
                f"cpu {statistics.median(cpu[k]) * 1e6:.0f})" for k in ways), flush=True)
    print(f"load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""trt_like's ``permute`` tactics side by side on the permutes of the benchmark models, and torch's
``permute().contiguous()`` as the peer: ``python -m benchmarks.permute_copy [--rounds 7] [--calls 200]``.

One process, one thread, the ways interleaved per round; best-round mean CPU time per call (µs)
and the ratio to numpy's transposed copy (the ``numpy`` tactic). ``transpose_tiles`` is
``tactics/data.py``'s 8 x 8 register-block copy of a permute that is a batch of matrix transposes.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

#: (label, input shape, perm): detection_head's three decoding permutes, audio_conv1d's
#: ``transpose(1, 2)``, NCHW -> NHWC of a few conv maps
CASES = [("detection_head 75x32x32", (1, 3, 25, 32, 32), (0, 1, 3, 4, 2)),
         ("detection_head 75x16x16", (1, 3, 25, 16, 16), (0, 1, 3, 4, 2)),
         ("detection_head 75x8x8", (1, 3, 25, 8, 8), (0, 1, 3, 4, 2)),
         ("audio_conv1d 128x49", (1, 128, 49), (0, 2, 1)),
         ("NCHW->NHWC 64x56x56", (1, 64, 56, 56), (0, 2, 3, 1)),
         ("NCHW->NHWC 128x32x32", (1, 128, 32, 32), (0, 2, 3, 1)),
         ("NCHW->NHWC 256x14x14", (1, 256, 14, 14), (0, 2, 3, 1))]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200)
    a = ap.parse_args(argv)
    import torch

    from srcore_trt_like.kernels.layout_copy import transpose_tiles
    from srcore_trt_like.tactics.data import batched_transpose

    torch.set_num_threads(1)
    print(f"{'permute':26s} {'numpy':>8s} {'tiles':>8s} {'torch':>8s}  tiles/numpy torch/numpy (µs, CPU time, 1 thread)")
    for label, shape, perm in CASES:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        out = np.empty(x.transpose(perm).shape, np.float32)
        bmn = batched_transpose(perm, shape)
        xt = torch.from_numpy(x)
        ways = {"numpy": lambda: np.copyto(out, x.transpose(perm)),
                "tiles": lambda: transpose_tiles(x, out, *bmn),
                "torch": lambda: xt.permute(perm).contiguous()}
        best = {k: float("inf") for k in ways}
        for f in ways.values():
            f()
        for _ in range(a.rounds):
            for k, f in ways.items():
                t0 = time.process_time_ns()     # (one clock read a round: it is a system call here)
                for _ in range(a.calls):
                    f()
                best[k] = min(best[k], (time.process_time_ns() - t0) / a.calls / 1e3)
        print(f"{label:26s} {best['numpy']:8.1f} {best['tiles']:8.1f} {best['torch']:8.1f}  "
              f"{best['tiles'] / best['numpy']:11.2f} {best['torch'] / best['numpy']:11.2f}", flush=True)


if __name__ == "__main__":
    main()

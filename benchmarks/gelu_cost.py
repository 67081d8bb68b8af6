"""The cpu plugin's compiled exact GELU against torch's, one thread, thread CPU time, interleaved:
``python -m benchmarks.gelu_cost [--rounds 9]``.

Per shape (audio_conv1d's seven GELUs and a transformer's 128x1024) three figures, each the best
round's per-call time: ``warm``, the kernel into one output buffer reused every call (in cache
where it fits); ``cold``, into the next of a ring of output buffers totalling over 32 MB (its lines
come from memory, as a planned buffer last used a whole model ago does); ``torch``,
``torch.nn.functional.gelu`` allocating its output as eager does. The arithmetic's cost is the warm
figure; the cold one is what the kernel pays inside a model run when its output buffer is cold.
"""
from __future__ import annotations

import argparse

import numpy as np

SHAPES = [(1, 128, n) for n in (3199, 1599, 799, 399, 199, 99, 49)] + [(128, 1024)]
_RING_BYTES = 32 << 20


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    import torch

    from srcore.plugin import clock
    from srcore_cpu.kernels import jit_pointwise as JP
    torch.set_num_threads(1)
    run = JP.make_pointwise(JP._gelu_erf, 0.0, 0.0, None, threads=1)
    print(f"{'shape':>16} {'warm us':>8} {'cold us':>8} {'torch us':>9} {'warm/torch':>10} {'cold/torch':>10}")
    for shape in SHAPES:
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        xt = torch.from_numpy(x)
        warm = np.empty_like(x)
        ring = [np.zeros_like(x) for _ in range(max(2, _RING_BYTES // x.nbytes))]
        pos = [0]

        def cold():
            pos[0] = (pos[0] + 1) % len(ring)
            run(x, ring[pos[0]])
        fns = {"warm": lambda: run(x, warm), "cold": cold, "torch": lambda: torch.nn.functional.gelu(xt)}
        best = dict.fromkeys(fns, float("inf"))
        for _ in range(args.rounds):
            for k, fn in fns.items():
                best[k] = min(best[k], clock.per_call_ns(fn, args.reps, "cpu") / 1e3)
        print(f"{str(shape):>16} {best['warm']:8.1f} {best['cold']:8.1f} {best['torch']:9.1f} "
              f"{best['warm'] / best['torch']:10.2f} {best['cold'] / best['torch']:10.2f}", flush=True)


if __name__ == "__main__":
    main()

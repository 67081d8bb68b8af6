"""bert_encoder's products at 2 threads, each way the cpu plugin can run them, beside torch's:
``python -m benchmarks.native_split_ab [--threads 2] [--rounds 15] [--gap-us 20]``.

One process, intra-op threads set before numpy and torch load (``OMP/OPENBLAS/MKL_NUM_THREADS``,
``torch.set_num_threads``). Per product (bert_encoder's d x d projection, its feed-forward pair, the
attention's ``q @ k^T`` and ``probs @ v`` on the heads' transposed views): one thread (numpy's BLAS
held at one thread on the caller), the part pool's split (Python parts, :mod:`.linear_split` /
:mod:`.split_gemm`), the native team's splits (:mod:`.native_team`: parts calling OpenBLAS without the
GIL), and torch's product at the same thread count. Rounds alternate the variants; each call follows
``--gap-us`` of one-thread work (a model's small nodes between its products: the workers' wait is
part of what is measured). Printed: each variant's best-round median in µs and its ratio to one
thread and to torch.
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=30, help="calls per variant and round")
    ap.add_argument("--gap-us", type=float, default=20.0, help="one-thread work before each call (µs)")
    args = ap.parse_args(argv)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    from srcore.ir.types import TensorType
    from srcore_cpu.kernels import linalg, linear_split as LS, parallel as P, split_gemm as SG
    from srcore_cpu.kernels.pointwise_match import compiled_inplace

    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s, dtype=np.float32)   # noqa: E731
    gelu = compiled_inplace("gelu:none", TensorType("float32", (128, 1024)), approximate="none")
    cases = []
    for name, (m, k, n), act_, tact in (("proj 128x256x256", (128, 256, 256), None, None),
                                        ("ff1+gelu 128x256x1024", (128, 256, 1024), gelu, F.gelu),
                                        ("ff2 128x1024x256", (128, 1024, 256), None, None)):
        w, b, x = r(n, k), r(n), r(m, k)
        wT = linalg.transposed(w)
        one = P.on_caller(LS.plain(wT, b, act_))
        v = {"one": one}
        py = LS.make_rows(wT, b, act_, (m, k), args.threads, LS.plain(wT, b, act_))
        if py is not None:
            v["part pool"] = P.on_caller(py)
        v.update(LS.native_candidates(wT, b, (m, k), args.threads, LS.plain(wT, b, act_), act_))
        tw, tb, tx = torch.from_numpy(w), torch.from_numpy(b), torch.from_numpy(x)
        out = np.empty((m, n), np.float32)
        calls = {key: (lambda f=f, x=x, out=out: f(x, out)) for key, f in v.items()}
        calls["torch"] = (lambda tx=tx, tw=tw, tb=tb, tact=tact: F.linear(tx, tw, tb) if tact is None
                          else tact(F.linear(tx, tw, tb)))
        cases.append((name, calls))
    q, kk = r(1, 128, 256), r(1, 128, 256)
    heads = lambda t: t.reshape(1, 128, 4, 64).transpose(0, 2, 1, 3)   # noqa: E731
    for name, a, b in (("q@k^T 4x128x64x128", heads(q), heads(kk).swapaxes(-1, -2)),
                       ("probs@v 4x128x128x64", r(1, 4, 128, 128), heads(kk))):
        out = np.empty(a.shape[:-1] + (b.shape[-1],), np.float32)
        calls = {"one": (lambda a=a, b=b, out=out, f=P.on_caller(np.matmul): f(a, b, out=out))}
        py = SG.make(a.shape, b.shape, "float32", args.threads)
        if py is not None:
            calls["part pool"] = (lambda a=a, b=b, out=out, f=P.on_caller(py): f(a, b, out))
        nat = SG.native_matmul(a.shape, b.shape, args.threads)
        if nat is not None:
            calls["native"] = (lambda a=a, b=b, out=out, f=nat: f(a, b, out))
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)   # (the same transposed views as torch's heads)
        calls["torch"] = (lambda ta=ta, tb=tb: torch.matmul(ta, tb))
        cases.append((name, calls))

    g = r(48, 48)
    gap_reps = max(1, int(args.gap_us / 4))

    def gap():   # ~4 µs each: a small one-thread product
        for _ in range(gap_reps):
            np.dot(g, g)
    pc = time.perf_counter_ns
    print(f"threads {args.threads}, {args.rounds} rounds x {args.calls} calls, gap {args.gap_us} µs; "
          f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", flush=True)
    for name, calls in cases:
        best = {k: float("inf") for k in calls}
        for f in calls.values():
            for _ in range(5):
                f()
        order = list(calls)
        for i in range(args.rounds):
            for key in order[i % len(order):] + order[:i % len(order)]:
                f, ts = calls[key], []
                for _ in range(args.calls):
                    gap()
                    t = pc()
                    f()
                    ts.append(pc() - t)
                ts.sort()
                best[key] = min(best[key], ts[len(ts) // 2] / 1e3)
        cells = "  ".join(f"{k} {t:7.1f} ({t / best['one']:.2f}x one, {t / best['torch']:.2f}x torch)"
                          for k, t in best.items())
        print(f"{name:24s} {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

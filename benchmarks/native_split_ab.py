"""bert_encoder's products at 2 threads, each way the cpu plugin can run them, beside torch's:
``python -m benchmarks.native_split_ab [--threads 2] [--rounds 15] [--gap-us 20]``.

One process, intra-op threads set before numpy and torch load (``OMP/OPENBLAS/MKL_NUM_THREADS``,
``torch.set_num_threads``). Per product (bert_encoder's d x d projection, its feed-forward pair, the
attention's ``q @ k^T`` and ``probs @ v`` on the heads' transposed views): one thread (numpy's BLAS
held at one thread on the caller), the part pool's split (Python parts, :mod:`.linear_split` /
:mod:`.split_gemm`), the native team's splits (:mod:`.native_team`: parts calling OpenBLAS without the
GIL), and torch's product at the same thread count. Rounds alternate the variants; each call follows
``--gap-us`` of one-thread work (a model's small nodes between its products: the workers' wait is
part of what is measured). Last, transformer_block's fused encoder layer the same ways (one thread, its
tail on the part pool, its products on the native team: :mod:`.native_encoder`) beside torch's layer. Printed: each variant's best-round median in µs and its ratio to one
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

    cases.append(_encoder_case(args.threads, r))

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


def _encoder_case(threads: int, r):
    """transformer_block's fused encoder layer (``nn.TransformerEncoderLayer(256, 4, 1024)``, 1 x 128
    tokens): the cpu plugin's kernel on one thread (numpy's BLAS held there), with its tail split over
    the part pool, with its products on the native team (:mod:`.native_encoder`), and torch's layer."""
    import numpy as np
    import torch

    from srcore_cpu.kernels import attention as A, native_encoder as NE, parallel as P
    from srcore_cpu.kernels.linalg import transposed

    torch.manual_seed(5)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).eval()
    sa = layer.self_attn
    t = [p.detach().numpy() for p in (sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
                                      layer.norm1.weight, layer.norm1.bias, layer.norm2.weight, layer.norm2.bias,
                                      layer.linear1.weight, layer.linear1.bias, layer.linear2.weight,
                                      layer.linear2.bias)]
    B, L = 1, 128
    ln_, softmax_ = A._compiled_or_numpy(np.dtype(np.float32))
    one = A.make_encoder_layer(256, 4, *t[:4], False, False, 1e-5, *t[4:], rows=B * L, shape=None)
    att = A._SelfAttention(256, 4, *t[:4], B * L, softmax_, None)
    w1, w2 = transposed(t[8]), transposed(t[10])
    x = r(B, L, 256)
    calls = {"one": (lambda: one(x))}
    from srcore_cpu.kernels import row_split as RS
    keep, RS.split_pays = RS.split_pays, (lambda *a, **k: True)
    try:   # (the tail split built whatever its timing)
        tail = A._split_tail(one, att, ln_, tuple(t[4:8]), 1e-5, False, False, w1, t[9], w2, t[11], None, (B, L))
    finally:
        RS.split_pays = keep
    if tail is not one:
        calls["part pool"] = (lambda: tail(x))
    nat = NE.make(att, ln_, tuple(t[4:8]), 1e-5, False, False, w1, t[9], w2, t[11], None, (B, L), one)
    if nat is not None:
        calls["native"] = (lambda: nat(x))
    tx = torch.from_numpy(x)
    calls["torch"] = (lambda: layer(tx))
    return f"encoder layer {B}x{L}x256", calls


if __name__ == "__main__":
    sys.exit(main())

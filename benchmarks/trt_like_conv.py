"""trt_like conv tactics on every conv layer of resnet_small, beside the cpu plugin and torch.

    .venv/bin/python -m benchmarks.trt_like_conv                  # 1 and 2 threads, table + network sums
    .venv/bin/python -m benchmarks.trt_like_conv --threads 1 --accuracy --markdown

Layers come from ``benchmarks.models.ResNetSmall`` (1x3x224x224, float32) with batch norm folded
into each conv's weight and bias, so a layer is conv + bias [+ residual add] [+ relu], fed with
the model's real activations. Per layer, interleaved in one process: every trt_like tactic
(``conv_tactics``), the cpu plugin (the layer as a one-conv ``srcore.StaticModule`` on backend
``cpu``, converted with ``srcore.from_torchscript``; its passes fuse the add and relu into the conv)
and torch eager (``conv2d`` + ``add_`` + ``relu_`` under ``inference_mode``). Each round times every
implementation of every layer ``--calls`` times; a figure is the **best-round median**. Rounds in
which other processes kept more than 0.1 core busy (``/proc/stat``) are counted and reported.
``--accuracy`` adds max|dy| / max|y| of every tactic against torch's float64 conv on the same data.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import time

import numpy as np

#: words of a tactic name and their abbreviation in the tables' column heads, applied in order
_ABBREV = (("winograd_f2x2", "F2"), ("winograd_f4x4", "F4"), ("depthwise_channels_last", "dwcl"),
           ("depthwise_direct", "dw"), ("depthwise_", "dw"), ("pointwise_", "pw"), ("simd_direct", "sd"),
           ("im2col_gemm", "im2col"), ("gemm_1x1", "1x1"), ("packed_gemm", "pk"), ("_packed", "pk"),
           ("_blocked", "blk"), ("_rows", "rows"), ("_split", "split"), ("_team", "team"),
           ("+max_pool", "+mp"))


def tactic_order() -> list[str]:
    """The conv tactics in trt_like's own order (``options.CONV_TACTICS``, then their max-pool
    fusions), so a new tactic shows up here without an edit."""
    from srcore_trt_like.options import CONV_TACTICS
    return [*CONV_TACTICS, *(f"{c}+max_pool" for c in CONV_TACTICS)]


def short(name: str) -> str:
    """A tactic's column head: its name with the words of ``_ABBREV`` shortened (any name works)."""
    for word, abbrev in _ABBREV:
        name = name.replace(word, abbrev)
    return name


def _fold(conv, bn):
    import torch
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    w = (conv.weight * s.reshape(-1, 1, 1, 1)).detach().numpy().astype(np.float32)
    return w, (bn.bias - bn.running_mean * s).detach().numpy().astype(np.float32)


def resnet_conv_layers():
    """``[dict(name, x, w, b, stride, padding, relu, residual)]`` for every conv of resnet_small, in
    order, with batch norm folded and the input (and residual) the model really feeds it."""
    import torch

    from benchmarks.models import build_resnet_small
    m, (x,) = build_resnet_small()
    layers = []

    def add(name, conv, bn, inp, relu, residual=None):
        w, b = _fold(conv, bn)
        layers.append(dict(name=name, x=np.ascontiguousarray(inp.numpy()), w=w, b=b, stride=conv.stride,
                           padding=conv.padding, relu=relu,
                           residual=None if residual is None else np.ascontiguousarray(residual.numpy())))

    with torch.inference_mode():
        add("conv1", m.conv1, m.bn1, x, True)
        h = m.maxpool(torch.relu(m.bn1(m.conv1(x))))
        for li, layer in enumerate([m.layer1, m.layer2, m.layer3, m.layer4], 1):
            for bi, blk in enumerate(layer):
                name = f"layer{li}.{bi}"
                add(name + ".conv1", blk.conv1, blk.bn1, h, True)
                a = torch.relu(blk.bn1(blk.conv1(h)))
                idt = h
                if blk.down is not None:
                    add(name + ".down", blk.down[0], blk.down[1], h, False)
                    idt = blk.down(h)
                add(name + ".conv2", blk.conv2, blk.bn2, a, True, idt)
                h = blk(h)
    return layers


def _spec(layer):
    from srcore_trt_like.conv import ConvSpec
    return ConvSpec(layer["x"].shape, layer["w"].shape[0], layer["w"].shape[2:], layer["stride"], layer["padding"],
                    relu=layer["relu"], residual=layer["residual"] is not None)


def _torch_call(layer):
    import torch
    F = torch.nn.functional
    x, w, b = (torch.from_numpy(layer[k]) for k in ("x", "w", "b"))
    r = None if layer["residual"] is None else torch.from_numpy(layer["residual"])
    st, pad, relu = layer["stride"], layer["padding"], layer["relu"]

    def call():
        with torch.inference_mode():
            y = F.conv2d(x, w, b, st, pad)
            if r is not None:
                y.add_(r)
            if relu:
                y.relu_()
        return y
    return call


def _cpu_call(layer):
    """The layer as a one-conv srcore model on backend cpu (the cpu plugin's conv kernel)."""
    import torch

    import srcore
    w, b = layer["w"], layer["b"]
    conv = torch.nn.Conv2d(w.shape[1], w.shape[0], w.shape[2:], layer["stride"], layer["padding"])
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(w))
        conv.bias.copy_(torch.from_numpy(b))
    relu = layer["relu"]

    class Conv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x):
            y = self.conv(x)
            return torch.relu(y) if relu else y

    class ConvAddRelu(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x, r):
            return torch.relu(self.conv(x) + r)

    x = layer["x"]
    if layer["residual"] is None:
        model = srcore.from_torchscript(Conv().eval(), (torch.from_numpy(x),))
        sm = srcore.StaticModule(model, backends=("cpu",))
        return lambda: sm(x)
    r = layer["residual"]
    model = srcore.from_torchscript(ConvAddRelu().eval(), (torch.from_numpy(x), torch.from_numpy(r)))
    sm = srcore.StaticModule(model, backends=("cpu",))
    return lambda: sm(x, r)


def pool_impls():
    """resnet_small's two pools (max 3x3/2 pad 1 after the stem, global average before the fc) as
    ``{(pool, runner): call}`` for trt_like, the cpu plugin (one-op StaticModule) and torch."""
    import torch

    import srcore
    from srcore_trt_like.conv.pool import AdaptiveAvgPool2d, MaxPool2d
    rng = np.random.default_rng(0)
    impls = {}
    for name, shape, trt, mod in [
            ("max_pool2d 3/2 p1", (1, 64, 112, 112), lambda s: MaxPool2d(s, 3, 2, 1), torch.nn.MaxPool2d(3, 2, 1)),
            ("adaptive_avg_pool2d 1", (1, 512, 7, 7), lambda s: AdaptiveAvgPool2d(s, 1), torch.nn.AdaptiveAvgPool2d(1))]:
        x = np.maximum(rng.standard_normal(shape, np.float32), 0)
        p = trt(shape)
        out = np.empty(p.out_shape, np.float32)
        impls[(name, "trt_like")] = (lambda p=p, x=x, out=out: p(x, out))
        sm = srcore.StaticModule(srcore.from_torchscript(mod.eval(), (torch.from_numpy(x),)), backends=("cpu",))
        impls[(name, "cpu")] = (lambda sm=sm, x=x: sm(x))
        xt = torch.from_numpy(x)

        def call(mod=mod, xt=xt):
            with torch.inference_mode():
                return mod(xt)
        impls[(name, "torch")] = call
    return impls


def _busy_seconds() -> float | None:
    """CPU seconds the machine has been busy (``/proc/stat``: all but idle and iowait)."""
    try:
        with open("/proc/stat") as f:
            v = [int(t) for t in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


def measure(impls: dict, rounds: int, calls: int):
    """``{key: best-round median seconds}`` for ``impls`` {key: call}, all interleaved round by round;
    also how many rounds other processes disturbed (> 0.1 core busy besides this process)."""
    best = {k: float("inf") for k in impls}
    disturbed = 0
    keys = list(impls)
    for r in range(rounds):
        gc.disable()
        b0, o0, w0 = _busy_seconds(), _own_seconds(), time.perf_counter()
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            f = impls[k]
            ts = []
            for _ in range(calls):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
            best[k] = min(best[k], statistics.median(ts))
        b1, o1, w1 = _busy_seconds(), _own_seconds(), time.perf_counter()
        gc.enable()
        if b0 is not None and ((b1 - b0) - (o1 - o0)) / (w1 - w0) > 0.1:
            disturbed += 1
    return best, disturbed


def _rel_err(got, ref):
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def accuracy_rows(layers, tactics_per_layer):
    """Per layer: max|dy| / max|y| of every tactic and of torch's float32 conv vs torch float64."""
    import torch
    F = torch.nn.functional
    rows = []
    for layer, tactics in zip(layers, tactics_per_layer):
        t64 = {k: torch.from_numpy(layer[k].astype(np.float64)) for k in ("x", "w", "b")}
        ref = F.conv2d(t64["x"], t64["w"], t64["b"], layer["stride"], layer["padding"])
        if layer["residual"] is not None:
            ref = ref + torch.from_numpy(layer["residual"].astype(np.float64))
        if layer["relu"]:
            ref = torch.relu(ref)
        ref = ref.numpy()
        row = {"torch_f32": _rel_err(_torch_call(layer)().numpy(), ref)}
        for t in tactics:
            out = np.empty(t.out_shape, np.float32)
            t(layer["x"], out, layer["residual"])
            row[t.name] = _rel_err(out, ref)
        rows.append(row)
    return rows


def run(threads: int, rounds: int, calls: int, layers):
    from threadpoolctl import threadpool_limits

    import torch
    from srcore_trt_like.conv import conv_tactics
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads, user_api="blas"):
        tactics = [conv_tactics(_spec(L), L["w"], L["b"]) for L in layers]
        impls = {}
        for i, (L, ts) in enumerate(zip(layers, tactics)):
            for t in ts:
                out = np.empty(t.out_shape, np.float32)
                impls[(i, t.name)] = (lambda t=t, x=L["x"], out=out, r=L["residual"]: t(x, out, r))
            impls[(i, "cpu")] = _cpu_call(L)
            impls[(i, "torch")] = _torch_call(L)
        impls.update(pool_impls())
        for f in impls.values():
            f()
        best, disturbed = measure(impls, rounds, calls)
    return tactics, best, disturbed


def stack(layers, thread_counts, rounds: int):
    """The 20 convs back to back (each layer's input and residual fixed, as an engine calls them):
    trt_like with the tactic ``time_tactics`` picks per layer at each thread count (BLAS threads;
    the numba passes run on the calling thread), the cpu plugin's one-conv modules and torch, all
    interleaved round by round. Unlike the per-layer table (a layer called a few times in a row,
    its weights in cache), every layer here finds the previous layer's data in cache, not its own.
    Returns ``{(runner, threads): (best-round median seconds, trt_like picks)}`` and the number of
    disturbed rounds."""
    from threadpoolctl import threadpool_limits

    import torch
    from srcore_trt_like.conv import conv_tactics
    from srcore_trt_like.tactics.timing import time_tactics
    runs, picks = {}, {}
    for th in thread_counts:
        with threadpool_limits(limits=th, user_api="blas"):
            chosen = []
            for L in layers:
                spec = _spec(L)
                ts = conv_tactics(spec, L["w"], L["b"])
                name = time_tactics(ts, spec, rounds=3)[0][0]
                t = next(t for t in ts if t.name == name)
                chosen.append((t, L["x"], np.empty(t.out_shape, np.float32), L["residual"]))
        picks[th] = [c[0].name for c in chosen]

        def run_stack(chosen=chosen, th=th):
            with threadpool_limits(limits=th, user_api="blas"):
                for t, x, out, r in chosen:
                    t(x, out, r)
        runs[("trt_like", th)] = run_stack
        with threadpool_limits(limits=th, user_api="blas"):      # the cpu plugin picks its algorithm at load
            cpu_calls = [_cpu_call(L) for L in layers]
        torch_calls = [_torch_call(L) for L in layers]

        def run_cpu(calls=cpu_calls, th=th):
            with threadpool_limits(limits=th, user_api="blas"):
                for f in calls:
                    f()

        def run_torch(calls=torch_calls, th=th):
            torch.set_num_threads(th)
            for f in calls:
                f()
        runs[("cpu", th)], runs[("torch", th)] = run_cpu, run_torch
    best, disturbed = measure(runs, rounds, 5)
    return {key: (sec, picks.get(key[1]) if key[0] == "trt_like" else None) for key, sec in best.items()}, disturbed


def _ms(s):
    return "–" if s is None else f"{s * 1e3:.3f}"


def report(layers, tactics, best, disturbed, rounds, threads, markdown):
    order = tactic_order()
    offered = {t.name for ts in tactics for t in ts}
    names = [n for n in order if n in offered] + sorted(offered - set(order))
    head = ["layer", "x", "k/s", "MMAC"] + [short(n) for n in names] + ["best", "cpu", "torch", "best/cpu",
                                                                         "best/torch"]
    rows = []
    sums = {k: 0.0 for k in ["best", "best_openblas", "best_no_f4", "im2col_only", "cpu", "torch"]}
    for i, (L, ts) in enumerate(zip(layers, tactics)):
        spec = ts[0].spec
        got = {t.name: best[(i, t.name)] for t in ts}
        name, t_best = min(got.items(), key=lambda p: p[1])
        no_f4 = min(v for k, v in got.items() if not k.startswith("winograd_f4x4"))
        sums["best_openblas"] += min(best[(i, t.name)] for t in ts if t.uses_blas)
        cpu, tor = best[(i, "cpu")], best[(i, "torch")]
        sums["best"] += t_best
        sums["best_no_f4"] += no_f4
        sums["im2col_only"] += got["im2col_gemm"]
        sums["cpu"] += cpu
        sums["torch"] += tor
        rows.append([L["name"], "x".join(map(str, spec.x_shape[1:])),
                     f"{spec.kernel[0]}/{spec.stride[0]}{'+r' if spec.residual else ''}", f"{spec.macs / 1e6:.0f}"]
                    + [_ms(got.get(n)) for n in names] + [short(name), _ms(cpu), _ms(tor),
                                                          f"{t_best / cpu:.2f}", f"{t_best / tor:.2f}"])
    print(f"\n## {threads} thread{'s' if threads > 1 else ''} (best-round median of {rounds} rounds, ms; "
          f"{disturbed} of {rounds} rounds had > 0.1 core busy elsewhere)\n")
    _table(head, rows, markdown)
    print()
    tot = [["trt_like, fastest tactic per layer", _ms(sums["best"]), f"{sums['best'] / sums['torch']:.2f}",
            f"{sums['best'] / sums['cpu']:.2f}"],
           ["trt_like, BLAS tactics only (uses_blas)", _ms(sums["best_openblas"]),
            f"{sums['best_openblas'] / sums['torch']:.2f}", f"{sums['best_openblas'] / sums['cpu']:.2f}"],
           ["trt_like without winograd_f4x4*", _ms(sums["best_no_f4"]), f"{sums['best_no_f4'] / sums['torch']:.2f}",
            f"{sums['best_no_f4'] / sums['cpu']:.2f}"],
           ["trt_like im2col_gemm everywhere", _ms(sums["im2col_only"]), f"{sums['im2col_only'] / sums['torch']:.2f}",
            f"{sums['im2col_only'] / sums['cpu']:.2f}"],
           ["cpu plugin (one-conv StaticModules)", _ms(sums["cpu"]), f"{sums['cpu'] / sums['torch']:.2f}", "1.00"],
           ["torch eager (conv2d + add_ + relu_)", _ms(sums["torch"]), "1.00", f"{sums['torch'] / sums['cpu']:.2f}"]]
    _table(["sum over the 20 convs", "ms", "÷ torch", "÷ cpu"], tot, markdown)
    print()
    pools = list(dict.fromkeys(k[0] for k in best if isinstance(k[0], str)))
    _table(["pool", "trt_like", "cpu", "torch"],
           [[p] + [_ms(best[(p, r)]) for r in ("trt_like", "cpu", "torch")] for p in pools], markdown)
    return sums


def _table(head, rows, markdown):
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
    for r in [head] + rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2", help="intra-op thread counts (BLAS and torch), e.g. 1,2")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=5, help="calls per implementation and round")
    ap.add_argument("--accuracy", action="store_true", help="also print every tactic's error vs float64")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--stack", action="store_true",
                    help="instead of per-layer tables: the 20 convs back to back at each thread count")
    args = ap.parse_args(argv)
    layers = resnet_conv_layers()
    if args.stack:
        return _main_stack(layers, [int(t) for t in args.threads.split(",")], args.rounds, args.markdown)
    totals = {}
    tactics = None
    for th in [int(t) for t in args.threads.split(",")]:
        tactics, best, disturbed = run(th, args.rounds, args.calls, layers)
        totals[th] = report(layers, tactics, best, disturbed, args.rounds, th, args.markdown)
    if len(totals) > 1:
        a, b = sorted(totals)[:2]
        print(f"\n{a} -> {b} threads, sum over the convs: "
              + ", ".join(f"{k} {totals[a][k] * 1e3:.2f} -> {totals[b][k] * 1e3:.2f} ms "
                          f"({totals[a][k] / totals[b][k]:.2f}x)" for k in ("best", "cpu", "torch")))
    if args.accuracy:
        rows = accuracy_rows(layers, tactics)
        names = ["torch_f32"] + [n for n in tactic_order() if any(n in r for r in rows)]
        print("\n## max|dy| / max|y| against torch's float64 conv (same inputs)\n")
        _table(["layer"] + [short(n) for n in names],
               [[L["name"]] + [f"{r[n]:.1e}" if n in r else "–" for n in names] for L, r in zip(layers, rows)],
               args.markdown)
    return 0


def _main_stack(layers, thread_counts, rounds, markdown):
    res, disturbed = stack(layers, thread_counts, rounds)
    rows = []
    for th in thread_counts:
        sec, picks = res[("trt_like", th)]
        counts = {n: picks.count(n) for n in dict.fromkeys(picks)}
        cpu, tor = res[("cpu", th)][0], res[("torch", th)][0]
        rows.append([str(th), _ms(sec), _ms(cpu), _ms(tor), f"{sec / cpu:.2f}", f"{sec / tor:.2f}",
                     " ".join(f"{short(n)}:{c}" for n, c in counts.items())])
    if len(thread_counts) > 1:
        a, b = thread_counts[:2]
        rows.append([f"{a}->{b}"] + [f"{res[(r, a)][0] / res[(r, b)][0]:.2f}x" for r in ("trt_like", "cpu", "torch")]
                    + ["", "", ""])
    print(f"\n## the 20 convs back to back (best-round median of {rounds} rounds, ms; {disturbed} of {rounds} "
          f"rounds had > 0.1 core busy elsewhere)\n")
    _table(["threads", "trt_like", "cpu plugin", "torch", "trt_like/cpu", "trt_like/torch", "trt_like tactics"],
           rows, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Mobile nets outside the benchmark set, for the NCHW16c layout of trt_like (issue 16: the project is
checked on other models of each family): ``python -m benchmarks.mobile_variants [--rounds 7]``.

Two nets written here with random weights (BatchNorm statistics perturbed so it is not an identity):
a MobileNetV2-like one (inverted residuals with ReLU6, no squeeze-excite) and an EfficientNet-B0-like
one (SiLU, 5x5 depthwise convs, squeeze-excite with a sigmoid gate), 224x224, batch 1. For each: the
relative error of trt_like against torch with the layout on and off, how many layers run in NCHW16c,
and CPU time per call (best-round medians, rounds alternating) of trt_like, trt_like with
``engine_options={"nchwc": False}`` and ONNX Runtime on the exported ONNX file, at 1 thread.
"""
from __future__ import annotations

import argparse
import io
import time
import warnings


def _nets():
    import torch

    nn = torch.nn

    class IR(nn.Module):
        def __init__(self, cin, cout, t, s, k, act, se):
            super().__init__()
            h = cin * t
            layers = [] if t == 1 else [nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), act()]
            layers += [nn.Conv2d(h, h, k, s, k // 2, groups=h, bias=False), nn.BatchNorm2d(h), act()]
            self.body = nn.Sequential(*layers)
            r = max(8, cin // 4)
            self.se = (nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(h, r, 1), nn.SiLU(), nn.Conv2d(r, h, 1),
                                     nn.Sigmoid()) if se else None)
            self.proj = nn.Sequential(nn.Conv2d(h, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.res = s == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            if self.se is not None:
                y = y * self.se(y)
            y = self.proj(y)
            return x + y if self.res else y

    def net(cfg, act, se, stem=32, last=1280):
        layers, c = [nn.Conv2d(3, stem, 3, 2, 1, bias=False), nn.BatchNorm2d(stem), act()], stem
        for t, co, n, s, k in cfg:
            for i in range(n):
                layers.append(IR(c, co, t, s if i == 0 else 1, k, act, se))
                c = co
        layers += [nn.Conv2d(c, last, 1, bias=False), nn.BatchNorm2d(last), act(), nn.AdaptiveAvgPool2d(1),
                   nn.Flatten(), nn.Linear(last, 1000)]
        return nn.Sequential(*layers)

    # (expansion, out channels, blocks, stride of the first, depthwise kernel)
    v2 = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 3, 2, 3), (6, 64, 4, 2, 3), (6, 96, 3, 1, 3),
          (6, 160, 3, 2, 3), (6, 320, 1, 1, 3)]
    b0 = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5),
          (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]
    return {"mobilenet_v2_like": lambda: net(v2, nn.ReLU6, False),
            "efficientnet_b0_like": lambda: net(b0, nn.SiLU, True)}


def _best(fn, rounds_times):
    ts = []
    for _ in range(10):
        t = time.process_time_ns()
        fn()
        ts.append(time.process_time_ns() - t)
    rounds_times.append(sorted(ts)[5] / 1e3)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    import numpy as np
    import onnxruntime as ort
    import threadpoolctl
    import torch

    import srcore

    threadpoolctl.threadpool_limits(1)
    torch.set_num_threads(1)
    for name, make in _nets().items():
        torch.manual_seed(0)
        m = make().eval()
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
        x = torch.randn(1, 3, 224, 224)
        with torch.no_grad():
            want = m(x).numpy()
        model = srcore.from_torchscript(torch.jit.script(m), (x,))
        xs = x.numpy()
        runs = {f"trt_like{'' if on else '_nchw'}": srcore.StaticModule(model, options=srcore.Options(
            backends=("trt_like", "cpu"), engine_options={"nchwc": on})) for on in (True, False)}
        line = [name]
        for r, sm in runs.items():
            err = float(np.abs(sm(xs) - want).max() / np.abs(want).max())
            blocked = sum("nchw16c" in s for e in sm.partition.engines for s in e.description.splitlines())
            line.append(f"{r}: rel err {err:.1e}, {blocked} NCHW16c layers")
        buf = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(m, (x,), buf, input_names=["x"], dynamo=False)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(buf.getvalue(), so, providers=["CPUExecutionProvider"])
        runs["ort"] = type("S", (), {"__call__": lambda self, a: sess.run(None, {"x": a})})()
        times = {r: [] for r in runs}
        for _ in range(args.rounds):
            for r, fn in runs.items():
                _best(lambda fn=fn: fn(xs), times[r])
        best = {r: min(v) for r, v in times.items()}
        line.append("   ".join(f"{r} {v:.0f} µs" for r, v in best.items()))
        line.append(f"trt_like÷ort {best['trt_like'] / best['ort']:.2f}x   "
                    f"trt_like_nchw÷ort {best['trt_like_nchw'] / best['ort']:.2f}x")
        print("\n  ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

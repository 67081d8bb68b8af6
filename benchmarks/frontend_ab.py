"""from_onnx against from_torchscript on the same bench model, in one process, rounds alternating:
``python -m benchmarks.frontend_ab [--models a,b] [--rounds 15] [--out DIR]``.

The benchmark command (``benchmarks.run --runners srcore_codegen_standard,srcore_onnx,ort``) times
each runner in its own process, one after the other; on a machine that other jobs load, the two
srcore cells of a model can land in different phases of that load. Here both converted models
(``model.srm`` from TorchScript, ``model_onnx.srm`` from the exported ``model.onnx``, both
prepared by ``benchmarks.prepare``) run in one process, one thread, codegen + standard_resizing,
alternating round by round, and the ratio of their best-round medians is printed: the cost of the
ONNX path against the TorchScript path under the same load.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(models, rounds: int, out: Path) -> list[dict]:
    from threadpoolctl import threadpool_limits

    import srcore

    from .artifacts import flatten_outputs, load_inputs, load_refs, max_rel_err
    from .prepare import prepare

    rows = []
    with threadpool_limits(1):
        for name in models:
            prepare(name, out)
            art = out / "artifacts" / name
            _, xs = load_inputs(art)
            refs = load_refs(art)
            rts = {}
            for label, srm in (("torchscript", "model.srm"), ("onnx", "model_onnx.srm")):
                sm = srcore.StaticModule(srcore.load(str(art / srm)))
                rt = sm.runtime()
                err = max_rel_err(flatten_outputs(rt(*xs)), refs)
                assert err <= 1e-4, f"{name} {label}: wrong output (max relative error {err:.2e})"
                rts[label] = (sm, rt)
            t0 = time.perf_counter()
            rts["torchscript"][1](*xs)
            calls = max(3, min(2000, int(0.1 / max(time.perf_counter() - t0, 1e-6))))
            best = {k: float("inf") for k in rts}
            gc.disable()
            try:
                for r in range(rounds):
                    for label in (("torchscript", "onnx") if r % 2 == 0 else ("onnx", "torchscript")):
                        rt = rts[label][1]
                        times = []
                        for _ in range(calls):
                            t = time.perf_counter_ns()
                            rt(*xs)
                            times.append(time.perf_counter_ns() - t)
                        times.sort()
                        best[label] = min(best[label], times[len(times) // 2] / 1e3)
            finally:
                gc.enable()
            nodes = {k: sm.num_nodes for k, (sm, _) in rts.items()}
            rows.append({"model": name, "torchscript_us": best["torchscript"], "onnx_us": best["onnx"],
                         "ratio": best["onnx"] / best["torchscript"], "nodes": nodes})
            print(f"{name:28s} from_torchscript {best['torchscript']:11.1f} µs   from_onnx {best['onnx']:11.1f} µs"
                  f"   onnx/ts {best['onnx'] / best['torchscript']:.2f}x   nodes {nodes['torchscript']} / "
                  f"{nodes['onnx']}", flush=True)
    return rows


def main(argv=None) -> int:
    from .models import MODELS

    ap = argparse.ArgumentParser(prog="python -m benchmarks.frontend_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    measure(args.models.split(","), args.rounds, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

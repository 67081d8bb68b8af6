"""Load time with shape propagation run once (later propagations reuse the unchanged nodes' facts)
against every propagation a full one, as loads did before: the same model, the same process, the two
modes interleaved round by round.

    python -m benchmarks.load_propagation [--models mlp_tiny,...] [--backends cpu/trt_like,cpu/...]
                                          [--rounds 9] [--json FILE]

Per model and backend list: full propagations per load and rules evaluated (reuse on / off), and
medians of the time of ``StaticModule(model)``, of the CPU time spent in ``propagate`` during it, and
of its stages that propagate (passes, shapes, partition). The models are the bench models (``benchmarks.models``) converted from TorchScript in
this process (needs torch); the first load of each (plugins, imports, caches) is not timed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

DEFAULT_MODELS = "mlp_tiny,elementwise_chain,control_flow,mlp_wide,resnet_small,transformer_block"
DEFAULT_BACKENDS = "cpu/trt_like,cpu/quantized_cpu,cpu"
STAGES = ("passes", "shapes", "partition")


def _convert(name: str):
    import torch

    import srcore
    from .models import MODELS

    build, meta = MODELS[name]
    m, inputs = build()
    with torch.no_grad():
        ts = torch.jit.trace(m, inputs, check_trace=False) if meta["torchscript"] == "trace" else torch.jit.script(m)
    return srcore.from_torchscript(ts, inputs)


class _Modes:
    """Switches ``propagate`` between reusing facts (as loads do) and ignoring them (as before)."""

    def __init__(self):
        import srcore.ops.shapes as pkg
        import srcore.partition.specialize as spec
        from srcore.ops.shapes import interp

        self.pkg, self.interp, self.spec = pkg, interp, spec
        self.real, self.real_specialize = interp.propagate, spec.specialize
        self.full = self.evaluated = 0
        self.seconds = 0.0   # CPU time spent in propagate

    def use(self, reuse: bool) -> None:
        real, real_specialize = self.real, self.real_specialize

        def counted(*args, previous=None, **kwargs):
            t0 = time.process_time()   # CPU time: less disturbed by other processes than wall time
            r = real(*args, previous=previous if reuse else None, **kwargs)
            self.seconds += time.process_time() - t0
            self.full += previous is None or not reuse
            self.evaluated += r.evaluated
            return r

        def specialize(graph, shapes, known=None):   # an engine's segment: from the load's facts, or not
            return real_specialize(graph, shapes, known=known if reuse else None)
        self.pkg.propagate = self.interp.propagate = counted
        self.spec.specialize = specialize

    def restore(self) -> None:
        self.pkg.propagate = self.interp.propagate = self.real
        self.spec.specialize = self.real_specialize


def measure(model, backends: tuple[str, ...], rounds: int) -> dict:
    import srcore

    modes = _Modes()
    out = {}
    try:
        for reuse in (True, False):   # untimed: imports, engine caches
            modes.use(reuse)
            srcore.StaticModule(model, backends=backends)
        times: dict[bool, list] = {True: [], False: []}
        stages: dict[bool, list] = {True: [], False: []}
        propagating: dict[bool, list] = {True: [], False: []}
        counts = {}
        for _ in range(rounds):
            for reuse in (True, False):
                modes.use(reuse)
                modes.full = modes.evaluated = 0
                modes.seconds = 0.0
                t0 = time.perf_counter()
                sm = srcore.StaticModule(model, backends=backends)
                times[reuse].append(time.perf_counter() - t0)
                stages[reuse].append(sum(sm.load_stages.get(s, 0.0) for s in STAGES))
                counts[reuse] = (modes.full, modes.evaluated)
                propagating[reuse].append(modes.seconds)
    finally:
        modes.restore()
    for reuse, key in ((True, "once"), (False, "before")):
        out[key] = {"full_propagations": counts[reuse][0], "rules_evaluated": counts[reuse][1],
                    "load_ms_median": 1e3 * statistics.median(times[reuse]),
                    "load_ms_best": 1e3 * min(times[reuse]),
                    "propagating_stages_ms_median": 1e3 * statistics.median(stages[reuse]),
                    "propagate_ms_median": 1e3 * statistics.median(propagating[reuse])}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--backends", default=DEFAULT_BACKENDS, help="backend lists separated by '/'")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    print("| model | backends | full propagations (before → once) | rules evaluated | load ms, median "
          "(before → once) | CPU ms in propagate, median (before → once) | passes+shapes+partition ms, median "
          "(before → once) |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        model = _convert(name)
        for spec in args.backends.split("/"):
            backends = tuple(spec.split(","))
            r = measure(model, backends, args.rounds)
            b, o = r["before"], r["once"]
            rows.append({"model": name, "backends": backends, **r})
            print(f"| {name} | {'+'.join(backends)} | {b['full_propagations']} → {o['full_propagations']} "
                  f"| {b['rules_evaluated']} → {o['rules_evaluated']} "
                  f"| {b['load_ms_median']:.1f} → {o['load_ms_median']:.1f} "
                  f"| {b['propagate_ms_median']:.2f} → {o['propagate_ms_median']:.2f} "
                  f"| {b['propagating_stages_ms_median']:.1f} → {o['propagating_stages_ms_median']:.1f} |",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

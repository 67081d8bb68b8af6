"""Where a trt_like engine call's time goes beyond the sum of its layers, per model, one thread,
CPU time: ``python -m benchmarks.engine_gap [--models mobilenet_v3,detection_head] [--rounds 5]``.

For the first engine of each model (called on the inputs the module gives it):

* ``call``: the engine's plan function, median per round, best round;
* ``glue``: the same generated function with every kernel a no-op (arena lending, the input
  check, the calls themselves: what the plan adds around its layers);
* ``in sequence``: each layer timed as it comes in a run (on the buffers of one run, so each
  finds its weights and input as cold as in a real call), wall-clock medians summed;
* ``hot``: each layer repeated on its own (``Plan.profile``'s view), means summed;
* ``wrappers``: each layer with every numba kernel of ``srcore`` and ``srcore_trt_like`` replaced
  by a no-op (numpy and BLAS calls still run): the Python around the kernels, per layer kind.
  The kernels are patched while this runs (restored after), so it comes last, for all models.
  A layer whose numpy work reads a stubbed kernel's output computes on garbage there (the
  squeeze-excite's GEMVs on an uninitialized pooled buffer): its figure is not the wrapper's.

``call - hot`` is the gap; ``in sequence - hot`` is what cold caches cost; ``glue`` and the
wrappers' Python are what dispatch costs. Artifacts come from ``benchmarks.prepare``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
_now = time.process_time_ns


def _median_us(fn, args, n: int, rounds: int) -> float:
    """Median per call (best round); for calls of at least a millisecond (a CPU-clock read is a
    system call here: 2.6 µs on the Sapphire Rapids VM)."""
    best = float("inf")
    for _ in range(rounds):
        c = []
        for _ in range(n):
            t0 = _now()
            fn(*args)
            c.append(_now() - t0)
        best = min(best, float(np.median(c)))
    return best / 1e3


def _mean_us(fn, args, n: int, rounds: int) -> float:
    """Mean per call over ``n`` back-to-back calls (best round): µs-scale calls, one clock read
    per ``n``."""
    best = float("inf")
    for _ in range(rounds):
        t0 = _now()
        for _ in range(n):
            fn(*args)
        best = min(best, (_now() - t0) / n)
    return best / 1e3


def _noop(*args, **kwargs):
    return None


def _engine_plan(model: str, out: Path):
    """The model's module, the plan of its first engine and the inputs the module gives it."""
    import srcore

    from .artifacts import load_inputs
    from .prepare import prepare

    prepare(model, out)
    art = out / "artifacts" / model
    _, xs = load_inputs(art)
    sm = srcore.StaticModule(srcore.load(str(art / "model.srm")), options=srcore.Options(backends=("trt_like", "cpu")))
    return (sm, *engine_plan(sm, xs))


def engine_plan(sm, xs) -> tuple:
    """``(plan, its inputs)`` of the first trt_like engine of module ``sm`` on the inputs it gets from
    one call of ``sm(*xs)``, or ``(None, None)`` without an engine."""
    caught: list[tuple] = []

    def spy(frame, event, arg):   # the first engine call's arguments (x0, x1, ...)
        if event == "call" and frame.f_code.co_filename == "<trt_like engine>" and not caught:
            caught.append(tuple(frame.f_locals[f"x{i}"] for i in range(frame.f_code.co_argcount)))
    sys.setprofile(spy)
    try:
        sm(*xs)
    finally:
        sys.setprofile(None)
    engines = [pn.fn.fn for b in sm.blocks for pn in b.nodes if pn.fn is not None and hasattr(pn.fn.fn, "profile")]
    if not engines or not caught:
        return None, None
    shapes = tuple(tuple(x.shape) for x in caught[0])
    return engines[0].engine.plans[shapes], caught[0]


def _layer_args(plan, inputs) -> list[list | None]:
    """Each step's arguments on the buffers of one run (None for a view)."""
    net = plan.net
    vals = dict(net.constants)
    vals.update(zip(net.inputs, inputs))
    args: list[list | None] = []
    for step in plan.steps:
        layer = step.layer
        if step.fn is None:
            vals[layer.outputs[0]] = vals[layer.inputs[0]].reshape(net.shape(layer.outputs[0]))
            args.append(None)
            continue
        for t in layer.outputs:
            vals.setdefault(t, np.empty(net.shape(t), net.tensors[t].storage))
        args.append([vals[t] for t in (*layer.inputs, *layer.outputs)])
        step.fn(*args[-1])
    return args


def measure(model: str, out: Path, rounds: int) -> dict:
    import attrs

    from srcore_trt_like.builder.plan import Plan

    _, plan, inputs = _engine_plan(model, out)
    if plan is None:
        print(f"{model}: no trt_like engine in the module (every node on cpu)", flush=True)
        return None
    row = {"model": model, "layers": sum(s.fn is not None for s in plan.steps),
           "call": _median_us(plan.run, inputs, 200, rounds)}
    null = Plan(plan.net, [attrs.evolve(s, fn=None if s.fn is None else _noop) for s in plan.steps], plan.contexts)
    row["glue"] = _mean_us(null.run, inputs, 2000, rounds)
    args = _layer_args(plan, inputs)
    # in a run, one layer at a time: the wall clock (0.5 µs a read, its own cost subtracted),
    # medians over runs drop the preempted ones
    clock = time.perf_counter_ns
    tick = float(np.median([-clock() + clock() for _ in range(10000)]))
    seq = []
    for _ in range(100 * rounds):
        t = np.zeros(len(plan.steps))
        for i, (s, a) in enumerate(zip(plan.steps, args)):
            if a is not None:
                t0 = clock()
                s.fn(*a)
                t[i] = clock() - t0 - tick
        seq.append(t)
    row["in_sequence"] = float(np.median(np.array(seq), axis=0).sum() / 1e3)
    row["hot"] = sum(_mean_us(s.fn, a, 30, rounds) for s, a in zip(plan.steps, args) if a is not None)
    row["_plan"], row["_args"] = plan, args
    return row


def wrappers(rows: list[dict], rounds: int) -> None:
    """Stub every numba kernel, then time each layer again (``row["wrappers"]``: kind -> µs/layer)."""
    from numba.core.registry import CPUDispatcher

    patched = []
    for mod in [m for name, m in list(sys.modules.items()) if name.startswith("srcore") and m is not None]:
        for k, v in list(vars(mod).items()):
            if isinstance(v, CPUDispatcher):
                patched.append((mod, k, v))
                setattr(mod, k, _noop)
    try:
        for row in rows:
            kinds: dict[str, list[float]] = {}
            for s, a in zip(row["_plan"].steps, row["_args"]):
                if a is not None:
                    fn = _noop if isinstance(s.fn, CPUDispatcher) else s.fn
                    kinds.setdefault(f"{s.layer.kind}[{s.tactic}]", []).append(_mean_us(fn, a, 200, rounds))
            row["wrappers"] = {k: (len(v), sum(v) / len(v)) for k, v in kinds.items()}
    finally:
        for mod, k, v in patched:
            setattr(mod, k, v)


def main(argv=None) -> None:
    from threadpoolctl import threadpool_limits

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mobilenet_v3,detection_head,resnet_small")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = ap.parse_args(argv)
    with threadpool_limits(1):
        rows = [r for r in (measure(m, a.out, a.rounds) for m in a.models.split(",")) if r is not None]
        wrappers(rows, a.rounds)
    for r in rows:
        print(f"{r['model']}: {r['layers']} layers | call {r['call']:.0f} us | hot layers {r['hot']:.0f} us "
              f"(call/hot {r['call'] / r['hot']:.3f}) | in sequence {r['in_sequence']:.0f} us | glue {r['glue']:.1f} us")
        for k, (n, us) in sorted(r["wrappers"].items(), key=lambda kv: -kv[1][0] * kv[1][1]):
            print(f"    {k:42s} x{n:<3d} {us:7.2f} us/layer around the kernels")


if __name__ == "__main__":
    main()

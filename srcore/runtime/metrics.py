"""Per-op metrics (the Static Runtime seed's benchmark tools).

``benchmark_individual_ops`` times the whole model with the module's executor,
then every node with an instrumented interpreter, and reports time per node,
per op type with percentages, and which nodes ran as out variant, native or
fallback.
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Sequence

import attrs

from .interpreter import BlockRunner


@attrs.frozen
class NodeTiming:
    block: int
    position: int
    op: str
    kind: str          # out, native, fallback, structural
    backend: str | None
    mean_ms: float
    source: str | None
    #: an engine node's own breakdown, ``(layer, ms)`` per layer, when the engine offers ``profile()``
    layers: tuple[tuple[str, float], ...] = ()


@attrs.frozen
class OpMetrics:
    setup_time_ms: float
    first_iteration_ms: float
    mean_run_ms: float
    runs: int
    nodes: tuple[NodeTiming, ...]
    per_op: tuple[tuple[str, float, float, int], ...]   # (op, total ms per run, percent, count)
    kind_counts: dict[str, int]

    def format(self) -> str:
        lines = [f"setup time: {self.setup_time_ms:.3f} ms",
                 f"first iteration: {self.first_iteration_ms:.3f} ms",
                 f"mean time per run: {self.mean_run_ms:.4f} ms over {self.runs} runs",
                 "nodes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.kind_counts.items())),
                 "", "time per op type (per run):"]
        for op, ms, pct, count in self.per_op:
            lines.append(f"  {op:45s} {ms:10.4f} ms  {pct:6.2f}%  x{count}")
        lines += ["", "time per node (per run):"]
        for t in self.nodes:
            src = f"  # {t.source}" if t.source else ""
            lines.append(f"  [{t.block}:{t.position:3d}] {t.op:40s} {t.kind:10s} {t.mean_ms:10.4f} ms{src}")
            for label, ms in t.layers:
                lines.append(f"        {label:48s} {ms:10.4f} ms")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


class _TimingRunner(BlockRunner):
    """The interpreter, timing each step (a structural step's time includes its sub-blocks)."""

    def __init__(self, module, runtime):
        super().__init__(module, runtime)
        self.times: dict[int, float] = defaultdict(float)
        #: inputs seen by nodes whose kernel can profile itself (engines), by processed node
        self.profiled: dict[int, tuple] = {}

    def run_block(self, info, values):
        clock = time.perf_counter
        for step in self._steps[info.index]:
            pn = step[1]
            if pn.fn is not None and hasattr(pn.fn.fn, "profile") and id(pn) not in self.profiled:
                self.profiled[id(pn)] = tuple(values[s] for s in pn.inputs)
            t0 = clock()
            self._run_steps((step,), values)
            self.times[id(pn)] += clock() - t0


def timed_runtime(module, runner_class=None):
    """``(runtime, runner)``: a runtime of ``module`` whose steps run through ``runner_class(module,
    runtime)`` (default :class:`_TimingRunner`, each step's wall time) instead of its executor."""
    from .static_runtime import StaticRuntime

    rt = StaticRuntime.__new__(StaticRuntime)
    rt.__dict__.update(StaticRuntime(module).__dict__)
    runner = (runner_class or _TimingRunner)(module, rt)
    rt._runner, rt._fns, rt._top = runner, None, runner.run_top
    rt._arm_entry()
    return rt, runner


def benchmark_individual_ops(module, inputs: Sequence[Any], warmup: int = 5, runs: int = 20) -> OpMetrics:
    from .static_runtime import StaticRuntime

    inputs = tuple(inputs)
    rt = StaticRuntime(module)
    t0 = time.perf_counter()
    rt(*inputs)
    first = time.perf_counter() - t0
    for _ in range(warmup):
        rt(*inputs)
    t0 = time.perf_counter()
    for _ in range(runs):
        rt(*inputs)
    mean = (time.perf_counter() - t0) / max(runs, 1)

    trt, runner = timed_runtime(module)
    for _ in range(warmup):
        trt(*inputs)
    runner.times.clear()
    for _ in range(runs):
        trt(*inputs)
    nodes, per_op, kinds = [], defaultdict(lambda: [0.0, 0]), defaultdict(int)
    for b in module.blocks:
        for pn in b.nodes:
            ms = runner.times.get(id(pn), 0.0) / max(runs, 1) * 1e3
            fn = pn.fn
            kind = fn.kind if fn is not None else "structural"
            op = fn.op if fn is not None else pn.node.kind
            kinds[kind] += 1
            layers = ()
            if id(pn) in runner.profiled:   # an engine: its layers, timed by the engine itself
                layers = tuple((label, sec * 1e3) for label, sec in fn.fn.profile(*runner.profiled[id(pn)]))
            nodes.append(NodeTiming(b.index, pn.position, op, kind, fn.backend if fn else None, ms,
                                    str(pn.node.source) if pn.node.source else None, layers))
            if fn is not None:   # structural nodes' time includes their sub-blocks: not an op's
                per_op[op][0] += ms
                per_op[op][1] += 1
    total = sum(v[0] for v in per_op.values()) or 1.0
    table = tuple(sorted(((op, v[0], 100.0 * v[0] / total, v[1]) for op, v in per_op.items()),
                         key=lambda r: -r[1]))
    return OpMetrics(module.setup_time * 1e3, first * 1e3, mean * 1e3, runs, tuple(nodes), table, dict(kinds))

"""``srcore.quantize``: post-training static quantization of a float model with calibration data.

Steps: fold batch norms into the convolutions before them (:mod:`srcore.passes.fold_bn`); plan what
each node becomes (:mod:`.plan`: conv/linear (+relu) and add (+relu) quantized, shape and pooling ops
pass quantized values through, the rest stays float); run the float model on the calibration batches
with an observer on every value to quantize (:mod:`.observers`); rewrite the graph (:mod:`.rewrite`);
then run float and quantized models side by side on the calibration batches for the report (each
node's output error against float).
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import attrs
import numpy as np

from ..errors import QuantizationError
from ..ir.quant import QParams
from ..model import Model
from .calibration import Taps, calibration_batches
from .observers import OBSERVERS, make_observer
from .plan import NodePlan, plan
from .rewrite import apply

QMIN, QMAX = 0, 255  # quint8 activations
#: the top of the activations' range with ``reduce_range`` (7 bits, as torch's x86 qconfigs): the
#: AVX2 int8 GEMM's vpmaddubsw then sums its pairs exactly in one pass (srcore.int8.gemm)
QMAX_REDUCED = 127


@attrs.define
class NodeReport:
    """One node of the float model: what quantization made of it and its output error on the
    calibration data (``max_abs_error``, ``rel_rms_error`` = rms(error) / rms(float output))."""

    name: str
    op: str
    status: str
    reason: str = ""
    quantized_op: str | None = None
    scale: float | None = None
    zero_point: int | None = None
    max_abs_error: float | None = None
    rel_rms_error: float | None = None
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class QuantizationReport:
    """What :func:`quantize` did: settings, calibration batches and samples, and every node."""

    observer: str
    calibration_batches: int
    calibration_samples: int
    nodes: list[NodeReport]
    outputs: list[dict[str, Any]] = attrs.field(factory=list)
    #: ``{graph input name: (scale, zero_point)}`` of the inputs quantized on entry
    input_qparams: dict[str, tuple[float, int]] = attrs.field(factory=dict)

    @property
    def quantized(self) -> list[NodeReport]:
        return [n for n in self.nodes if n.status in ("quantized", "fused", "pass_through")]

    def to_json(self) -> dict[str, Any]:
        return {"observer": self.observer, "calibration_batches": self.calibration_batches,
                "calibration_samples": self.calibration_samples, "outputs": self.outputs,
                "inputs": [{"name": k, "scale": s, "zero_point": z} for k, (s, z) in self.input_qparams.items()],
                "nodes": [n.to_json() for n in self.nodes]}


class _ErrorStat:
    def __init__(self) -> None:
        self.max = 0.0
        self.sq_err = 0.0
        self.sq_ref = 0.0

    def update(self, ref: np.ndarray, got: np.ndarray) -> None:
        ref = np.asarray(ref, np.float64)
        d = np.asarray(got, np.float64) - ref
        if d.size:
            self.max = max(self.max, float(np.abs(d).max()))
        self.sq_err += float(np.sum(d * d))
        self.sq_ref += float(np.sum(ref * ref))

    def rel(self) -> float:
        return float(np.sqrt(self.sq_err / self.sq_ref)) if self.sq_ref > 0 else float(np.sqrt(self.sq_err))


def _dequantized(a) -> np.ndarray:
    return a.dequantize() if hasattr(a, "dequantize") else np.asarray(a)


def quantize(model: Model, calibration: Any, *, observer: str = "histogram", histogram_method: str = "percentile",
             percentile: float = 99.99, averaging_constant: float = 0.01, keep_float: Iterable[str] = (),
             batch_size: int = 32, backends: Sequence[str] | None = None, with_report: bool = False,
             reduce_range: bool = True):
    """Quantize ``model`` (post-training, static) using ``calibration`` data; returns the quantized
    :class:`srcore.Model` (and its :class:`QuantizationReport` with ``with_report=True``).

    ``calibration``: an ``.npz`` path or ``{input name: samples}`` (cut into batches of
    ``batch_size``), or an iterable of batches (see :mod:`srcore.quantization.calibration`).
    ``observer``: ``minmax``, ``moving_average`` (``averaging_constant``) or ``histogram``
    (``histogram_method`` ``entropy`` or ``percentile``, of ``percentile``) picks each activation's
    range. ``keep_float``: op names (``aten::linear``, ``linear``) or output value names of nodes
    to keep in float. ``backends`` run the float model at calibration (default: all installed).
    ``reduce_range`` (default): activation ranges map to 0..127 (7 bits, torch's x86 qconfigs do the
    same), which keeps the AVX2 int8 GEMM exact in one pass; ``False``: all 8 bits (0..255), half
    the rounding error, and on CPUs without VNNI the GEMM runs twice per layer (exact either way).
    """
    from ..passes.dce import eliminate_dead_code
    from ..passes.fold_bn import fold_batch_norm
    from ..progress import progress

    if observer not in OBSERVERS:
        raise QuantizationError(f"unknown observer {observer!r}: expected one of {', '.join(OBSERVERS)}")
    make_observer(observer, histogram_method=histogram_method, percentile=percentile)  # checks the settings
    if not isinstance(model, Model):
        raise QuantizationError(f"quantize takes a srcore.Model, not {type(model).__name__}")
    batches = calibration_batches(calibration, model.input_specs, batch_size)
    keep = [keep_float] if isinstance(keep_float, str) else list(keep_float)

    graph = model.graph.copy()
    fold_batch_norm(graph)
    eliminate_dead_code(graph)
    _check_keep_float(graph, keep)

    # 1. plan without data; observe what it needs; re-plan with the dtypes seen
    plans = plan(graph, keep)
    wanted = _observed_values(plans)
    taps = Taps(graph, [v for v in wanted if v.node.kind != "prim::Param"], model.input_specs, backends)
    observers = {id(v): make_observer(observer, histogram_method=histogram_method, percentile=percentile,
                                      averaging_constant=averaging_constant) for v in wanted}
    dtypes: dict[int, str] = {}
    inputs = {id(v): i for i, v in enumerate(graph.inputs)}
    n_samples = 0
    for batch in progress(batches, "calibrate", total=len(batches), unit="batch"):
        _, seen = taps(batch)
        n_samples += int(batch[0].shape[0]) if batch and batch[0].ndim else 1
        for v in wanted:
            a = batch[inputs[id(v)]] if id(v) in inputs else seen[id(v)]
            a = np.asarray(a)
            dtypes[id(v)] = a.dtype.name
            if a.dtype == np.float32:
                observers[id(v)].update(a)
    plans = plan(graph, keep, dtypes)
    act: dict[int, QParams] = {}
    for v in _observed_values(plans):
        try:
            act[id(v)] = observers[id(v)].qparams(QMIN, QMAX_REDUCED if reduce_range else QMAX)
        except QuantizationError as exc:
            raise QuantizationError(f"value %{v.name} ({v.node.kind}): {exc}") from None
    for p in plans:  # a pass-through op keeps its input's parameters
        if p.status == "pass_through":
            act[id(p.node.output)] = act[id(p.node.inputs[0])]

    # 2. rewrite a copy of the float graph, keeping the float one for the report
    qgraph = graph.copy()
    env = _value_map(graph, qgraph)
    qplans = [_map_plan(p, qgraph, env) for p in plans]
    qact = {id(env[k]): q for k, q in act.items()}
    qval = apply(qgraph, qplans, qact)
    metadata = dict(model.metadata)
    metadata["srcore.quantize"] = f"observer={observer}" + (
        f",method={histogram_method}" if observer == "histogram" else "")
    qmodel = Model.from_graph(qgraph, input_specs=model.input_specs, output_names=model.output_names,
                              metadata=metadata)
    if not with_report:
        return qmodel
    report = _report(graph, plans, act, qgraph, qval, env, batches, model, backends, observer, n_samples)
    return qmodel, report


def _check_keep_float(graph, keep: list[str]) -> None:
    from .plan import keep_float_match

    for k in keep:
        if not isinstance(k, str):
            raise QuantizationError(f"keep_float takes op or value names, not {k!r}")
        if not any(keep_float_match(n, frozenset([k])) for n in graph.nodes):
            raise QuantizationError(f"keep_float {k!r} names no op or node output of the model")


def _observed_values(plans: list[NodePlan]) -> list:
    out, seen = [], set()

    def add(v):
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    for p in plans:
        if p.status == "quantized":
            for x in p.node.inputs[:2 if p.op.startswith("quantized::add") else 1]:
                add(x)
            add(p.out)
    return out


def _value_map(a, b) -> dict[int, Any]:
    env = {id(x): y for x, y in zip(a.inputs, b.inputs)}
    for na, nb in zip(a.nodes, b.nodes):
        env[id(na)] = nb
        for x, y in zip(na.outputs, nb.outputs):
            env[id(x)] = y
    return env


def _map_plan(p: NodePlan, g, env) -> NodePlan:
    return NodePlan(env[id(p.node)], p.status, p.op, env[id(p.relu)] if p.relu is not None else None,
                    env[id(p.into)] if p.into is not None else None, p.reason)


def _report(graph, plans, act, qgraph, qval, env, batches, model, backends, observer, n_samples):
    from ..progress import progress

    # a quantized node's value is its fused relu's output, if any
    compare = [p for p in plans if p.status in ("quantized", "pass_through")]
    float_taps = Taps(graph, [p.out for p in compare], model.input_specs, backends)
    q_taps = Taps(qgraph, [qval[id(env[id(p.out)])] for p in compare], model.input_specs, backends)
    stats = {id(p.node): _ErrorStat() for p in compare}
    out_stats = [_ErrorStat() for _ in model.output_names]
    for batch in progress(batches, "report", total=len(batches), unit="batch"):
        f_out, f_seen = float_taps(batch)
        q_out, q_seen = q_taps(batch)
        for p in compare:
            fv, qv = p.out, qval[id(env[id(p.out)])]
            stats[id(p.node)].update(f_seen[id(fv)], _dequantized(q_seen[id(qv)]))
        for s, a, b in zip(out_stats, f_out, q_out):
            s.update(a, _dequantized(b))
    nodes = []
    for p in plans:
        n = p.node
        q = act.get(id(p.out)) if p.status in ("quantized", "pass_through") else None
        st = stats.get(id(n))
        reason = p.reason or {"fused": f"relu fused into %{p.into.output.name if p.into else '?'}",
                              "pass_through": "runs on the quantized value, keeping its parameters"}.get(p.status, "")
        nodes.append(NodeReport(
            name=n.output.name if n.outputs else n.kind, op=n.kind, status=p.status, reason=reason,
            quantized_op=p.op, scale=None if q is None else float(q.scale),
            zero_point=None if q is None else int(q.zero_point),
            max_abs_error=None if st is None else st.max, rel_rms_error=None if st is None else st.rel(),
            source=str(n.source) if n.source is not None else None))
    outputs = [{"name": name, "max_abs_error": s.max, "rel_rms_error": s.rel()}
               for name, s in zip(model.output_names, out_stats)]
    inputs = {v.name: (float(act[id(v)].scale), int(act[id(v)].zero_point)) for v in graph.inputs if id(v) in act}
    return QuantizationReport(observer, len(batches), n_samples, nodes, outputs, inputs)

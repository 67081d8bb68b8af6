"""A segment graph as an OpenVINO model, built with OpenVINO's graph API (no file round trip).

Every segment input becomes a float32 (or int64, :data:`INT_TYPES`) ``Parameter`` whose fixed
dims stay fixed and whose symbolic (or unknown) dims are dynamic, so one compiled model serves
every size; every node becomes the OpenVINO ops of its converter (:mod:`.table`); every segment
output a ``Result``.

int64 tensors: OpenVINO's CPU plugin computes them in int32 (2**40 + 3 through an Unsqueeze came
out as 3), so the few rules that take them (:data:`.table.INT_RULE_DTYPES`) only move or convert
values that come in as engine inputs, and the engine runs a call whose int64 inputs leave int32's
range on the next backends (``Engine.__call__``).
"""
from __future__ import annotations

from typing import Any

from srcore.plugin import EngineBuildError

from .table import DEFERRED_SOFTMAX, FINITE_ONLY, NAN_CHECKS, PRECISION, Ctx, rule_for


def node_op(node) -> str:
    """The overload name the converter table is keyed by (``aten::add.Tensor``, ``aten::relu``)."""
    schema = node.schema
    name = getattr(schema, "qualified_name", None) or node.kind
    return name[:-1] if name.endswith(".") else name


#: the dtypes engine inputs and outputs may have besides float32 -> OpenVINO's element type name
INT_TYPES = {"int64": "i64"}


def input_shape(value) -> list[int | None]:
    """A segment input's dims (None: dynamic); an EngineBuildError for what is not a float32
    or int64 tensor of known rank."""
    t = value.type
    dtype, shape = getattr(t, "dtype", None), getattr(t, "shape", None)
    if (dtype != "float32" and dtype not in INT_TYPES) or shape is None:
        raise EngineBuildError(f"engine input %{value.name} is {t}: openvino engines take float32 (or int64) "
                               f"tensors of known rank")
    return [d if isinstance(d, int) else None for d in shape]


def _element_type(ov, value):
    return getattr(ov.Type, INT_TYPES.get(value.type.dtype, "f32"))


def build_model(graph, name: str, ov: Any, o: Any, nan_checks: bool = True, deferred: list | None = None,
                precision: str = "f32", finite_only: bool = False):
    """``(model, input dims)``: the OpenVINO model of segment ``graph`` (``ov`` = the openvino
    module, ``o`` = the opset module converters use; ``nan_checks``: the engine option).
    ``deferred``: a list to collect the softmax nodes whose row check was left out because only
    matmuls read them (see ``reduce._softmax``); None builds every check. ``finite_only``: the
    model serves finite inputs only (``srcore_openvino.finite``): no NaN checks, forms exact on
    finite values."""
    token = NAN_CHECKS.set(nan_checks and not finite_only)
    token_f = FINITE_ONLY.set(finite_only)
    token_d = DEFERRED_SOFTMAX.set(deferred)
    token_p = PRECISION.set(precision)
    try:
        return _build(graph, name, ov, o)
    finally:
        PRECISION.reset(token_p)
        DEFERRED_SOFTMAX.reset(token_d)
        FINITE_ONLY.reset(token_f)
        NAN_CHECKS.reset(token)


def _build(graph, name: str, ov: Any, o: Any):
    env: dict[int, Any] = {}
    params = []
    shapes = []
    for v in graph.inputs:
        shape = input_shape(v)
        shapes.append(shape)
        p = o.parameter(ov.PartialShape([-1 if d is None else d for d in shape]), _element_type(ov, v),
                        name=v.name or None)
        params.append(p)
        env[id(v)] = p.output(0)
    constants: dict[int, Any] = {}
    for n in graph.nodes:
        if n.kind == "prim::Constant":
            continue
        op = node_op(n)
        rule = rule_for(op)
        ctx = Ctx(n, op, env, o, constants)
        if rule is None:
            ctx.fail("no openvino converter")
        try:
            result = rule.convert(ctx)
        except EngineBuildError:
            raise
        except Exception as exc:   # OpenVINO's shape inference rejecting the node, most often
            ctx.fail(f"OpenVINO cannot build it: {type(exc).__name__}: {_first_line(exc)}")
        _bind(ctx, n, result)
    results = []
    for v in graph.outputs:
        got = env.get(id(v))
        if got is None or isinstance(got, list):
            raise EngineBuildError(f"segment output %{v.name} ({v.type}) is not a tensor the engine makes")
        want = _element_type(ov, v) if getattr(v.type, "dtype", None) in INT_TYPES else ov.Type.f32
        if got.get_element_type() != want:
            raise EngineBuildError(f"segment output %{v.name} is {got.get_element_type()} in OpenVINO, not {want}")
        results.append(o.result(got))
    return ov.Model(results, params, name), shapes


def _bind(ctx: Ctx, n, result) -> None:
    outs = n.outputs
    if isinstance(result, tuple):
        if len(result) != len(outs):
            ctx.fail(f"internal: {len(result)} results for {len(outs)} outputs")
        for v, r in zip(outs, result):
            ctx.env[id(v)] = r
        return
    if len(outs) != 1:
        ctx.fail(f"internal: one result for {len(outs)} outputs")
    ctx.env[id(outs[0])] = result


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # OpenVINO's messages start with a C++ file:line banner; the last line says what is wrong
    return lines[-1][:300] if lines else type(exc).__name__

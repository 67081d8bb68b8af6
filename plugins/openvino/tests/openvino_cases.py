"""Graphs of one node per case, run through ``backends=("openvino", "cpu")``, and torch's answer.

Shared by the conformance tests: a :class:`Case` is one op call (tensor inputs, parameters,
constants, tensor lists), :func:`run_group` puts many cases side by side in one graph (one
OpenVINO compile for all of them: a compile costs ~40 ms of CPU) and returns each node's
result, whether it ran in an engine, and torch's result on the same arguments.
"""
from __future__ import annotations

from typing import Callable

import attrs
import numpy as np
import torch

import srcore
from srcore.ir.parser import parse_graph
from srcore.testing import op_cases
from srcore.testing.op_cases import (GraphText, In, Param, TList, call_aten, compare_specials, random_values,
                                     raise_worst, to_torch)

BACKENDS = ("openvino", "cpu")
#: the special values of :data:`srcore.testing.op_cases.SPECIALS` but +-104
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40, -1e-40, 88.8, -88.8, 20.0, -20.0,
                     9.0, -9.0, 1e-8, 3.0, -3.0, 6.0], np.float32)


def data(shape, seed: int, dtype=np.float32, **kw) -> np.ndarray:
    """Random values of ``shape`` with :data:`SPECIALS` sprinkled in (:func:`random_values`)."""
    return random_values(shape, seed, dtype, specials=SPECIALS, **kw)


def tin(shape, seed=0, dtype=np.float32, transposed=False, **kw) -> In:
    return op_cases.tin(shape, seed, dtype, transposed, specials=SPECIALS, **kw)


def p(shape, seed=0, **kw) -> Param:
    return Param(data(shape, seed, special=False, **kw))


@attrs.frozen
class Tol:
    """``|got - want| <= rtol * |want| + atol * scale`` (``scale``: the case's magnitude, default 1);
    NaNs and infinities must be at the same places."""

    rtol: float = 0.0
    atol: float = 0.0
    #: ``scale`` defaults to the op applied to the magnitudes of its tensor arguments (sums of terms)
    of_terms: bool = False


EXACT = Tol()


@attrs.frozen
class Case:
    """One node checked against torch. ``op`` is the overload (``aten::add.Tensor``); ``engine``:
    the node must run in an OpenVINO engine (else: must be refused and run on cpu); ``unpack``:
    the node returns a ``Tensor[]`` of that many tensors, unpacked inside the engine."""

    id: str
    op: str
    args: tuple
    tol: Tol = EXACT
    engine: bool = True
    ref: Callable | None = None
    scale: Callable | None = None
    unpack: int = 0
    exhaustive: bool = False

    @property
    def kind(self) -> str:
        return self.op.split(".", 1)[0]

    def error_scale(self):
        """The magnitude errors are relative to: ``scale="abs"`` is the op applied to the absolute
        values of its tensor arguments (for a sum of products, the sum of the products' magnitudes)."""
        if self.scale is None and not self.tol.of_terms:
            return None
        if self.scale is None or self.scale == "abs":
            absd = attrs.evolve(self, args=tuple(_abs(a) for a in self.args), scale=None)
            ref = absd.reference()
            refs = list(ref) if self.unpack else [ref]
            return [np.abs(r.numpy().astype(np.float64)) for r in refs]
        return [self.scale(*self.args)] * (self.unpack or 1)

    def reference(self):
        args = [to_torch(a) for a in self.args]
        if self.ref is not None:
            return self.ref(*args)
        _, name = self.op.split("::", 1)
        base, _, ov = name.partition(".")
        return call_aten(getattr(getattr(torch.ops.aten, base), ov or "default"), args)


def _abs(v):
    if isinstance(v, (In, Param)):
        return type(v)(np.abs(v.array))
    if isinstance(v, TList):
        return TList(tuple(_abs(a) for a in v.items))
    return v


def graph_text(cases: list[Case]):
    """IR text with one node per case (``%y{k}``, or ``%y{k}_{i}`` unpacked); (text, params, inputs)."""
    g, outs = GraphText(), []
    for k, case in enumerate(cases):
        names = [g.value(a, f"{k}_{j}") for j, a in enumerate(case.args)]
        if case.unpack:
            g.line(f"  %y{k} : Tensor[] = {case.kind}({', '.join('%' + n for n in names)})")
            parts = [f"%y{k}_{i}" for i in range(case.unpack)]
            g.line(f"  {', '.join(p + ' : Tensor' for p in parts)} = prim::ListUnpack(%y{k})")
            outs.extend(parts)
        else:
            g.line(f"  %y{k} : Tensor = {case.kind}({', '.join('%' + n for n in names)})")
            outs.append(f"%y{k}")
    return g.text(outs), g.params, g.inputs


def module(text, params, **options) -> srcore.StaticModule:
    engine_options = {"timing": False, **options.pop("engine_options", {})}
    opts = srcore.Options(backends=BACKENDS, engine_min_block_size=1, engine_options=engine_options,
                          optimize=False, **options)
    return srcore.StaticModule(parse_graph(text, params=params), options=opts)


@attrs.frozen
class Outcome:
    """What happened to one case in a group run."""

    case: Case
    got: list[np.ndarray]
    in_engine: bool
    report: str


def run_group(cases: list[Case]) -> list[Outcome]:
    """Run ``cases`` side by side in one graph; each case's results and whether its node was in an engine."""
    text, params, ins = graph_text(cases)
    sm = module(text, params)
    with np.errstate(all="ignore"):
        got = sm(*ins)
    got = list(got) if isinstance(got, tuple) else [got]
    report = sm.partition.format()
    refused = {r.node.split(" = ")[0] for r in sm.partition.refused}
    failed = [s for s in sm.partition.segments if s.status != "engine"]
    outcomes, i = [], 0
    for k, case in enumerate(cases):
        n = case.unpack or 1
        first = f"%y{k}_0" if case.unpack else f"%y{k}"
        in_engine = not failed and f"%y{k}" not in refused and first not in refused
        outcomes.append(Outcome(case, got[i:i + n], in_engine, report))
        i += n
    return outcomes


def assert_close(got, want, tol: Tol, scale=None, what: str = ""):
    checked = compare_specials(got, want, what)
    if checked is None:
        return
    g, w, fin = checked
    s = 1.0 if scale is None else np.broadcast_to(np.asarray(scale, np.float64), w.shape)
    with np.errstate(all="ignore"):
        err = np.abs(g - w)
        bound = tol.rtol * np.abs(w) + tol.atol * s
        raise_worst(fin & (err > bound), err, bound, g, w, tol, what)


def max_rel_err(got, want) -> float:
    """The worst ``|got - want| / max(|want|, 1)`` over finite places (for calibration)."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    fin = np.isfinite(w) & np.isfinite(g)
    if not fin.any():
        return 0.0
    return float((np.abs(g - w)[fin] / np.maximum(np.abs(w[fin]), 1.0)).max())

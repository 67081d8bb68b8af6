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

BACKENDS = ("openvino", "cpu")
DTYPE_NAMES = {np.dtype(np.float32): "Float", np.dtype(np.float64): "Double", np.dtype(np.int64): "Long",
               np.dtype(np.int32): "Int", np.dtype(np.bool_): "Bool", np.dtype(np.float16): "Half"}
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40, -1e-40, 88.8, -88.8, 20.0, -20.0,
                     9.0, -9.0, 1e-8, 3.0, -3.0, 6.0], np.float32)


def data(shape, seed: int, dtype=np.float32, special: bool = True, positive: bool = False,
         scale: float = 3.0) -> np.ndarray:
    """Random values of ``shape`` (normal, ``scale``), with special values sprinkled in."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if np.dtype(dtype).kind in "iu":
        return np.asarray(rng.integers(-5, 6, size=shape), dtype=dtype)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    if special and x.size:
        flat = x.reshape(-1)
        k = min(flat.size, len(SPECIALS), max(1, flat.size // 3))
        flat[rng.choice(flat.size, k, replace=False)] = rng.choice(SPECIALS, k, replace=False)
    if positive:
        x = np.abs(x) + np.float32(0.1)
    return np.asarray(x, dtype=dtype)


@attrs.frozen
class In:
    """A graph input (may be a non-contiguous view)."""

    array: np.ndarray = attrs.field(eq=False)


@attrs.frozen
class Param:
    """A tensor constant (``prim::Constant[param=...]``)."""

    array: np.ndarray = attrs.field(eq=False)


@attrs.frozen
class TList:
    """A ``Tensor[]`` argument made by ``prim::ListConstruct`` of inputs."""

    items: tuple


def tin(shape, seed=0, dtype=np.float32, transposed=False, **kw) -> In:
    if transposed and len(shape) >= 2:
        return In(data(tuple(reversed(shape)), seed, dtype, **kw).T)
    return In(data(shape, seed, dtype, **kw))


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
        args = [_torch(a) for a in self.args]
        if self.ref is not None:
            return self.ref(*args)
        _, name = self.op.split("::", 1)
        base, _, ov = name.partition(".")
        fn = getattr(getattr(torch.ops.aten, base), ov or "default")
        pos, kw = [], {}
        for a, v in zip(fn._schema.arguments, args):
            if a.kwarg_only:
                kw[a.name] = v
            else:
                pos.append(v)
        return fn(*pos, **kw)


def _abs(v):
    if isinstance(v, (In, Param)):
        return type(v)(np.abs(v.array))
    if isinstance(v, TList):
        return TList(tuple(_abs(a) for a in v.items))
    return v


def _torch(v):
    if isinstance(v, (In, Param)):
        return torch.from_numpy(np.array(v.array))
    if isinstance(v, TList):
        return [_torch(a) for a in v.items]
    if isinstance(v, tuple):
        return list(v)
    return v


def _const_line(name: str, v) -> str:
    if v is None:
        return f"  %{name} : NoneType = prim::Constant()"
    if isinstance(v, bool):
        return f"  %{name} : bool = prim::Constant[value={int(v)}]()"
    if isinstance(v, int):
        return f"  %{name} : int = prim::Constant[value={v}]()"
    if isinstance(v, float):
        return f"  %{name} : float = prim::Constant[value={v!r}]()"
    if isinstance(v, str):
        return f'  %{name} : str = prim::Constant[value="{v}"]()'
    if isinstance(v, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        return f"  %{name} : int[] = prim::Constant[value=[{', '.join(map(str, v))}]]()"
    if isinstance(v, (list, tuple)) and v and all(isinstance(i, float) for i in v):
        return f"  %{name} : float[] = prim::Constant[value=[{', '.join(map(repr, v))}]]()"
    raise TypeError(f"no constant for {v!r}")


def _ttype(a: np.ndarray) -> str:
    return f"{DTYPE_NAMES[a.dtype]}({', '.join(map(str, a.shape))})"


def graph_text(cases: list[Case]):
    """IR text with one node per case (``%y{k}``, or ``%y{k}_{i}`` unpacked); (text, params, inputs)."""
    ins: list[np.ndarray] = []
    params: dict[str, np.ndarray] = {}
    head, body, outs = [], [], []

    def val(a, k, j):
        if isinstance(a, In):
            name = f"x{len(ins)}"
            ins.append(a.array)
            head.append(f"%{name} : {_ttype(a.array)}")
            return name
        if isinstance(a, Param):
            name = f"w{len(params)}"
            params[name] = a.array
            body.append(f'  %{name} : {_ttype(a.array)} = prim::Constant[param="{name}"]()')
            return name
        if isinstance(a, TList):
            names = [val(x, k, f"{j}_{i}") for i, x in enumerate(a.items)]
            body.append(f"  %l{k}_{j} : Tensor[] = prim::ListConstruct({', '.join('%' + n for n in names)})")
            return f"l{k}_{j}"
        name = f"c{k}_{j}"
        body.append(_const_line(name, a))
        return name

    for k, case in enumerate(cases):
        names = [val(a, k, j) for j, a in enumerate(case.args)]
        if case.unpack:
            body.append(f"  %y{k} : Tensor[] = {case.kind}({', '.join('%' + n for n in names)})")
            parts = [f"%y{k}_{i}" for i in range(case.unpack)]
            body.append(f"  {', '.join(p + ' : Tensor' for p in parts)} = prim::ListUnpack(%y{k})")
            outs.extend(parts)
        else:
            body.append(f"  %y{k} : Tensor = {case.kind}({', '.join('%' + n for n in names)})")
            outs.append(f"%y{k}")
    text = f"graph({', '.join(head)}):\n" + "\n".join(body) + f"\n  return ({', '.join(outs)})\n"
    return text, params, ins


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
    want, got = np.asarray(want), np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != torch's {want.dtype}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = np.isnan(g) != np.isnan(w)
    assert not bad.any(), f"{what}: NaN at other places: got {got[bad][:5]}, torch {want[bad][:5]}"
    bad = (np.isinf(g) | np.isinf(w)) & ~((g == w) | np.isnan(w))
    assert not bad.any(), f"{what}: infinities differ: got {got[bad][:5]}, torch {want[bad][:5]}"
    fin = np.isfinite(w)
    s = 1.0 if scale is None else np.broadcast_to(np.asarray(scale, np.float64), w.shape)
    with np.errstate(all="ignore"):
        err = np.abs(g - w)
        bound = tol.rtol * np.abs(w) + tol.atol * s
        bad = fin & (err > bound)
    if bad.any():
        idx = np.argmax(np.where(bad, err - bound, -np.inf))
        raise AssertionError(f"{what}: {int(bad.sum())} value(s) off by more than {tol}: worst got "
                             f"{g.reshape(-1)[idx]!r}, torch {w.reshape(-1)[idx]!r}")


def max_rel_err(got, want) -> float:
    """The worst ``|got - want| / max(|want|, 1)`` over finite places (for calibration)."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    fin = np.isfinite(w) & np.isfinite(g)
    if not fin.any():
        return 0.0
    return float((np.abs(g - w)[fin] / np.maximum(np.abs(w[fin]), 1.0)).max())

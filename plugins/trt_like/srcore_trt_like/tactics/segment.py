"""Small static networks compiled whole: one ``segment`` layer, one numba function for every layer.

A network of small tensors (an index-heavy graph: sort, gather, scatter, a mean and a compare on
3x10) spends its time in the Python around its kernels (1-6 us per numpy call), not in them. When
every layer is of a kind below and every tensor small, :func:`compile_small` generates ONE function
with the shapes as constants, a loop nest per layer (intermediates are local arrays), and times
the plan that calls it against the layer-by-layer plan on the same inputs: the faster is kept, so
large tensors keep their vector and BLAS kernels. The source is written to the kernel cache
(:mod:`..pointwise.cache`) and compiled with ``cache=True``: a second load compiles nothing.

Semantics are torch's: sort is ``sort(stable=True)`` (NaN above everything, ties in input order,
descending too), mean and cumsum accumulate in float64 (ATen's CPU accumulate type), the pointwise
ops use the pointwise kernels' formulas (:mod:`..pointwise.ops`). An index out of range raises
``IndexError`` naming the node; the plan turns it into a ``KernelError`` (nothing is read or
written out of bounds).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import math
import sys
import threading
import time
from pathlib import Path

import attrs
import numba
import numpy as np
from numba import types

from ..builder.network import Layer, Network
from ..builder.plan import SEGMENT_AT, Plan, Step, explain_segment
from ..kernels import fastmath, layout_copy, rows, select
from ..pointwise.cache import _write_source
from ..pointwise.codegen import _Consts, _runtime_tag
from ..pointwise.expr import Const, Input
from ..pointwise.ops import OPS
from . import pointwise as pointwise_tactics
from .data import batched_transpose
from .timing import best_times, random_input

log = logging.getLogger("srcore.trt_like")

#: bump when the generated code changes meaning (part of every segment's source hash)
SEGMENT_VERSION = 10
#: a network is compiled whole only if no tensor is larger than this (elements; the plan with the
#: fewer passes over memory may still win on larger ones, timing decides) ...
MAX_TENSOR = 1 << 18
#: ... it has at most this many layers (compile time grows with the function) ...
MAX_LAYERS = 64
#: ... and sorts lines of at most this many elements (an insertion sort; topk: keeps at most this many)
MAX_SORT = 256
#: a ``gemm`` / ``matmul`` of at most this many multiply-adds is a loop nest in a segment (a
#: recommender's or a point net's small-batch MLP: a BLAS call costs ~1 us of Python and setup for
#: a few hundred flops); larger ones keep their BLAS tactics
MAX_PRODUCT = 1 << 14

_lock = threading.Lock()
_loaded: dict[str, object] = {}


# -- which networks --------------------------------------------------------------------------------
def refusal(net: Network) -> str | None:
    """Why ``net`` cannot be compiled whole (None: it can)."""
    layers = [layer for layer in net.layers if layer.kind != "reshape"]
    if len(layers) < 2:
        return "fewer than two layers"
    if len(net.layers) > MAX_LAYERS:
        return f"more than {MAX_LAYERS} layers"
    for t in net.tensors.values():
        if t.size > MAX_TENSOR:
            return f"tensor {t.id} has {t.size} elements (> {MAX_TENSOR})"
        if t.dtype not in _NP:
            return f"tensor {t.id} is {t.dtype}"
    for layer in net.layers:
        why = _layer_refusal(layer, net)
        if why:
            return f"{layer.kind} layer ({layer.source or 'no source'}): {why}"
    return None


def _layer_refusal(layer: Layer, net: Network) -> str | None:
    if layer.kind not in _EMIT:
        return "no compiled form"
    if "nchwc" in layer.attrs:
        return "an NCHW16c tensor"
    if layer.attrs.get("index") is not None or layer.attrs.get("mask") is not None:
        return "a constant index or mask"
    if layer.kind in ("gemm", "matmul") and any(net.tensors[t].dtype != "float32" for t in layer.inputs):
        return "not float32"
    if layer.kind == "sort" and net.shape(layer.inputs[0])[layer.attrs["dim"]] > MAX_SORT:
        return f"lines longer than {MAX_SORT}"
    if layer.kind == "topk" and layer.attrs["k"] > MAX_SORT:
        return f"k > {MAX_SORT}"
    if layer.kind in ("softmax", "log_softmax") and layer.attrs["dim"] != len(net.shape(layer.inputs[0])) - 1:
        return "not over the last dim"
    if layer.kind == "reduce" and layer.attrs["op"] == "sum" and _summands(layer, net) >= PAIRWISE_MIN:
        return f"a float sum of {PAIRWISE_MIN} or more terms (numpy's pairwise order, as the cpu plugin's)"
    if layer.kind == "strided" and not all(isinstance(k, (int, slice)) for k in layer.attrs["key"]):
        return "an index key other than ints and slices"
    if layer.kind in ("gemm", "matmul") and _products(layer, net) > MAX_PRODUCT:
        return f"more than {MAX_PRODUCT} multiply-adds"
    return None


#: numpy adds fewer terms than this one after another (its pairwise sum unrolls from 8): a float
#: ``sum`` of fewer (DeepFM's sum over a few fields) is compiled in that order, the same bits
PAIRWISE_MIN = 8


def _summands(layer: Layer, net: Network) -> int:
    shape = net.shape(layer.inputs[0])
    return math.prod(shape[d] for d in layer.attrs["dims"])


def _products(layer: Layer, net: Network) -> int:
    """The multiply-adds of a ``gemm`` (the weight (N, K) an attribute) or ``matmul`` layer."""
    out = net.shape(layer.outputs[0])
    k = layer.attrs["weight"].shape[1] if layer.kind == "gemm" else net.shape(layer.inputs[0])[-1]
    return math.prod(out) * k


# -- code generation -------------------------------------------------------------------------------
_NP = {"float32": "np.float32", "int64": "np.int64", "int32": "np.int32", "bool": "np.bool_", "int16": "np.int16",
       "int8": "np.int8", "uint8": "np.uint8"}


def _ix(names) -> str:
    names = list(names)
    return ", ".join(names) if names else "()"


class _Code:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 1
        self._open: list[int] = []
        #: float32 constants, module globals (numba takes no np.float32("inf") inside a function)
        self.const = _Consts()
        #: the sub-layer being emitted (its place in the segment: error messages name it, :func:`_at`)
        self.at = 0
        #: network constant -> (the packed constant holding it, its element offset there)
        self.packed: dict[int, tuple[int, int]] = {}

    def add(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def loops(self, shape, prefix: str = "i") -> list[str]:
        """Open a loop per dim of ``shape`` (closed by :meth:`close`); the index names."""
        names = []
        for d, n in enumerate(shape):
            self.add(f"for {prefix}{d} in range({n}):")
            self.depth += 1
            names.append(f"{prefix}{d}")
        self._open.append(len(shape))
        return names

    def close(self) -> None:
        self.depth -= self._open.pop()


def _broadcast(names: list[str], shape, to) -> list[str]:
    """The index of an operand of ``shape`` broadcast to ``to`` at the loop indices ``names``."""
    lead = len(to) - len(shape)
    return [("0" if s == 1 and to[lead + d] != 1 else names[lead + d]) for d, s in enumerate(shape)]


def _operand(c: _Code, arg, layer: Layer, net: Network, names, to) -> str:
    kind, x = arg
    if kind != "in":   # (an integer or bool layer's numbers are exact literals)
        return repr(x) if isinstance(x, int) else c.const(float(x))
    t = layer.inputs[x]
    return f"t{t}[{_ix(_broadcast(names, net.shape(t), to))}]"


def _raise(c: _Code, cond: str, layer: Layer, n: int) -> None:
    c.add(f"if {cond}:")
    c.add(f'    raise IndexError("{layer.kind} {_at(c)}: an index is out of range for a dim of size {n}")')


def _at(c: _Code) -> str:
    """Where an error message says it was raised: the layer's place in the segment, not its source
    (which :func:`..builder.plan.explain_segment` adds when the plan reports the error): the generated
    source, hence its cache entry, is then the same for one network imported through several paths
    (script, export, onnx: each names its nodes' sources differently; index_ops was compiled twice
    over 4 characters of a message)."""
    return SEGMENT_AT.format(c.at)


#: (the plan's, which reads the place back: the builder sits below the tactics)
explain = explain_segment


def _strided(c: _Code, layer: Layer, net: Network) -> None:
    x, (o,) = layer.inputs[0], layer.outputs
    shape, key = net.shape(x), layer.attrs["key"]
    names = c.loops(net.shape(o))
    src, k = [], 0
    for d, n in enumerate(shape):
        sel = key[d] if d < len(key) else slice(None)
        if isinstance(sel, int):
            src.append(str(sel % n if n else sel))
            continue
        start, _, step = sel.indices(n)
        src.append(f"{start} + {step} * {names[k]}")
        k += 1
    c.add(f"t{o}[{_ix(names)}] = t{x}[{_ix(src)}]")
    c.close()


def _gather(c: _Code, layer: Layer, net: Network) -> None:
    (x, idx), (o,), dim = layer.inputs, layer.outputs, layer.attrs["dim"]
    n = net.shape(x)[dim]
    names = c.loops(net.shape(o))
    c.add(f"j = t{idx}[{_ix(names)}]")
    _raise(c, f"j < 0 or j >= {n}", layer, n)
    c.add(f"t{o}[{_ix(names)}] = t{x}[{_ix(names[:dim] + ['j'] + names[dim + 1:])}]")
    c.close()


def _index_tensor(c: _Code, layer: Layer, net: Network) -> None:
    """``x[key]`` with index tensors at ``dims`` (broadcast together), slices elsewhere: the index
    dims in place of the indexed ones when those are adjacent, else first (numpy's and torch's)."""
    x, idxs, (o,), dims = layer.inputs[0], layer.inputs[1:], layer.outputs, layer.attrs["dims"]
    shape, to = net.shape(x), net.shape(o)
    shapes = [net.shape(t) for t in idxs]
    nb = max(len(s) for s in shapes)
    adjacent = dims == tuple(range(dims[0], dims[0] + len(dims)))
    at = dims[0] if adjacent else 0
    names = c.loops(to)
    index_names = names[at:at + nb]
    rest = iter(names[:at] + names[at + nb:])
    src = []
    for d, n in enumerate(shape):
        if d not in dims:
            src.append(next(rest))
            continue
        k = dims.index(d)
        j = f"j{o}_{k}"
        c.add(f"{j} = t{idxs[k]}[{_ix(_broadcast(index_names, shapes[k], to[at:at + nb]))}]")
        c.add(f"if {j} < 0:")
        c.add(f"    {j} += {n}")
        _raise(c, f"{j} < 0 or {j} >= {n}", layer, n)
        src.append(j)
    c.add(f"t{o}[{_ix(names)}] = t{x}[{_ix(src)}]")
    c.close()


def _index_select(c: _Code, layer: Layer, net: Network) -> None:
    (x, idx), (o,), dim = layer.inputs, layer.outputs, layer.attrs["dim"]
    shape = net.shape(x)
    n, k = shape[dim], net.tensors[idx].size
    view = shape[:dim] + (k,) + shape[dim + 1:]
    c.add(f"ix = t{idx}.reshape({k})")
    c.add(f"ov = t{o}.reshape({view!r})")
    names = c.loops(view)
    c.add(f"j = ix[{names[dim]}]")
    _raise(c, f"j < 0 or j >= {n}", layer, n)
    c.add(f"ov[{_ix(names)}] = t{x}[{_ix(names[:dim] + ['j'] + names[dim + 1:])}]")
    c.close()


def _scatter(c: _Code, layer: Layer, net: Network) -> None:
    x, (o,), dim = layer.inputs[0], layer.outputs, layer.attrs["dim"]
    idx = layer.inputs[-1]
    shape = net.shape(x)
    n = shape[dim]
    names = c.loops(shape)
    c.add(f"t{o}[{_ix(names)}] = t{x}[{_ix(names)}]")
    c.close()
    names = c.loops(net.shape(idx))
    c.add(f"j = t{idx}[{_ix(names)}]")
    _raise(c, f"j < 0 or j >= {n}", layer, n)
    value = c.const(layer.attrs["value"]) if layer.attrs["value"] is not None else \
        f"t{layer.inputs[1]}[{_ix(names)}]"
    at = f"t{o}[{_ix(names[:dim] + ['j'] + names[dim + 1:])}]"
    c.add(f"{at} = {at} + {value}" if layer.attrs["add"] else f"{at} = {value}")
    c.close()


def _sort(c: _Code, layer: Layer, net: Network) -> None:
    """A stable insertion sort of each line (torch's ``stable=True`` order; NaN largest)."""
    x, (vo, io), dim = layer.inputs[0], layer.outputs, layer.attrs["dim"]
    a, b = _scalars(x)
    shape = net.shape(x)
    n = shape[dim]
    outer = tuple(s for d, s in enumerate(shape) if d != dim)
    before = _before(layer.attrs["descending"], a, b)
    names = c.loops(outer, "s")
    line = names[:dim] + ["{}"] + names[dim:]
    at = _ix(line)
    c.add(f"for k in range({n}):")
    c.add(f"    {a} = t{x}[{at.format('k')}]")
    c.add("    m = k")
    _insert(c, a, b, before, vo, io, at, "k")
    c.close()


def _insert(c, a: str, b: str, before: str, vo: int, io: int, at: str, index: str) -> None:
    """Insertion's inner loop: shift the entries after which value ``a`` goes (``before``: ``a``
    comes before ``b``) one place up in values ``t{vo}`` and indices ``t{io}``, from place ``m``
    down, then put ``a`` and ``index`` in the place left."""
    c.add("    while m > 0:")
    c.add(f"        {b} = t{vo}[{at.format('m - 1')}]")
    c.add(f"        if not ({before}):")
    c.add("            break")
    c.add(f"        t{vo}[{at.format('m')}] = {b}")
    c.add(f"        t{io}[{at.format('m')}] = t{io}[{at.format('m - 1')}]")
    c.add("        m -= 1")
    c.add(f"    t{vo}[{at.format('m')}] = {a}")
    c.add(f"    t{io}[{at.format('m')}] = {index}")


def _scalars(x: int) -> tuple[str, str]:
    """Names of two scalars read from tensor ``x``, its own: numba gives a variable one type in the
    whole function, and a float32 sort and an int64 one must not share theirs."""
    return f"a{x}", f"b{x}"


def _before(descending: bool, a: str, b: str) -> str:
    """``a`` strictly precedes ``b`` in torch's order (NaN largest; equal elements keep their order)."""
    if descending:
        return f"({a} > {b}) or ({a} != {a} and {b} == {b})"
    return f"({a} < {b}) or ({b} != {b} and {a} == {a})"


def _topk(c: _Code, layer: Layer, net: Network) -> None:
    """The k first of each line kept sorted while the line is read: an element that precedes the
    k-th so far is inserted (after its equals), the k-th drops out. A line of 8k or more without
    NaN is cut first (the cpu plugin's ``jit_topk``): the k-th best of its >= 4k block extremes
    bounds the top k from below, and only the blocks and elements reaching it are read."""
    x, (vo, io), dim, k = layer.inputs[0], layer.outputs, layer.attrs["dim"], layer.attrs["k"]
    a, b = _scalars(x)
    shape = net.shape(x)
    n = shape[dim]
    largest = layer.attrs["largest"]
    outer = tuple(s for d, s in enumerate(shape) if d != dim)
    before = _before(largest, a, b)
    size = max(1, min(64, n // (4 * k))) if k else 1
    cut = k and n >= 8 * k
    nb = -(-n // size)
    lo, nan, bm, v = f"lo{vo}", f"nan{vo}", f"bm{vo}", f"v{vo}"
    worse = "<" if largest else ">"
    if cut:
        c.add(f"{bm} = np.empty({nb}, np.float32)")
        c.add(f"{bm}s = np.empty({nb}, np.float32)")
    names = c.loops(outer, "s")
    at = _ix(names[:dim] + ["{}"] + names[dim:])
    c.add(f"{nan} = {not cut}")
    c.add(f"{lo} = t{x}[{at.format(0)}]")
    if cut:
        c.add(f"for q in range({n}):")
        c.add(f"    if t{x}[{at.format('q')}] != t{x}[{at.format('q')}]:")
        c.add(f"        {nan} = True")
        c.add(f"if not {nan}:")
        c.add(f"    for bk in range({nb}):")
        c.add(f"        {b} = t{x}[{at.format(f'bk * {size}')}]")
        c.add(f"        for q in range(bk * {size} + 1, min(bk * {size} + {size}, {n})):")
        c.add(f"            {v} = t{x}[{at.format('q')}]")
        c.add(f"            {b} = {v} if {v} {'>' if largest else '<'} {b} else {b}")
        c.add(f"        {bm}[bk] = {b}")
        c.add(f"    {lo} = kth_smallest({bm}, {nb - k if largest else k - 1}, {bm}s)")
    c.add("cnt = 0")
    c.add(f"for bk in range({nb}):")
    c.depth += 1
    if cut:
        c.add(f"if not {nan} and {bm}[bk] {worse} {lo}:")
        c.add("    continue")
    c.add(f"for q in range(bk * {size}, min(bk * {size} + {size}, {n})):")
    c.add(f"    {a} = t{x}[{at.format('q')}]")
    if cut:
        c.add(f"    if not {nan} and {a} {worse} {lo}:")
        c.add("        continue")
    c.add(f"    if cnt == {k}:")
    c.add(f"        {b} = t{vo}[{at.format(k - 1)}]")
    c.add(f"        if not ({before}):")
    c.add("            continue")
    c.add(f"        m = {k - 1}")
    c.add("    else:")
    c.add("        m = cnt")
    c.add("        cnt += 1")
    _insert(c, a, b, before, vo, io, at, "q")
    c.depth -= 1
    c.close()


def _argmax(c: _Code, layer: Layer, net: Network) -> None:
    """The first extreme of each line; the first NaN once one is seen (torch's rule)."""
    x, (o,), dim = layer.inputs[0], layer.outputs, layer.attrs["dim"]
    a, best = _scalars(x)
    shape = net.shape(x)
    outer = tuple(s for d, s in enumerate(shape) if d != dim)
    view = tuple(1 if d == dim else s for d, s in enumerate(shape))
    beats = f"{a} > {best}" if layer.attrs["largest"] else f"{a} < {best}"
    c.add(f"ov = t{o}.reshape({view!r})")
    names = c.loops(outer, "s")
    at = _ix(names[:dim] + ["{}"] + names[dim:])
    c.add(f"{best} = t{x}[{at.format(0)}]")
    c.add("bi = 0")
    c.add(f"for q in range(1, {shape[dim]}):")
    c.add(f"    {a} = t{x}[{at.format('q')}]")
    if layer.attrs.get("last_nan"):   # a max pool's index: every NaN takes the place
        c.add(f"    if {a} != {a} or ({best} == {best} and {beats}):")
    else:
        c.add(f"    if {best} == {best} and ({a} != {a} or {beats}):")
    c.add(f"        {best} = {a}")
    c.add("        bi = q")
    c.add(f"ov[{at.format(0)}] = bi")
    c.close()


def _reduce(c: _Code, layer: Layer, net: Network) -> None:
    """``amax`` / ``amin`` (a NaN, once seen, stays), the int64 count of a mask or its ``any`` /
    ``all``, over ``dims``."""
    x, (o,), dims, op = layer.inputs[0], layer.outputs, layer.attrs["dims"], layer.attrs["op"]
    shape = net.shape(x)
    view = tuple(1 if d in dims else s for d, s in enumerate(shape))
    a, r = _scalars(x)
    if op == "logsumexp":
        return _logsumexp(c, x, o, shape, view)
    lead = math.prod(shape[:len(shape) - len(dims)])
    if (op in ("max", "min") and net.tensors[x].dtype == "float32" and dims and lead
            and dims == tuple(range(len(shape) - len(dims), len(shape)))):   # trailing dims: vector rows
        sign = 1.0 if op == "max" else -1.0
        c.add(f"max_rows(t{x}.reshape(({lead}, {math.prod(shape) // lead})), t{o}.reshape({lead}), np.float32({sign}))")
        return
    c.add(f"ov = t{o}.reshape({view!r})")
    # a sum starts at -0.0: -0.0 + x is x for every x, the sign of a zero first term included
    init = {"count": "0", "isum": "0", "any": "False", "all": "True", "sum": c.const(-0.0)}.get(op) or \
        c.const(-math.inf if op == "max" else math.inf)
    names = c.loops(view)
    c.add(f"ov[{_ix(names)}] = {init}")
    c.close()
    names = c.loops(shape)
    at = _ix("0" if d in dims else ix for d, ix in enumerate(names))
    if op == "count":
        c.add(f"if t{x}[{_ix(names)}]:")
        c.add(f"    ov[{at}] += 1")
    elif op in ("any", "all"):
        c.add(f"if {'' if op == 'any' else 'not '}t{x}[{_ix(names)}]:")
        c.add(f"    ov[{at}] = {op == 'any'}")
    elif op == "isum":   # (integers: an exact int64 sum)
        c.add(f"ov[{at}] += np.int64(t{x}[{_ix(names)}])")
    elif op == "sum":   # (in index order: the reduced dims' terms one after another, numpy's order below 8)
        c.add(f"ov[{at}] += t{x}[{_ix(names)}]")
    else:
        c.add(f"{a} = t{x}[{_ix(names)}]")
        c.add(f"{r} = ov[{at}]")
        c.add(f"if {r} == {r} and ({a} != {a} or {a} {'>' if op == 'max' else '<'} {r}):")
        c.add(f"    ov[{at}] = {a}")
    c.close()


def _logsumexp(c: _Code, x: int, o: int, shape, view) -> None:
    """torch's ``logsumexp``: the max ``m`` (NaN propagates), taken as 0 where infinite, then
    ``log(sum(exp(x - m))) + m`` (a row of -inf gives -inf, one holding +inf gives +inf)."""
    a, r = _scalars(x)
    inf = c.const(math.inf)
    c.add(f"ov = t{o}.reshape({view!r})")
    c.add(f"m{o} = np.full({view!r}, -{inf})")
    c.add(f"s{o} = np.zeros({view!r}, np.float32)")
    names = c.loops(shape)
    at = _ix("0" if s == 1 else ix for s, ix in zip(view, names))
    c.add(f"{a} = t{x}[{_ix(names)}]")
    c.add(f"{r} = m{o}[{at}]")
    c.add(f"if {r} == {r} and ({a} != {a} or {a} > {r}):")
    c.add(f"    m{o}[{at}] = {a}")
    c.close()
    names = c.loops(view, "j")
    c.add(f"if m{o}[{_ix(names)}] == {inf} or m{o}[{_ix(names)}] == -{inf}:")
    c.add(f"    m{o}[{_ix(names)}] = 0")
    c.close()
    names = c.loops(shape)
    at = _ix("0" if s == 1 else ix for s, ix in zip(view, names))
    c.add(f"s{o}[{at}] += np.exp(t{x}[{_ix(names)}] - m{o}[{at}])")
    c.close()
    names = c.loops(view, "j")
    c.add(f"ov[{_ix(names)}] = np.log(s{o}[{_ix(names)}]) + m{o}[{_ix(names)}]")
    c.close()


def _logical_not(c: _Code, layer: Layer, net: Network) -> None:
    (x,), (o,) = layer.inputs, layer.outputs
    names = c.loops(net.shape(o))
    c.add(f"t{o}[{_ix(names)}] = not t{x}[{_ix(names)}]")
    c.close()


def _mean(c: _Code, layer: Layer, net: Network) -> None:
    x, (o,), dims = layer.inputs[0], layer.outputs, layer.attrs["dims"]
    shape = net.shape(x)
    view = tuple(1 if d in dims else s for d, s in enumerate(shape))
    count = math.prod(shape[d] for d in dims)
    c.add(f"acc = np.zeros({view!r}, np.float64)")
    names = c.loops(shape)
    red = ["0" if d in dims else ix for d, ix in enumerate(names)]
    c.add(f"acc[{_ix(red)}] += t{x}[{_ix(names)}]")
    c.close()
    c.add(f"ov = t{o}.reshape({view!r})")
    names = c.loops(view)
    # torch: the float32 sum divided by the count in float32
    c.add(f"ov[{_ix(names)}] = np.float32(acc[{_ix(names)}]) / np.float32({count})")
    c.close()


_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _compare(c: _Code, layer: Layer, net: Network) -> None:
    (o,), (a, b) = layer.outputs, layer.attrs["args"]
    to = net.shape(o)
    names = c.loops(to)
    c.add(f"t{o}[{_ix(names)}] = {_operand(c, a, layer, net, names, to)} {_CMP[layer.attrs['op']]} "
          f"{_operand(c, b, layer, net, names, to)}")
    c.close()


def _where(c: _Code, layer: Layer, net: Network) -> None:
    (o,), (a, b) = layer.outputs, layer.attrs["args"]
    mask = layer.inputs[-1]
    to = net.shape(o)
    names = c.loops(to)
    c.add(f"t{o}[{_ix(names)}] = {_operand(c, a, layer, net, names, to)} if "
          f"t{mask}[{_ix(_broadcast(names, net.shape(mask), to))}] else {_operand(c, b, layer, net, names, to)}")
    c.close()


def _cumsum(c: _Code, layer: Layer, net: Network) -> None:
    x, (o,), dim = layer.inputs[0], layer.outputs, layer.attrs["dim"]
    shape = net.shape(x)
    outer = tuple(s for d, s in enumerate(shape) if d != dim)
    names = c.loops(outer, "s")
    at = _ix(names[:dim] + ["k"] + names[dim:])
    if net.tensors[o].dtype == "int64":   # (a mask or integers: an exact int64 sum, its own variable)
        c.add("iacc = 0")
        c.add(f"for k in range({shape[dim]}):")
        c.add(f"    iacc += np.int64(t{x}[{at}])")
        c.add(f"    t{o}[{at}] = iacc")
        c.close()
        return
    c.add("acc1 = 0.0")
    c.add(f"for k in range({shape[dim]}):")
    c.add(f"    acc1 += t{x}[{at}]")
    c.add(f"    t{o}[{at}] = np.float32(acc1)")
    c.close()


_INT_SIGNS = {"add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "floor_divide": "{} // {}",
              "remainder": "{} % {}", "and": "{} & {}", "or": "{} | {}", "xor": "{} ^ {}",
              "maximum": "max({}, {})", "minimum": "min({}, {})"}


def _int_binary(c: _Code, layer: Layer, net: Network) -> None:
    """Integer / bool elementwise ops (numba's integer ``//`` and ``%`` are Python's: floor)."""
    (o,), (a, b), op = layer.outputs, layer.attrs["args"], layer.attrs["op"]
    to = net.shape(o)
    names = c.loops(to)
    x, y = _operand(c, a, layer, net, names, to), _operand(c, b, layer, net, names, to)
    if op in ("floor_divide", "remainder") and b[0] == "in":
        c.add(f"if {y} == 0:")
        c.add(f'    raise ZeroDivisionError("{op} {_at(c)}: integer division by zero")')
    dtype = net.tensors[o].dtype
    if dtype in _WRAP:   # (8 / 16 bits: exact in int64, then wrapped as torch's; numba and numpy scalars agree)
        x, y = f"np.int64({x})", f"np.int64({y})"
    c.add(f"t{o}[{_ix(names)}] = {_wrapped(_INT_SIGNS[op].format(x, y), dtype)}")
    c.close()


#: a small integer result of an int64 expression, wrapped into its dtype's range (two's complement)
_WRAP = {"uint8": "({}) & 255", "int8": "((({}) + 128) & 255) - 128", "int16": "((({}) + 32768) & 65535) - 32768"}


def _wrapped(expr: str, dtype: str) -> str:
    return _WRAP[dtype].format(expr) if dtype in _WRAP else expr


def _one_hot(c: _Code, layer: Layer, net: Network) -> None:
    (x,), (o,), n = layer.inputs, layer.outputs, layer.attrs["n"]
    names = c.loops(net.shape(x))
    k = f"h{o}"
    c.add(f"{k} = t{x}[{_ix(names)}]")
    _raise(c, f"{k} < 0 or {k} >= {n}", layer, n)
    c.add(f"for q in range({n}):")
    c.add(f"    t{o}[{_ix([*names, 'q'])}] = 1 if q == {k} else 0")
    c.close()


def _roll(c: _Code, layer: Layer, net: Network) -> None:
    (x,), (o,) = layer.inputs, layer.outputs
    shape, by = net.shape(o), dict(zip(layer.attrs["dims"], layer.attrs["shifts"]))
    names = c.loops(shape)
    src = [f"({ix} + {shape[d] - by[d]}) % {shape[d]}" if by.get(d) else ix for d, ix in enumerate(names)]
    c.add(f"t{o}[{_ix(names)}] = t{x}[{_ix(src)}]")
    c.close()


def _flip(c: _Code, layer: Layer, net: Network) -> None:
    (x,), (o,), dims = layer.inputs, layer.outputs, layer.attrs["dims"]
    shape = net.shape(o)
    names = c.loops(shape)
    src = [f"{shape[d] - 1} - {ix}" if d in dims else ix for d, ix in enumerate(names)]
    c.add(f"t{o}[{_ix(names)}] = t{x}[{_ix(src)}]")
    c.close()


def _fused_pointwise(c: _Code, layer: Layer, net: Network) -> None:
    """The fused ops per element, with the pointwise kernels' op templates."""
    program = pointwise_tactics._program(layer, net)
    to = program.shape
    names = c.loops(to)
    value: dict = {}
    for node in program.nodes():
        if isinstance(node, Const):
            value[node] = c.const(node.value)
        elif isinstance(node, Input):
            k = int(node.name[2:])
            t = layer.inputs[k]
            value[node] = f"t{t}[{_ix(_broadcast(names, net.shape(t), to))}]"
        else:
            d = OPS[node.name]
            v = f"p{len(value)}"
            params = {p: c.const(x) for p, x in zip(d.param_names, node.params)}
            c.add(f"{v} = {d.template.format(*(value[a] for a in node.args), **params)}")
            value[node] = v
    for out, res in zip(layer.outputs, program.outputs):
        c.add(f"t{out}[{_ix(names)}] = {value[res]}")
    c.close()


def _softmax(c: _Code, layer: Layer, net: Network) -> None:
    """The engine's compiled row kernels (:mod:`..kernels.rows`), called in place."""
    (x,), (o,) = layer.inputs, layer.outputs
    m = net.shape(x)[-1]
    rows = net.tensors[x].size // m if m else 0
    view = f"t{x}.reshape(({rows}, {m})), t{o}.reshape(({rows}, {m}))"
    if layer.attrs.get("safe"):   # scaled_dot_product_attention's: fully masked rows give zeros
        c.add(f"softmax_rows_biased({view}, np.float32(1.0), False, np.zeros((1, {m}), np.float32), 0, True)")
        return
    if 0 < m < 16:   # short rows: across rows in vectors, as the layer's own tactic (tactics/nn.py)
        c.add(f"softmax_short_rows({view}, {layer.kind == 'log_softmax'}, np.empty({rows * m}, np.float32), "
              f"np.empty({rows}, np.float32), np.empty({rows}, np.float32))")
        return
    c.add(f"log_softmax_rows({view})" if layer.kind == "log_softmax" else f"softmax_rows({view}, np.float32(1.0))")


def _reshape(c: _Code, layer: Layer, net: Network) -> None:
    (x,), (o,) = layer.inputs, layer.outputs
    c.add(f"t{o} = t{x}.reshape({net.shape(o)!r})")


def _cast(c: _Code, layer: Layer, net: Network) -> None:
    (x,), (o,) = layer.inputs, layer.outputs
    names = c.loops(net.shape(o))
    src, to = f"t{x}[{_ix(names)}]", net.tensors[o].dtype
    if to == "bool":
        c.add(f"t{o}[{_ix(names)}] = {src} != 0")
    elif to == "float32":
        if net.tensors[x].dtype == "bool":
            src = f"np.float32(1.0) if {src} else np.float32(0.0)"
        c.add(f"t{o}[{_ix(names)}] = np.float32({src})")
    else:   # (a float truncates toward zero, as torch's)
        if net.tensors[x].dtype == "bool":
            src = f"1 if {src} else 0"
        if to in _WRAP and net.tensors[x].dtype != "float32":   # (an integer narrowed wraps, as torch's)
            c.add(f"t{o}[{_ix(names)}] = {_wrapped(f'np.int64({src})', to)}")
        else:
            c.add(f"t{o}[{_ix(names)}] = {_NP[to]}({src})")
    c.close()


def _int_scalar(c: _Code, layer: Layer, net: Network) -> None:
    (x,), (o,) = layer.inputs, layer.outputs
    sign = "%" if layer.attrs["op"] == "remainder" else "//"   # (Python's, as torch's: floor)
    names = c.loops(net.shape(o))
    expr = f"np.int64(t{x}[{_ix(names)}]) {sign} {int(layer.attrs['other'])}"
    c.add(f"t{o}[{_ix(names)}] = {_wrapped(expr, net.tensors[o].dtype)}")
    c.close()


def _expand(c: _Code, layer: Layer, net: Network) -> None:
    (x,), (o,) = layer.inputs, layer.outputs
    to = net.shape(o)
    names = c.loops(to)
    c.add(f"t{o}[{_ix(names)}] = t{x}[{_ix(_broadcast(names, net.shape(x), to))}]")
    c.close()


def _permute(c: _Code, layer: Layer, net: Network) -> None:
    """A float32 batch of matrix transposes by ``transpose_tiles`` (8 x 8 register blocks; a loop
    nest in the output's order reads a 75x32x32 map's rows 4 KiB apart, all in one L1 set), any
    other permute a loop nest."""
    (x,), (o,), perm = layer.inputs, layer.outputs, layer.attrs["perm"]
    bmn = batched_transpose(tuple(perm), net.shape(x))
    if net.tensors[x].dtype == "float32" and bmn is not None and min(bmn[1:]) > 1:
        c.add(f"transpose_tiles(t{x}, t{o}, {bmn[0]}, {bmn[1]}, {bmn[2]})")
        return
    names = c.loops(net.shape(o))
    src = [""] * len(perm)
    for d, p in enumerate(perm):
        src[p] = names[d]
    c.add(f"t{o}[{_ix(names)}] = t{x}[{_ix(src)}]")
    c.close()


def _gemm(c: _Code, layer: Layer, net: Network) -> None:
    """``x @ W.T`` over the last dim, W as the (K, N) constant input :func:`_with_weights` gave the
    layer (:func:`_product`)."""
    (x, w), (o,) = layer.inputs, layer.outputs
    k, n = net.shape(w)
    m = net.tensors[o].size // n if n else 0
    c.add(f"xf{o} = t{x}.reshape({m * k})")
    c.add(f"of{o} = t{o}.reshape({m * n})")
    if w in c.packed:   # read in place in the packed constant
        flat, at = c.packed[w]
        _product(c, f"xf{o}", f"t{flat}", f"of{o}", m, k, n, f"{o}", b_at=str(at))
        return
    c.add(f"wf{o} = t{w}.reshape({k * n})")
    _product(c, f"xf{o}", f"wf{o}", f"of{o}", m, k, n, f"{o}")


#: 16-lane float32 vectors (kernels/simd.py)
LANES = 16
#: a product's register tile: at most this many 16-lane accumulators (rows x column blocks) ...
TILE_ACC = 12
#: ... of at most this many column blocks (a row's splat reused that many times)
TILE_BLOCKS = 4


def _product(c: _Code, a: str, b: str, out: str, m: int, k: int, n: int, tag: str,
             a_at: str = "0", b_at: str = "0", out_at: str = "0") -> None:
    """``out = a @ b`` of flat row-major (m, k) and (k, n) operands at element offsets ``a_at``,
    ``b_at``, ``out_at``: register tiles of rows x 16-lane column blocks (:data:`TILE_ACC`), each
    accumulator summed over k in order, one FMA a term (as BLAS's kernels; the last block of a row
    masked). LLVM does not vectorize the plain loop nest (the output may alias an operand), and one
    row's blocks alone wait on the FMA latency: 3x32x32 ran ~1 multiply-add a ns either way.

    Two or more full groups of :data:`TILE_BLOCKS` blocks are one loop over the group's first
    column, not one loop nest written out per group: the same tiles and sums in the same order (the
    same bits), but numba's compile time grows with the statements of the function (SSA repair,
    typing, lowering: a 256-column product was four copies of a 12-accumulator nest)."""
    if m == 0 or n == 0:
        return
    if k == 0:   # an empty sum: zeros
        c.add(f"for e in range({m * n}):")
        c.add(f"    {out}[{out_at} + e] = 0")
        return
    span = LANES * TILE_BLOCKS
    blocks = [(j, min(LANES, n - j)) for j in range(0, n, LANES)]
    full = n // span
    if full >= 2:
        c.add(f"for gj{tag} in range(0, {full * span}, {span}):")
        c.depth += 1
        _tiles(c, a, b, out, m, k, n, tag, a_at, b_at, out_at, blocks[:TILE_BLOCKS], f"gj{tag} + ")
        c.depth -= 1
        blocks = blocks[full * TILE_BLOCKS:]
    for g in range(0, len(blocks), TILE_BLOCKS):
        _tiles(c, a, b, out, m, k, n, tag, a_at, b_at, out_at, blocks[g:g + TILE_BLOCKS], "")


def _tiles(c: _Code, a: str, b: str, out: str, m: int, k: int, n: int, tag: str, a_at: str, b_at: str,
           out_at: str, group, col: str) -> None:
    """The loop nests of one group of column blocks ``group`` ((first column, width) each, the
    columns after ``col``, a loop index plus, or nothing): all the row tiles, then the rows left."""
    rows = max(1, min(m, TILE_ACC // len(group)))
    for start, count in ((0, m // rows * rows), (m // rows * rows, m % rows)):
        if count == 0:
            continue
        height = rows if start == 0 else count
        c.add(f"for gi{tag} in range({start}, {start + count}, {height}):")
        acc = {(r, j): f"ga{tag}_{r}_{j}" for r in range(height) for j, _ in group}
        for v in acc.values():
            c.add(f"    {v} = vzero()")
        c.add(f"    for gk{tag} in range({k}):")
        for j, width in group:
            at = f"{b_at} + gk{tag} * {n} + {col}{j}"
            c.add(f"        gw{tag}_{j} = " + (f"vload({b}, {at})" if width == LANES else
                                             f"vload_lanes({b}, {at}, {width})"))
        for r in range(height):
            c.add(f"        gx{tag} = vsplat({a}, {a_at} + (gi{tag} + {r}) * {k} + gk{tag})")
            for j, _ in group:
                c.add(f"        {acc[r, j]} = vfma(gx{tag}, gw{tag}_{j}, {acc[r, j]})")
        for (r, j), v in acc.items():
            width = dict(group)[j]
            at = f"{out_at} + (gi{tag} + {r}) * {n} + {col}{j}"
            c.add(f"    vstore({out}, {at}, {v})" if width == LANES else f"    vstore_lanes({out}, {at}, {v}, {width})")


def _matmul(c: _Code, layer: Layer, net: Network) -> None:
    """``a @ b`` (both at least 2-D, batch dims broadcast): :func:`_product` per batch entry."""
    (a, b), (o,) = layer.inputs, layer.outputs
    to, sa, sb = net.shape(o), net.shape(a), net.shape(b)
    m, k, n = to[-2], sa[-1], to[-1]
    for t, name in ((a, "af"), (b, "bf"), (o, "of")):
        c.add(f"{name}{o} = t{t}.reshape({net.tensors[t].size})")
    names = c.loops(to[:-2], f"mb{o}_")
    ats = []
    for shape in (sa, sb, to):
        idx = _broadcast(names, shape[:-2], to[:-2])
        terms = [f"{i} * {math.prod(shape[d + 1:])}" for d, i in enumerate(idx) if i != "0"]
        ats.append(" + ".join(terms) or "0")
    _product(c, f"af{o}", f"bf{o}", f"of{o}", m, k, n, f"{o}", *ats)
    c.close()


def _cat(c: _Code, layer: Layer, net: Network) -> None:
    (o,), dim, at = layer.outputs, layer.attrs["dim"], 0
    permuted = layer.attrs.get("permuted") or (None,) * len(layer.inputs)
    for x, size, p in zip(layer.inputs, layer.attrs["sizes"], permuted):
        if p is not None:
            _permuted_piece(c, layer, net, x, p, at)
            at += size
            continue
        names = c.loops(net.shape(x))
        dst = names[:dim] + [f"{at} + {names[dim]}"] + names[dim + 1:]
        c.add(f"t{o}[{_ix(dst)}] = t{x}[{_ix(names)}]")
        c.close()
        at += size


def _max_pool2d(c: _Code, layer: Layer, net: Network) -> None:
    """Each output the max of its window's taps inside the input (padding is -inf); a NaN tap makes
    it NaN, as torch's kernel (and numpy's ``maximum``)."""
    (x,), (o,) = layer.inputs, layer.outputs
    (kh, kw), (sh, sw) = layer.attrs["kernel"], layer.attrs["stride"]
    (ph, pw), (dh, dw) = layer.attrs["padding"], layer.attrs["dilation"]
    H, W = net.shape(x)[2:]
    n, ch, i, j = c.loops(net.shape(o))
    m, h, w, v = f"m{o}", f"h{o}", f"w{o}", f"v{o}"
    c.add(f"{m} = {c.const(float('-inf'))}")
    c.add(f"for a{o} in range({kh}):")
    c.add(f"    {h} = {sh} * {i} - {ph} + {dh} * a{o}")
    c.add(f"    if {h} >= 0 and {h} < {H}:")
    c.add(f"        for b{o} in range({kw}):")
    c.add(f"            {w} = {sw} * {j} - {pw} + {dw} * b{o}")
    c.add(f"            if {w} >= 0 and {w} < {W}:")
    c.add(f"                {v} = t{x}[{n}, {ch}, {h}, {w}]")
    c.add(f"                if {v} > {m} or {v} != {v}:")
    c.add(f"                    {m} = {v}")
    c.add(f"t{o}[{n}, {ch}, {i}, {j}] = {m}")
    c.close()


def _permuted_piece(c: _Code, layer: Layer, net: Network, x: int, p, at: int) -> None:
    """A permute folded into a cat (``builder/fusion.py`` fuse_cat_permute): ``x`` transposed by
    ``perm`` is the cat's slice ``at`` seen in the permuted shape. That slice is a view in that
    shape: the dims of the permuted shape up to some ``q`` span the dims before the cat dim, the
    rest one contiguous run of the slice (the cat dim and those after it)."""
    (o,), dim = layer.outputs, layer.attrs["dim"]
    perm, shape = p
    out_shape = net.shape(o)
    lead, inner = math.prod(out_shape[:dim]), math.prod(out_shape[dim + 1:])
    q = next(q for q in range(len(shape) + 1) if math.prod(shape[:q]) == lead)
    c.add(f"f{o} = t{o}.reshape({math.prod(out_shape)})")
    names = c.loops(shape, "j")
    src = [""] * len(perm)
    for d, k in enumerate(perm):
        src[k] = names[d]
    row = out_shape[dim] * inner

    def linear(dims) -> str:
        terms = [f"{names[d]} * {math.prod(shape[d + 1:dims.stop])}" for d in dims]
        return " + ".join(terms) or "0"
    c.add(f"f{o}[({linear(range(q))}) * {row} + {at * inner} + {linear(range(q, len(shape)))}] = t{x}[{_ix(src)}]")
    c.close()


_EMIT = {"strided": _strided, "gather": _gather, "index_select": _index_select, "scatter": _scatter,
         "index_tensor": _index_tensor,
         "sort": _sort, "topk": _topk, "argmax": _argmax, "reduce": _reduce,
         "logical_not": _logical_not, "mean": _mean, "compare": _compare, "where": _where, "cumsum": _cumsum,
         "fused_pointwise": _fused_pointwise, "reshape": _reshape, "softmax": _softmax, "log_softmax": _softmax,
         "cast": _cast, "int_scalar": _int_scalar, "expand": _expand, "permute": _permute, "cat": _cat,
         "int_binary": _int_binary, "one_hot": _one_hot, "flip": _flip, "roll": _roll, "gemm": _gemm,
         "matmul": _matmul, "max_pool2d": _max_pool2d}


def generate_source(layer: Layer, net: Network) -> str:
    """The module defining ``segment(*inputs, *outputs)`` for a ``segment`` layer."""
    params = set(layer.inputs) | set(layer.outputs)
    c = _Code()
    subs = _sublayers(layer)
    # constants as views of their packed one; a gemm reads its weight there by offset, and a 1-D
    # one is a slice (numba's reshape calls a helper: ~50 ns a view, nbeats had 14)
    views = {t for sub in subs for i, t in enumerate(sub.inputs) if not (sub.kind == "gemm" and i == 1)}
    for flat, pieces in layer.attrs.get("packed", ()):
        for t, at in pieces:
            c.packed[t] = (flat, at)
            if t not in views:
                continue
            view = f"t{flat}[{at}:{at + net.tensors[t].size}]"
            c.add(f"t{t} = {view}" if len(net.shape(t)) == 1 else f"t{t} = {view}.reshape({net.shape(t)!r})")
    scratch = _scratch(subs, params, net)
    for dtype, total in scratch.sizes.items():
        c.add(f"s_{dtype} = np.empty({total}, {_NP[dtype]})")
    for c.at, sub in enumerate(subs):
        c.add(f"# {sub.kind} {sub.attrs.get('op', '')}".rstrip())
        for t in sub.outputs:
            if t in scratch.at:
                dtype, at = scratch.at[t]
                c.add(f"t{t} = s_{dtype}[{at}:{at + net.tensors[t].size}].reshape({net.shape(t)!r})")
            elif t not in params and sub.kind != "reshape":
                c.add(f"t{t} = np.empty({net.shape(t)!r}, {_NP[net.tensors[t].dtype]})")
        if sub.kind == "reshape" and sub.outputs[0] in params:   # a returned view: copied out
            (x,), (o,) = sub.inputs, sub.outputs
            n = net.tensors[o].size
            c.add(f"ov = t{o}.reshape({n})")
            c.add(f"xv = t{x}.reshape({n})")
            c.add(f"for k in range({n}):")
            c.add("    ov[k] = xv[k]")
            continue
        _EMIT[sub.kind](c, sub, net)
    args = ", ".join(f"t{t}" for t in (*layer.inputs, *layer.outputs))
    header = ["# srcore_trt_like compiled segment: generated, do not edit",
              f"# runtime {_runtime_tag()} rows {_rows_tag()} segment {SEGMENT_VERSION}",
              "import numpy as np",
              "from srcore_trt_like.kernels import fastmath as fm",
              ("from srcore_trt_like.kernels.rows import log_softmax_rows, max_rows, softmax_rows, "
               "softmax_rows_biased, softmax_short_rows"),
              "from srcore_trt_like.kernels.select import kth_smallest",
              "from srcore_trt_like.kernels.layout_copy import transpose_tiles",
              ("from srcore_trt_like.kernels.simd import vfma, vload, vload_lanes, vsplat, vstore, vstore_lanes, "
               "vzero"),
              "from srcore_trt_like.pointwise import ops", "", *c.const.lines, "", "",
              f"def segment({args}):"]
    return "\n".join(header + c.lines + ["    return", ""])


#: pieces packed into one array start at multiples of this many elements (64 bytes of float32)
ALIGN = 16


@attrs.frozen
class _Scratch:
    """A segment's intermediates in one array per dtype: ``sizes`` (dtype -> elements) and ``at``
    (tensor -> (dtype, offset)). One ``np.empty`` instead of one a layer (~20 ns each: nbeats's
    20 intermediates were ~0.4 us of a ~2 us segment)."""

    sizes: dict
    at: dict


def _scratch(subs, params, net: Network) -> _Scratch:
    sizes: dict[str, int] = {}
    at: dict[int, tuple[str, int]] = {}
    for sub in subs:
        if sub.kind == "reshape":
            continue
        for t in sub.outputs:
            tensor = net.tensors[t]
            if t in params or t in at or not tensor.shape:   # (0-d ones: np.empty(()) as before)
                continue
            start = sizes.get(tensor.dtype, 0)
            at[t] = (tensor.dtype, start)
            sizes[tensor.dtype] = start + -(-tensor.size // ALIGN) * ALIGN
    return _Scratch(sizes, at)


def _pack_constants(net: Network, inputs: list[int]) -> tuple[list[int], tuple]:
    """``inputs`` with the constants among them packed, two or more of a dtype into one new flat
    constant (each piece at a multiple of :data:`ALIGN`), and the layer's ``packed`` attribute
    ``((flat, ((constant, offset), ...)), ...)``: numba's dispatcher costs ~0.1 us an array argument
    (nbeats's segment took 22 weights and biases: 2.5 us of its call before a flop)."""
    groups: dict[str, list[int]] = {}
    for t in inputs:
        if t in net.constants and net.tensors[t].shape:
            groups.setdefault(net.tensors[t].dtype, []).append(t)
    packed, gone = [], set()
    for dtype, ts in groups.items():
        if len(ts) < 2:
            continue
        pieces, total = [], 0
        for t in ts:
            pieces.append((t, total))
            total += -(-net.tensors[t].size // ALIGN) * ALIGN
        flat = np.zeros(total, net.tensors[ts[0]].storage)
        for t, at in pieces:
            flat[at:at + net.tensors[t].size] = net.constants[t].reshape(-1)
        packed.append((net.constant(flat, dtype), tuple(pieces)))
        gone.update(ts)
    return [t for t in inputs if t not in gone] + [flat for flat, _ in packed], tuple(packed)


def _constants_read(net: Network, steps) -> tuple[set[int], set[int]]:
    """(the network's constants, those ``steps`` read): what :func:`_drop_superseded` compares to."""
    return set(net.constants), {t for step in steps for t in step.layer.inputs if t in net.constants}


def _drop_superseded(net: Network, before: tuple[set[int], set[int]], steps) -> None:
    """Drop the constants that layers read before the segments were made (``before``, from
    :func:`_constants_read`) and no step reads now (a segment reads them packed, or its weights
    transposed), and those made for segments that were not kept: the plan binds and a stored plan
    saves every constant of the network (nbeats's weights were held three times)."""
    existed, read_before = before
    read = {t for step in steps for t in step.layer.inputs} | set(net.outputs)
    for t in list(net.constants):
        if t not in read and (t in read_before or t not in existed):
            del net.constants[t]


@functools.cache
def _rows_tag() -> str:
    """The code of the kernels a segment calls (the row kernels, the selection), which a cached
    segment depends on (numba's cache does not look at callees)."""
    digest = hashlib.sha256()
    for mod in (rows, select, layout_copy):
        digest.update(Path(mod.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _sublayers(layer: Layer) -> list[Layer]:
    return [Layer(kind, list(ins), list(outs), dict(attrs), source)
            for kind, ins, outs, attrs, source in layer.attrs["layers"]]


def _signature(layer: Layer, net: Network):
    def array(t, readonly):
        tensor = net.tensors[t]
        return types.Array(numba.from_dtype(tensor.storage), len(tensor.shape), "C", readonly=readonly)
    return types.void(*[array(t, True) for t in layer.inputs], *[array(t, False) for t in layer.outputs])


def compiled(layer: Layer, net: Network):
    """The ``segment`` layer's kernel: the generated function, loaded from the kernel cache."""
    source = generate_source(layer, net)
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    with _lock:
        fn = _loaded.get(digest)
        if fn is None:
            path = _write_source(source, "seg_" + digest)
            name = f"_srcore_trt_like_segment_{digest}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[name] = module
            fn = _loaded[digest] = numba.njit(_signature(layer, net), cache=True,
                                              **fastmath.jit_options())(module.segment)
    return fn


# -- the choice ----------------------------------------------------------------------------------
def segment_layer(net: Network) -> Layer:
    """Every layer of ``net`` as one ``segment`` layer: it reads the engine inputs and constants the
    layers read and writes the engine outputs the layers make."""
    layers = _with_weights(net, net.layers)
    made = {t for layer in layers for t in layer.outputs}
    read = {t for layer in layers for t in layer.inputs}
    fixed = set(net.inputs) | set(net.constants)
    inputs = [t for t in (*net.inputs, *net.constants) if t in read]
    outputs = list(dict.fromkeys(t for t in net.outputs if t in made and t not in fixed))
    return _segment(net, layers, inputs, outputs)


def _with_weights(net: Network, layers) -> list[Layer]:
    """``layers`` with each ``gemm`` as a copy reading its weight, transposed to (K, N), as a new
    constant of ``net`` (a segment's arguments are tensors); the others as they are."""
    out = []
    for layer in layers:
        if layer.kind == "gemm":
            w = net.constant(np.ascontiguousarray(layer.attrs["weight"].T))
            layer = Layer("gemm", [*layer.inputs, w], list(layer.outputs), {}, layer.source)
        out.append(layer)
    return out


#: layers that only join a segment holding another kind too: a network or run of products and
#: pointwise layers alone keeps its BLAS and fused kernels (and builds without a numba compile)
_FOLLOWERS = frozenset({"gemm", "matmul", "fused_pointwise", "reshape"})


def _anchored(layers) -> bool:
    """Whether ``layers`` may be one segment: no product in it, or some layer other than a follower."""
    kinds = {layer.kind for layer in layers}
    return not kinds & {"gemm", "matmul"} or bool(kinds - _FOLLOWERS)


def _segment(net: Network, layers, inputs: list[int], outputs: list[int]) -> Layer:
    """``layers`` as the one ``segment`` layer reading ``inputs`` (its constants packed,
    :func:`_pack_constants`) and writing ``outputs``."""
    subs = tuple((layer.kind, tuple(layer.inputs), tuple(layer.outputs), dict(layer.attrs), layer.source)
                 for layer in layers)
    sources = [layer.source for layer in layers if layer.source]
    inputs, packed = _pack_constants(net, inputs)
    attrs = {"layers": subs, "packed": packed} if packed else {"layers": subs}
    return Layer("segment", inputs, outputs, attrs, sources[0] if sources else "")


def compile_small(net: Network, steps: list[Step], options: dict, name: str = "engine",
                  contexts=None, min_run: int = 2, whole: bool = True) -> list[Step]:
    """``steps`` as they are, or one ``segment`` step when the network compiles whole and that
    plan timed faster than the layer-by-layer one (engine option ``timing=False``: whenever it
    compiles). The network's layers become the one layer when it wins. A network that does not
    compile whole (a conv in it) gets its runs compiled instead (:func:`compile_runs`). Constants
    that only the layers now in segments read are dropped (:func:`_drop_superseded`). ``whole=False``:
    the network's segment is known not to compile (:func:`compile_untimed` tried): steps as they are."""
    if not whole or not options.get("fusion", True) or _excluded(options):
        return steps
    before = _constants_read(net, steps)
    steps = _compile_small(net, steps, options, name, contexts, min_run)
    _drop_superseded(net, before, steps)
    return steps


#: a whole network of products and pointwise layers alone is compiled from this many layers (not
#: counting reshapes): each call it saves costs ~0.5-1 us of Python and dispatch (N-BEATS's 22
#: layers on 3 rows: 15 us layer by layer), against one numba compile at the first build (cached)
WHOLE_MIN_LAYERS = 4


def _whole(layers) -> bool:
    """Whether a network of ``layers`` that compiles may be one segment: :func:`_anchored`, or a
    network of products and pointwise layers of :data:`WHOLE_MIN_LAYERS` or more (timing decides)."""
    return _anchored(layers) or sum(layer.kind != "reshape" for layer in layers) >= WHOLE_MIN_LAYERS


def compile_untimed(net: Network, options: dict, name: str = "engine") -> tuple[list[Step] | None, bool]:
    """With timing off (engine option ``timing=False``) a network that compiles whole is the one
    ``segment`` step whatever its layers' tactics (:func:`compile_small`), so it is compiled before any
    layer's tactic is built: their kernels (a numba compile each on a cold cache, 0.2-0.4 s for a fused
    pointwise group) would only be thrown away. Returns ``(steps, tried)``: steps None when timing is
    on, the network does not compile whole, or its segment does not compile (``tried``; its constants
    are then dropped again): build the layers' steps and :func:`compile_small` them (``whole=not tried``)."""
    if options.get("timing", True) or not options.get("fusion", True) or _excluded(options):
        return None, False
    if refusal(net) or not _whole(net.layers):
        return None, False
    before = set(net.constants), {t for layer in net.layers for t in layer.inputs if t in net.constants}
    layer = segment_layer(net)
    fn = _compile(layer, net, name)
    steps = [Step(layer, "numba", fn)] if fn is not None else None
    if steps is not None:
        net.layers = [layer]
    _drop_superseded(net, before, steps or [Step(other, "", None) for other in net.layers])
    return steps, True


def _compile_small(net: Network, steps: list[Step], options: dict, name: str, contexts, min_run: int):
    why = refusal(net) or (None if _whole(net.layers) else "products and pointwise layers only, fewer than "
                           f"{WHOLE_MIN_LAYERS}")
    if why:
        log.debug("%s: not compiled whole: %s", name, why)
        return compile_runs(net, steps, options, name, contexts, min_run)
    layer = segment_layer(net)
    fn = _compile(layer, net, name)
    if fn is None:
        return steps
    one = [Step(layer, "numba", fn)]
    if options.get("timing", True) and not _faster(net, steps, one, contexts, name):
        return steps
    net.layers = [layer]
    return one


def _compile(layer: Layer, net: Network, name: str):
    t0 = time.perf_counter()
    try:
        fn = compiled(layer, net)
    except numba.core.errors.NumbaError as exc:   # a generator gap: the layers stay as they are
        log.warning("%s: the compiled segment does not compile (%s); layer by layer", name,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return None
    log.info("%s: compiled (%d layers) in %.2f s", name, len(layer.attrs["layers"]), time.perf_counter() - t0)
    return fn


def _faster(net: Network, steps: list[Step], new: list[Step], contexts, name: str) -> bool:
    """Whether the plan of ``new`` timed faster than that of ``steps`` on random inputs."""
    rng = np.random.default_rng(0)
    xs = [random_input(net.tensors[t], rng) for t in net.inputs]
    plans = [Plan(net, steps, contexts), Plan(net, new, contexts)]
    with np.errstate(all="ignore"):
        times = best_times([lambda p=p: p.run(*xs) for p in plans], skip_failures=True)
    log.info("%s: layer by layer %.1f us, compiled %.1f us", name, times[0] * 1e6, times[1] * 1e6)
    return times[1] < times[0]


#: at most this many runs of one network are compiled (each is a numba compile at its first build)
MAX_RUNS = 4


def compile_runs(net: Network, steps: list[Step], options: dict, name: str = "engine",
                 contexts=None, min_run: int = 2) -> list[Step]:
    """Runs of consecutive compilable layers (of ``min_run`` or more calls, :func:`_calls`, not counting
    reshapes; or one :func:`_alone`) of a small network
    that does not compile whole, each as one ``segment`` step: a detection head's decoding (topk,
    integer arithmetic, casts, gathers, the box arithmetic and stack) between and after its convs
    cost 1-15 us a layer in numpy. Kept when the plan with them timed faster (``timing=False``:
    whenever they compile); their layers become the segment layers."""
    if len(net.layers) > MAX_LAYERS:
        return steps
    runs, run = [], []
    for i, step in enumerate(steps + [None]):
        if step is not None and _compilable(step.layer, net):
            run.append(i)
            continue
        while run and steps[run[-1]].layer.kind == "reshape":   # (a view at the edge: no copy out)
            run.pop()
        while run and steps[run[0]].layer.kind == "reshape":
            run.pop(0)
        body = [steps[k].layer for k in run if steps[k].layer.kind != "reshape"]
        if (sum(map(_calls, body)) >= min_run or len(body) == 1 and _alone(body[0])) and _anchored(body):
            runs.append(run)
        run = []
    if not runs:
        return steps
    new, at = [], 0
    for run in sorted(sorted(runs, key=len, reverse=True)[:MAX_RUNS], key=lambda r: r[0]):   # the longest
        inside = {id(steps[k].layer) for k in run}
        later = {t for s in steps[run[-1] + 1:] for t in s.layer.inputs if id(s.layer) not in inside}
        layer = _run_layer(net, [steps[k].layer for k in run], later)
        fn = _compile(layer, net, name)
        new += steps[at:run[0]]
        new += [Step(layer, "numba", fn)] if fn is not None else steps[run[0]:run[-1] + 1]
        at = run[-1] + 1
    new += steps[at:]
    if len(new) == len(steps) or options.get("timing", True) and not _faster(net, steps, new, contexts, name):
        return steps
    net.layers = [s.layer for s in new]
    return new


def _calls(layer: Layer) -> int:
    """The calls a layer costs laid out alone: a cat with a folded permute copies each piece in its
    own (a detection head's cats over 3-5 levels, ~1 us each), any other layer one (a plain cat's
    pieces may be written in place, ``builder/plan.py``: no copy to save)."""
    return len(layer.inputs) if layer.kind == "cat" and layer.attrs.get("permuted") else 1


def _alone(layer: Layer) -> bool:
    """A layer compiled even as a run of one: a decoder's ``logsumexp`` is seven numpy calls (~8 us
    on 2 x 9 rows of 20) and a few loops compiled."""
    return layer.kind == "reduce" and layer.attrs["op"] == "logsumexp"


def _compilable(layer: Layer, net: Network) -> bool:
    if _layer_refusal(layer, net):
        return False
    return all(net.tensors[t].size <= MAX_TENSOR and net.tensors[t].dtype in _NP
               for t in (*layer.inputs, *layer.outputs))


def _run_layer(net: Network, layers: list[Layer], later: set[int]) -> Layer:
    """``layers`` as one ``segment`` layer: it reads what they read and do not make, and writes what
    they make that a later layer reads or the engine returns."""
    layers = _with_weights(net, layers)
    made = {t for layer in layers for t in layer.outputs}
    inputs = list(dict.fromkeys(t for layer in layers for t in layer.inputs if t not in made))
    keep = later | set(net.outputs)
    outputs = list(dict.fromkeys(t for layer in layers for t in layer.outputs if t in keep))
    return _segment(net, layers, inputs, outputs)


def _excluded(options: dict) -> bool:
    return "segment" in options.get("exclude_tactics", ())

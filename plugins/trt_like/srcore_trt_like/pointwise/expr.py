"""The expression model of a pointwise kernel: :class:`Input`, :class:`Const` and :class:`Op` nodes
(compared by value, so a subexpression built twice is computed once) and the :class:`Program` they
form, validated when made (:class:`PointwiseError` names the culprit)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Union

import attrs
import numpy as np

from srcore.plugin import EngineBuildError

from .ops import OPS


class PointwiseError(EngineBuildError):
    """A pointwise program that cannot be compiled: an unknown op, a wrong arity or parameter,
    an input of another dtype or of a shape that does not broadcast; names the culprit."""


def _float32(value, what: str) -> float:
    """``value`` rounded to float32 (once, as torch converts a Python scalar for a float32 op),
    kept as the Python float of that float32."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PointwiseError(f"{what} must be a real number, not {type(value).__name__} {value!r}")
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _shape(shape) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise PointwiseError(f"a shape must be a sequence of ints, not {shape!r}") from None
    if any(d < 0 for d in dims):
        raise PointwiseError(f"shape {dims} has a negative dimension")
    return dims


@attrs.frozen(cache_hash=True)
class Input:
    """A tensor operand of the kernel, called ``name`` in messages, of ``shape`` (it broadcasts
    to the program's shape) and ``dtype`` (only float32 compiles)."""

    name: str
    shape: tuple[int, ...] = attrs.field(converter=_shape)
    dtype: str = "float32"


@attrs.frozen(cache_hash=True)
class Const:
    """A scalar operand; ``value`` is rounded to float32 when the node is made."""

    value: float = attrs.field(converter=lambda v: _float32(v, "a constant"))


Node = Union[Input, Const, "Op"]


def _as_node(value) -> Node:
    return value if isinstance(value, (Input, Const, Op)) else Const(value)


def _as_nodes(values) -> tuple[Node, ...]:
    return tuple(_as_node(v) for v in values)


@attrs.frozen(cache_hash=True)
class Op:
    """The op ``name`` of :data:`~srcore_trt_like.pointwise.ops.OPS` applied to ``args`` (nodes;
    numbers become :class:`Const`), with ``params`` in the op's declared order, float32-rounded.
    :func:`op` makes one with named parameters and their defaults."""

    name: str
    args: tuple[Node, ...] = attrs.field(converter=_as_nodes)
    params: tuple[float, ...] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self):
        d = OPS.get(self.name)
        if d is None:
            raise PointwiseError(f"unknown pointwise op {self.name!r}; known ops: {', '.join(sorted(OPS))}")
        if len(self.args) != d.arity:
            raise PointwiseError(f"op {self.name!r} takes {d.arity} operand(s), got {len(self.args)}")
        if len(self.params) != len(d.params):
            raise PointwiseError(f"op {self.name!r} takes parameters {list(d.param_names)}, "
                                 f"got {len(self.params)} value(s)")
        rounded = tuple(_float32(v, f"parameter {n!r} of op {self.name!r}")
                        for n, v in zip(d.param_names, self.params))
        object.__setattr__(self, "params", rounded)


def op(name: str, *args, **params) -> Op:
    """An :class:`Op` with parameters by name; a parameter left out or given as ``None`` takes
    its default (``op("clamp", x, min=0.0)``, ``op("leaky_relu", x, negative_slope=0.2)``)."""
    d = OPS.get(name)
    if d is None:
        raise PointwiseError(f"unknown pointwise op {name!r}; known ops: {', '.join(sorted(OPS))}")
    unknown = sorted(set(params) - set(d.param_names))
    if unknown:
        raise PointwiseError(f"op {name!r} has no parameter {', '.join(map(repr, unknown))}; "
                             f"its parameters: {list(d.param_names) or 'none'}")
    values = []
    for pname, default in d.params:
        value = params.get(pname)
        if value is None:
            if default is None:
                raise PointwiseError(f"op {name!r} needs parameter {pname!r}")
            value = default
        values.append(value)
    return Op(name, args, tuple(values))


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    if len(shape) > len(to):
        return False
    return all(s == 1 or s == t for s, t in zip(shape[::-1], to[::-1]))


def _broadcast_shape(shapes: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise PointwiseError(f"input shapes {list(shapes)} do not broadcast together") from None


def _topological(outputs: Iterable[Node]) -> list[Node]:
    """Every node the outputs depend on, operands before users (iterative: chains can be long)."""
    order: list[Node] = []
    done: set[Node] = set()
    for root in outputs:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in done:
                continue
            if expanded or not isinstance(node, Op):
                done.add(node)
                order.append(node)
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.args) if a not in done)
    return order


@attrs.frozen
class Program:
    """A pointwise kernel's meaning: its tensor ``inputs`` (the kernel's arguments, in order),
    its ``outputs`` (expressions; numbers become constants) and the output ``shape`` (default:
    the inputs' broadcast shape). Validated when made: :class:`PointwiseError` names the culprit."""

    inputs: tuple[Input, ...] = attrs.field(converter=tuple)
    outputs: tuple[Node, ...] = attrs.field(converter=_as_nodes)
    shape: tuple[int, ...] | None = attrs.field(default=None)

    def __attrs_post_init__(self):
        for i, inp in enumerate(self.inputs):
            if not isinstance(inp, Input):
                raise PointwiseError(f"input {i} is {type(inp).__name__}, not an Input")
            if inp.dtype != "float32":
                raise PointwiseError(f"input {inp.name!r} is {inp.dtype}: pointwise kernels compute float32 only")
        names = [inp.name for inp in self.inputs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise PointwiseError(f"input name(s) {twice} given more than once")
        if self.shape is None:
            object.__setattr__(self, "shape", _broadcast_shape([inp.shape for inp in self.inputs]))
        else:
            object.__setattr__(self, "shape", _shape(self.shape))
        for inp in self.inputs:
            if not _broadcasts(inp.shape, self.shape):
                raise PointwiseError(f"input {inp.name!r} of shape {inp.shape} does not broadcast to "
                                     f"the output shape {self.shape}")
        if not self.outputs:
            raise PointwiseError("a pointwise program needs at least one output")
        known = set(self.inputs)
        by_name = {inp.name: inp for inp in self.inputs}
        for node in _topological(self.outputs):
            if isinstance(node, Input) and node not in known:
                if node.name in by_name:
                    raise PointwiseError(f"the expression uses input {node.name!r} of shape {node.shape} "
                                         f"{node.dtype}, but the program's input {node.name!r} has shape "
                                         f"{by_name[node.name].shape} {by_name[node.name].dtype}")
                raise PointwiseError(f"the expression uses input {node.name!r}, which is not among the "
                                     f"program's inputs {names}")

    def nodes(self) -> list[Node]:
        """Every node the outputs need, operands first (shared subexpressions once)."""
        return _topological(self.outputs)

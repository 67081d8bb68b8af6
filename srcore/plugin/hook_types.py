"""Plugin records of the hooks a selective start never calls: op libraries, dtypes, shape rules, decompositions,
engine builders and subcommands (``srcore.plugin`` and ``srcore.plugin.types`` export them; this module,
and the building of its classes, loads on first use).
"""
from __future__ import annotations

from typing import Any, Callable

import attrs

from .._convert import to_tuple as _to_tuple
from .._repr import shared_repr
from .types import _OP_OR_WILDCARD_RE, _REF_RE, ImplRef, PluginInfo, _check_impl, _check_name, _stamp


@attrs.frozen
@shared_repr
class OpLibrary:
    """Op declarations of one namespace: schema strings, or a declaration file in a package.

    ``OpLibrary("example", schemas=("example::f(Tensor self) -> Tensor",))`` or
    ``OpLibrary.from_resource("example", "srcore_example", "ops.yaml")``.
    """

    namespace: str = attrs.field(validator=_check_name("namespace"))
    schemas: tuple[str, ...] = attrs.field(default=(), converter=_to_tuple)
    resource: tuple[str, str] | None = None  # (package, file name) of a `- func:` YAML file
    provider: PluginInfo | None = attrs.field(default=None, eq=False)

    @classmethod
    def from_resource(cls, namespace: str, package: str, name: str) -> "OpLibrary":
        return cls(namespace, resource=(package, name))

    def provided_by(self, plugin: PluginInfo) -> "OpLibrary":
        return _stamp(self, plugin)


@attrs.frozen
@shared_repr
class DType:
    """A dtype beyond numpy's, such as ``quint8`` (kind: float, int, bool, complex, quantized)."""

    name: str = attrs.field(validator=_check_name("dtype"))
    kind: str = "quantized"
    storage: str | None = None  # numpy dtype of the stored values, e.g. "uint8" for quint8
    params: tuple[tuple[str, Any], ...] = attrs.field(default=(), converter=lambda p: tuple(dict(p).items()))
    provider: PluginInfo | None = attrs.field(default=None, eq=False)

    def provided_by(self, plugin: PluginInfo) -> "DType":
        return _stamp(self, plugin)


@attrs.frozen
@shared_repr
class Decomposition:
    """An op rewritten as a small graph of other ops, used at load when no listed backend has an
    out or native kernel for it (torch's decomposition table, as records).

    ``graph`` is IR text whose inputs are the op's arguments in schema order and whose outputs
    are its returns, e.g. for ``aten::__and__.Tensor``::

        graph(%self : Tensor, %other : Tensor):
          %r : Tensor = aten::bitwise_and(%self, %other)
          return (%r)

    or a callable (or ``"module:attribute"``) ``graph(schema, schemas) -> str | None`` that writes
    it for the op's ``FunctionSchema`` (``schemas``: the registry's, to find sibling overloads),
    None when it cannot; with ``op="ns::*"`` it is asked for every op of the namespace without a
    decomposition of its own.
    """

    op: str = attrs.field()
    graph: Any = attrs.field(eq=False)
    provider: PluginInfo | None = attrs.field(default=None, eq=False)

    @op.validator
    def _check_op(self, attribute, value):
        if not isinstance(value, str) or not _OP_OR_WILDCARD_RE.match(value):
            raise ValueError(f"invalid op name {value!r}: expected 'namespace::name.overload' or 'namespace::*'")

    @graph.validator
    def _check_graph(self, attribute, value):
        if not (callable(value) or isinstance(value, str)):
            raise ValueError(f"a decomposition's graph is IR text, a callable or 'module:attribute', not {value!r}")

    @property
    def is_generator(self) -> bool:
        """True if ``graph`` writes the IR text per op (a callable or a ``"module:attribute"``)."""
        return callable(self.graph) or bool(_REF_RE.match(self.graph.strip()))

    def provided_by(self, plugin: PluginInfo) -> "Decomposition":
        return _stamp(self, plugin)


@attrs.frozen
@shared_repr
class EngineBuilder:
    """An engine backend (trt_like): which nodes it supports, how to build and load engines.

    ``ops`` (optional): a callable (or ``"module:attr"``) returning the engine's op table as
    :class:`EngineOp` records (``srcore list-ops --engine BACKEND``)."""

    backend: str
    supports: ImplRef = attrs.field(eq=False)
    build: ImplRef = attrs.field(eq=False)
    load: ImplRef | None = attrs.field(default=None, eq=False)
    provider: PluginInfo | None = attrs.field(default=None, eq=False)
    ops: ImplRef | None = attrs.field(default=None, eq=False)

    def provided_by(self, plugin: PluginInfo) -> "EngineBuilder":
        return _stamp(self, plugin)


@attrs.frozen
@shared_repr
class Subcommand:
    """A ``srcore SUBCOMMAND`` contributed by a plugin."""

    name: str
    summary: str
    configure_parser: Callable[[Any], None] = attrs.field(eq=False)
    run: Callable[[Any], int] = attrs.field(eq=False)
    provider: PluginInfo | None = attrs.field(default=None, eq=False)

    def provided_by(self, plugin: PluginInfo) -> "Subcommand":
        return _stamp(self, plugin)


@attrs.frozen
@shared_repr
class ShapeRule:
    """The dtype/shape rule of some ops: ``rule(ctx) -> list`` of output types, one per output.

    ``ops`` are qualified overload names (``"mylib::f.out"``), base names
    (``"mylib::f"``: every overload without a rule of its own) or ``"ns::*"``
    (every op of the namespace without a rule of its own). ``rule`` is a
    callable or a ``"module:attribute"`` string imported on first use; it gets
    a :class:`srcore.plugin.ShapeContext` (``ctx.tensor(0, "self")``,
    ``ctx.known(1, "dim")``, ...) and returns one ``TensorType`` (or abstract
    value, or other IR type) per node output, like the core's own rules
    (docs/shapes.md). It may raise :class:`srcore.ShapeError` (``raise
    ctx.fail("...")``) for inputs that contradict each other.
    """

    ops: tuple[str, ...] = attrs.field(converter=_to_tuple)
    rule: ImplRef = attrs.field(validator=_check_impl, eq=False)
    provider: PluginInfo | None = attrs.field(default=None, eq=False)

    @ops.validator
    def _check_ops(self, attribute, value):
        if not value:
            raise ValueError("a ShapeRule names no op")
        for op in value:
            if not isinstance(op, str) or not _OP_OR_WILDCARD_RE.match(op):
                raise ValueError(f"invalid op name {op!r}: expected 'namespace::name', 'namespace::name.overload' "
                                 "or 'namespace::*'")

    def provided_by(self, plugin: PluginInfo) -> "ShapeRule":
        return _stamp(self, plugin)

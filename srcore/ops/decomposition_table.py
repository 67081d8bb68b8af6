"""The registry's decompositions: one record per op (or ``"ns::*"``), parsed and type-checked on first use.

Kept apart from :mod:`srcore.passes.decompose` (which applies them at load) so that building the
registry imports neither the passes nor numpy.
"""
from __future__ import annotations

from typing import Any

import attrs

from .._repr import shared_repr
from ..errors import PluginError, SrcoreError

_STRUCTURAL = ("prim::Constant", "prim::If", "prim::Loop", "prim::Param", "prim::Return")


@attrs.define
@shared_repr
class DecompositionTable:
    """Decompositions by op overload (or ``"ns::*"``), first provider wins; parsed graphs cached."""

    _by_op: dict[str, Any] = attrs.field(factory=dict, alias="_by_op")
    _graphs: dict[str, Any] = attrs.field(factory=dict, alias="_graphs")

    def add(self, record) -> Any:
        """Add a ``Decomposition``; returns the record already there for its op instead, if any."""
        old = self._by_op.get(record.op)
        if old is None:
            self._by_op[record.op] = record
        return old

    def lookup(self, op: str):
        """The record for ``op``, else its namespace's generator (``"ns::*"``), else None."""
        rec = self._by_op.get(op)
        if rec is None and "::" in op:
            rec = self._by_op.get(op.split("::", 1)[0] + "::*")
        return rec

    def records(self) -> list:
        return list(self._by_op.values())

    def __len__(self) -> int:
        return len(self._by_op)

    def graph_for(self, schema, schemas):
        """``(graph, record)`` decomposing ``schema``'s op, or None; raises ``PluginError`` for a broken one."""
        op = schema.qualified_name
        if op in self._graphs:
            return self._graphs[op]
        rec = self.lookup(op)
        got = None
        if rec is not None:
            text = _text(rec, schema, schemas)
            if text is not None:
                got = (_parse_checked(rec, op, text, schema, schemas), rec)
        self._graphs[op] = got
        return got


def _who(rec) -> str:
    p = rec.provider
    return f"plugin {p.name} ({p})" if p is not None else "an unregistered decomposition"


def _text(rec, schema, schemas) -> str | None:
    if not rec.is_generator:
        return rec.graph
    fn = rec.graph
    if isinstance(fn, str):
        from ..dispatch.lazy import import_ref

        try:
            fn = import_ref(fn.strip())
        except Exception as exc:
            raise PluginError(f"{_who(rec)}: cannot import the decomposition {rec.graph!r} of {schema.qualified_name}: "
                              f"{type(exc).__name__}: {exc}") from exc
    try:
        return fn(schema, schemas)
    except Exception as exc:
        raise PluginError(f"{_who(rec)}: the decomposition generator {rec.graph!r} failed for "
                          f"{schema.qualified_name}: {type(exc).__name__}: {exc}") from exc


def _kind_of_schema_type(t) -> str:
    name = type(t).__name__
    if name == "OptionalType":
        return _kind_of_schema_type(t.elem)
    if name == "ListType":
        return "list"
    return "tensor" if getattr(t, "name", None) == "Tensor" else "other"


def _kind_of_ir_type(t) -> str:
    from ..ir.types import ListType, OptionalType, TensorType

    if isinstance(t, OptionalType):
        return _kind_of_ir_type(t.elem)
    if isinstance(t, ListType):
        return "list"
    return "tensor" if isinstance(t, TensorType) else "other"


def _parse_checked(rec, op: str, text: str, schema, schemas):
    from ..ir.parser import parse_graph

    def fail(why: str) -> PluginError:
        return PluginError(f"{_who(rec)}: the decomposition of {op} does not type-check: {why}")

    try:
        g = parse_graph(text, filename=f"<decomposition of {op}>")
    except SrcoreError as exc:
        raise fail(str(exc)) from None
    if len(g.inputs) != len(schema.arguments):
        raise fail(f"it takes {len(g.inputs)} input(s), the op {len(schema.arguments)} ({schema})")
    if len(g.outputs) != len(schema.returns):
        raise fail(f"it returns {len(g.outputs)} value(s), the op {len(schema.returns)} ({schema})")
    for v, a in zip(g.inputs, schema.arguments):
        if _kind_of_ir_type(v.type) != _kind_of_schema_type(a.type):
            raise fail(f"input %{v.name} : {v.type} stands for argument {a} ")
    for v, r in zip(g.outputs, schema.returns):
        if _kind_of_ir_type(v.type) != _kind_of_schema_type(r.type):
            raise fail(f"output %{v.name} : {v.type} stands for return {r}")
    for n in g.all_nodes():
        if n.kind in _STRUCTURAL:
            continue
        try:
            n.schema = schemas.resolve(n)
        except SrcoreError as exc:
            raise fail(str(exc).splitlines()[0]) from None
        if n.schema.qualified_name == op:
            raise fail(f"it calls {op} itself")
    return g

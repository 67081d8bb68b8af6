"""``SchemaRegistry``: every declared op overload, by qualified name, and overload resolution."""
from __future__ import annotations

import os
from typing import Any, Iterable

from ..errors import RegistrationError, VerificationError
from . import matching
from .declarations import Declaration
from .schema import FunctionSchema

__all__ = ["SchemaRegistry", "default_registry", "cached_default_registry", "core_declaration_files", "CORE_PROVIDER"]

CORE_PROVIDER = "srcore"
CORE_FILES = ("aten.yaml", "aten_quantized.yaml", "prim.yaml", "srcore.yaml", "quantized.yaml")


class SchemaRegistry:
    """Op schemas keyed by qualified name (``aten::add.Tensor``), with their provider and source."""

    def __init__(self) -> None:
        self._by_qname: dict[str, tuple[FunctionSchema, str | None, str | None]] = {}
        self._by_name: dict[str, list[FunctionSchema]] = {}

    def add(self, schema: FunctionSchema | str, provider: str | None = None, source: str | None = None) -> FunctionSchema:
        """Register one overload; the same schema again from the same provider is a no-op.

        Raises :class:`srcore.RegistrationError` when another provider (or another schema)
        already holds the qualified name, naming both.
        """
        if isinstance(schema, str):
            schema = FunctionSchema.parse(schema, source=source)
        q = schema.qualified_name
        old = self._by_qname.get(q)
        if old is not None:
            old_schema, old_provider, old_source = old
            old_schema = _built(old_schema)
            if old_schema == schema and old_provider == provider:
                return old_schema
            raise RegistrationError(
                f"{q} is declared by {_who(provider, source)} and already by {_who(old_provider, old_source)}"
                + ("" if old_schema == schema else f":\n  {old_schema}\n  {schema}"))
        self._by_qname[q] = (schema, provider, source)
        self._by_name.setdefault(schema.name, []).append(schema)
        return schema

    def add_lazy(self, op: Any, provider: str | None = None) -> None:
        """Register an overload whose schema is built on first look-up: ``op`` has ``qualified_name``,
        ``name``, ``source`` and a ``schema`` property (``srcore.plugin.schemas.DeclaredOp``). The
        caller has checked that the name is not taken."""
        q = op.qualified_name
        if q in self._by_qname:
            raise RegistrationError(f"{q} is declared by {_who(provider, op.source)} and already by "
                                    f"{_who(self._by_qname[q][1], self._by_qname[q][2])}")
        self._by_qname[q] = (op, provider, op.source)
        self._by_name.setdefault(op.name, []).append(op)

    def add_declarations(self, decls: Iterable[Declaration], provider: str | None = None) -> None:
        """Register every declaration (``load_declarations``/``load_schemas`` output)."""
        for d in decls:
            self.add(d.schema, provider, d.source)

    def get(self, qualified_name: str) -> FunctionSchema:
        """The overload ``ns::name.overload`` (``ns::name`` for the empty overload); KeyError if unknown."""
        entry = self._by_qname.get(qualified_name)
        if entry is None:
            raise KeyError(f"no schema {qualified_name!r} is declared")
        return _built(entry[0])

    def find(self, qualified_name: str) -> FunctionSchema | None:
        entry = self._by_qname.get(qualified_name)
        return None if entry is None else _built(entry[0])

    def provider(self, qualified_name: str) -> str | None:
        return self._by_qname[qualified_name][1]

    def source(self, qualified_name: str) -> str | None:
        return self._by_qname[qualified_name][2]

    def overloads(self, name: str) -> list[FunctionSchema]:
        """Every overload of ``ns::name``, in declaration order."""
        return [_built(s) for s in self._by_name.get(name, ())]

    def names(self) -> list[str]:
        """Every qualified name, in declaration order."""
        return list(self._by_qname)

    def __contains__(self, qualified_name: object) -> bool:
        return qualified_name in self._by_qname

    def __len__(self) -> int:
        return len(self._by_qname)

    def resolve(self, node: Any) -> FunctionSchema:
        """The overload of ``node.kind`` a node calls: cheapest match, then declaration order.

        Raises :class:`srcore.VerificationError` naming the node kind, its input types, its
        source and the candidate schemas when none matches.
        """
        kind = node.kind
        best, best_score = None, None
        candidates = self.overloads(kind)
        for s in candidates:
            score = matching.match_score(node, s)
            if score is not None and (best_score is None or score < best_score):
                best, best_score = s, score
                if score == 0:
                    break
        if best is not None:
            return best
        types = ", ".join(str(v.type) for v in node.inputs)
        outs = len(node.outputs)
        src = getattr(node, "source", None)
        where = f" at {src}" if src else ""
        if not candidates:
            raise VerificationError(f"{kind}({types}){where}: no op {kind!r} is declared")
        listing = "\n  ".join(str(s) for s in candidates)
        raise VerificationError(f"{kind}({types}) with {outs} output(s){where} matches no schema; "
                                f"candidates:\n  {listing}")


def _built(entry) -> FunctionSchema:
    """The schema of a registry entry (one added by ``add_lazy`` is built now)."""
    return entry if isinstance(entry, FunctionSchema) else entry.schema


def _who(provider: str | None, source: str | None) -> str:
    p = provider or "<unknown provider>"
    return f"{p} ({source})" if source else p


def core_declaration_files() -> list[str]:
    """Paths of the declaration files srcore ships (aten, prim, srcore fused ops)."""
    here = os.path.dirname(__file__)
    if all(os.path.isfile(os.path.join(here, name)) for name in CORE_FILES):
        return [os.path.join(here, name) for name in CORE_FILES]  # no importlib.resources (~10 ms of imports)
    from importlib import resources  # a zipped install

    root = resources.files("srcore.ops")
    return [str(root / name) for name in CORE_FILES]


def default_registry() -> SchemaRegistry:
    """A new registry holding the core's aten.yaml + prim.yaml + srcore.yaml (via the schema cache).

    Each call returns a fresh registry (the parsed declarations are shared), so plugin
    libraries added to one never leak into another.
    """
    from .cache import load_schemas

    reg = SchemaRegistry()
    reg.add_declarations(load_schemas(core_declaration_files()), "srcore")
    return reg


_SHARED: list[SchemaRegistry] = []


def cached_default_registry() -> SchemaRegistry:
    """One shared :func:`default_registry`, for read-only look-ups (never add to it)."""
    if not _SHARED:
        _SHARED.append(default_registry())
    return _SHARED[0]

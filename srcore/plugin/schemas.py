"""Turning ``OpLibrary`` records into parsed schemas in a ``SchemaRegistry``.

A thin adapter over :mod:`srcore.ops` (schema parser, declaration files and
their cache), so that the plugin manager does not depend on their details.
"""
from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..dispatch.table import op_key
from ..errors import RegistrationError
if TYPE_CHECKING:
    from .types import OpLibrary


def new_schema_registry() -> Any:
    """A fresh, empty ``srcore.ops.registry.SchemaRegistry``."""
    from ..ops.registry import SchemaRegistry

    return SchemaRegistry()


def resource_path(lib: OpLibrary):
    """The file of a ``from_resource`` library (a plain path when the package is a directory)."""
    package, name = lib.resource
    spec = importlib.util.find_spec(package)
    for location in (spec.submodule_search_locations or ()) if spec else ():
        path = os.path.join(location, name)
        if os.path.isfile(path):
            return path
    from importlib import resources  # zipped packages; costs a few ms of imports, so only when needed

    return resources.files(package) / name


class DeclaredOp:
    """One declaration of an op library, by name; its ``Declaration`` (and schema) built on first use.

    The full registry declares ~1,650 overloads at start-up and a model uses a few: the names come
    from the cached rows (:class:`srcore.ops.cache.CachedDeclarations`), the schemas when looked at.
    """

    __slots__ = ("qualified_name", "name", "source", "binds_kernels", "_rows", "_index", "_namespace", "_decl")

    def __init__(self, rows, index: int, namespace: str):
        self._rows, self._index, self._namespace, self._decl = rows, index, namespace, None
        if hasattr(rows, "binds_kernels"):  # cached rows: nothing is built yet
            (name, overload), self.source, self.binds_kernels = rows.names(index), rows.source(index), \
                rows.binds_kernels(index)
        else:
            d = self._decl = _qualify(rows[index], namespace)
            name, overload, self.source = d.schema.name, d.schema.overload_name, d.source
            self.binds_kernels = bool(d.dispatch) or d.structured_delegate is not None
        if "::" not in name:  # native_functions.yaml leaves the namespace out (as _qualify adds it)
            name = f"{namespace}::{name}"
        self.name = name
        self.qualified_name = op_key(f"{name}.{overload}" if overload else name)

    @classmethod
    def of(cls, decl, namespace: str) -> "DeclaredOp":
        return cls((decl,), 0, namespace)

    @classmethod
    def all_of(cls, rows, namespace: str) -> list["DeclaredOp"]:
        """One per row of cached declarations (``CachedDeclarations``), the same as ``cls(rows, i,
        namespace)`` for each ``i`` but in one pass over the rows' summaries (~5x faster)."""
        new, out = object.__new__, []
        for i, (name, overload, source, binds) in enumerate(rows.summaries()):
            op = new(cls)
            op._rows, op._index, op._namespace, op._decl = rows, i, namespace, None
            op.source, op.binds_kernels = source, binds
            if "::" not in name:
                name = f"{namespace}::{name}"
            op.name = name
            op.qualified_name = op_key(f"{name}.{overload}" if overload else name)
            out.append(op)
        return out

    @property
    def declaration(self):
        d = self._decl
        if d is None:
            d = self._decl = _qualify(self._rows[self._index], self._namespace)
        return d

    @property
    def schema(self):
        return self.declaration.schema


def library_entries(lib: OpLibrary) -> list[DeclaredOp]:
    """Every declaration of the library (inline schemas too) as a :class:`DeclaredOp`, names qualified
    with its namespace (a YAML ``func: acosh(...)`` of library ``mylib`` declares ``mylib::acosh``);
    parse errors propagate."""
    out = []
    if lib.resource is not None:
        from ..ops.cache import load_schemas_lazily

        rows = load_schemas_lazily(resource_path(lib))
        out.extend(DeclaredOp.all_of(rows, lib.namespace) if hasattr(rows, "summaries")
                   else (DeclaredOp(rows, i, lib.namespace) for i in range(len(rows))))
    if lib.schemas:
        from ..ops.declarations import Declaration
        from ..ops.schema import FunctionSchema

        who = str(lib.provider) if lib.provider else lib.namespace
        for text in lib.schemas:
            out.append(DeclaredOp.of(Declaration(FunctionSchema.parse(text), f"{who} ({lib.namespace} op library)"),
                                     lib.namespace))
    core = lib.provider is not None and lib.provider.name == "builtin"  # core files may mix aten/prim
    for op in () if core else out:
        ns = op.qualified_name.split("::", 1)[0]
        if ns != lib.namespace:
            raise RegistrationError(f"op library {lib.namespace!r} declares {op.qualified_name!r}, "
                                    f"which is outside its namespace ({op.source})")
    return out


def library_declarations(lib: OpLibrary) -> list:
    """Every declaration of the library, built (see :func:`library_entries`)."""
    return [op.declaration for op in library_entries(lib)]


class DeclaredOps(Mapping):
    """``Registry.declared``: qualified overload name -> ``(schema, PluginInfo)``, the schema built on
    first look-up (names, membership and length need none)."""

    __slots__ = ("_ops",)

    def __init__(self, ops: dict):  # qualified name -> (DeclaredOp, PluginInfo)
        self._ops = ops

    def __getitem__(self, key):
        op, info = self._ops[key]
        return op.schema, info

    def __contains__(self, key) -> bool:
        return key in self._ops

    def __iter__(self):
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        return f"<DeclaredOps: {len(self._ops)} ops>"


def _qualify(decl, namespace: str):
    """``acosh.out`` -> ``namespace::acosh.out`` (native_functions.yaml leaves the namespace out)."""
    import attrs

    if "::" in decl.schema.name:
        return decl
    changes = {"schema": attrs.evolve(decl.schema, name=f"{namespace}::{decl.schema.name}")}
    if decl.structured_delegate is not None and "::" not in decl.structured_delegate:
        changes["structured_delegate"] = f"{namespace}::{decl.structured_delegate}"
    return attrs.evolve(decl, **changes)


def schema_name(schema: Any) -> str:
    """The canonical qualified overload name of a parsed schema."""
    return op_key(schema.qualified_name)

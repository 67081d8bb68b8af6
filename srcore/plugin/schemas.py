"""Turning ``OpLibrary`` records into parsed schemas in a ``SchemaRegistry``.

A thin adapter over :mod:`srcore.ops` (schema parser, declaration files and
their cache), so that the plugin manager does not depend on their details.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Any

from ..dispatch.table import op_key
from ..errors import RegistrationError
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


def library_declarations(lib: OpLibrary) -> list:
    """Every declaration of the library (inline schemas too), names qualified with its namespace
    (a YAML ``func: acosh(...)`` of library ``mylib`` declares ``mylib::acosh``); parse errors propagate."""
    from ..ops.declarations import Declaration

    out = []
    if lib.resource is not None:
        path = resource_path(lib)
        for decl in _load_declarations(path):
            out.append(_qualify(decl, lib.namespace))
    if lib.schemas:
        from ..ops.schema import FunctionSchema

        who = str(lib.provider) if lib.provider else lib.namespace
        for text in lib.schemas:
            out.append(Declaration(FunctionSchema.parse(text), f"{who} ({lib.namespace} op library)"))
    core = lib.provider is not None and lib.provider.name == "builtin"  # core files may mix aten/prim
    for decl in () if core else out:
        ns = schema_name(decl.schema).split("::", 1)[0]
        if ns != lib.namespace:
            raise RegistrationError(f"op library {lib.namespace!r} declares {schema_name(decl.schema)!r}, "
                                    f"which is outside its namespace ({decl.source})")
    return out


def _qualify(decl, namespace: str):
    """``acosh.out`` -> ``namespace::acosh.out`` (native_functions.yaml leaves the namespace out)."""
    import attrs

    if "::" in decl.schema.name:
        return decl
    changes = {"schema": attrs.evolve(decl.schema, name=f"{namespace}::{decl.schema.name}")}
    if decl.structured_delegate is not None and "::" not in decl.structured_delegate:
        changes["structured_delegate"] = f"{namespace}::{decl.structured_delegate}"
    return attrs.evolve(decl, **changes)


def _load_declarations(path) -> list:
    """Parsed declarations of a ``- func:`` file, through the schema cache."""
    from ..ops.cache import load_schemas

    return list(load_schemas([path]))


def schema_name(schema: Any) -> str:
    """The canonical qualified overload name of a parsed schema."""
    return op_key(schema.qualified_name)

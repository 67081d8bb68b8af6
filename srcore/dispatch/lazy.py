"""Kernels given as ``"module:attribute"`` strings, imported when a model first uses them.

Plugins list kernels by name so that discovering plugins imports no kernel
module (and no numpy); the import happens during static dispatch, once per
string, and its failure names the plugin, its version and the op.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from ..errors import PluginError
from ..plugin.types import PluginInfo

_cache: dict[str, Callable[..., Any]] = {}


def import_ref(ref: str) -> Any:
    """Import ``"package.module:attr.sub"`` and return the attribute (cached)."""
    try:
        return _cache[ref]
    except KeyError:
        pass
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    _cache[ref] = obj
    return obj


def resolve_ref(ref: Any, *, provider: PluginInfo | None, op: str, what: str = "impl",
                source: str | None = None) -> Callable[..., Any]:
    """A callable, or the import of a ``"module:attr"`` string (or of an object's ``resolve_at_load()``);
    failures are :class:`PluginError` naming the plugin, the op and, given ``source``, where the kernel
    was declared."""
    resolve = getattr(ref, "resolve_at_load", None)
    if not isinstance(ref, str) and resolve is None:
        return ref
    who = f"plugin {provider.name} ({provider})" if provider else "an unregistered kernel"
    where = f" (declared at {source})" if source else ""
    name = ref if isinstance(ref, str) else getattr(ref, "ref", ref)
    try:
        obj = import_ref(ref) if isinstance(ref, str) else resolve()
    except Exception as exc:  # ImportError, AttributeError, or an error raised by the module itself
        raise PluginError(f"{who}: cannot import {what} {name!r} of the kernel for {op}{where}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not callable(obj):
        raise PluginError(f"{who}: {what} {name!r} of the kernel for {op}{where} is not callable")
    return obj

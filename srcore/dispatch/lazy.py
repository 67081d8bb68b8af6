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


def resolve_ref(ref: Any, *, provider: PluginInfo | None, op: str, what: str = "impl") -> Callable[..., Any]:
    """A callable, or the import of a ``"module:attr"`` string; failures are :class:`PluginError`."""
    if not isinstance(ref, str):
        return ref
    try:
        obj = import_ref(ref)
    except Exception as exc:  # ImportError, AttributeError, or an error raised by the module itself
        who = f"plugin {provider.name} ({provider})" if provider else "an unregistered kernel"
        raise PluginError(f"{who}: cannot import {what} {ref!r} of the kernel for {op}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not callable(obj):
        who = f"plugin {provider.name} ({provider})" if provider else "an unregistered kernel"
        raise PluginError(f"{who}: {what} {ref!r} of the kernel for {op} is not callable")
    return obj


def is_imported(ref: str) -> bool:
    """True if ``ref`` has already been imported (the cold-start benchmark checks this)."""
    return ref in _cache

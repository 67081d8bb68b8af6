"""The hooks' names and record types, and the ``@hookimpl`` marker, without pluggy.

A selective start (``SRCORE_SELECTION``) calls the selected plugins' hooks directly
(:mod:`srcore.plugin.manager`) and never imports pluggy (~2 ms of a cold start); the
marker sets exactly the attribute ``pluggy.HookimplMarker("srcore")`` sets, so a
manager that does use pluggy (every other start) registers the same functions.
"""
from __future__ import annotations

from typing import Any, Callable

PROJECT = "srcore"
#: the attribute the marker sets on a hook implementation (pluggy's ``<project>_impl``)
IMPL_ATTR = PROJECT + "_impl"

#: hook name -> the record type it yields, in the order the manager collects them
HOOK_RECORDS = {
    "srcore_op_libraries": "OpLibrary",
    "srcore_dtypes": "DType",
    "srcore_backends": "Backend",
    "srcore_kernels": "Kernel",
    "srcore_shape_rules": "ShapeRule",
    "srcore_decompositions": "Decomposition",
    "srcore_engine_builders": "EngineBuilder",
    "srcore_subcommands": "Subcommand",
}


def record_type(hook: str) -> type:
    """The record class ``hook`` yields (by name in ``HOOK_RECORDS``: some are built on first use)."""
    from . import types

    return getattr(types, HOOK_RECORDS[hook])


class HookimplMarker:
    """``pluggy.HookimplMarker("srcore")``: marks a function as a hook implementation, with pluggy's
    options (the same dict, under the same attribute)."""

    __slots__ = ()

    def __call__(self, function: Callable | None = None, hookwrapper: bool = False, optionalhook: bool = False,
                 tryfirst: bool = False, trylast: bool = False, specname: str | None = None,
                 wrapper: bool = False) -> Any:
        def mark(func):
            setattr(func, IMPL_ATTR, {"wrapper": wrapper, "hookwrapper": hookwrapper, "optionalhook": optionalhook,
                                      "tryfirst": tryfirst, "trylast": trylast, "specname": specname})
            return func

        return mark if function is None else mark(function)


def impl_opts(obj: Any) -> dict | None:
    """The marker's options on ``obj`` (or on the function of a method), None if it is not a hook implementation."""
    opts = getattr(obj, IMPL_ATTR, None)
    if opts is None:
        opts = getattr(getattr(obj, "__func__", None), IMPL_ATTR, None)
    return opts if isinstance(opts, dict) else None


def plain(opts: dict) -> bool:
    """True for a hook implementation a direct call serves (no wrapper, ordering or renaming: pluggy's features)."""
    return not (opts.get("wrapper") or opts.get("hookwrapper") or opts.get("tryfirst") or opts.get("trylast")
                or opts.get("specname"))

"""The plugin API: the only module a plugin author imports.

A plugin is a module (or object) with ``@hookimpl`` functions named after the
hooks in :mod:`srcore.plugin.hookspecs`; each hook yields records from
:mod:`srcore.plugin.types`. See docs/writing-a-plugin.md.
"""
import pluggy

from .types import (KERNEL_KINDS, ArgInfo, Backend, DType, EngineBuilder, Kernel, NodeInfo, OpLibrary,
                    PluginInfo, Specialized, Subcommand)

hookimpl = pluggy.HookimplMarker("srcore")

__all__ = [
    "hookimpl", "Kernel", "OpLibrary", "Backend", "DType", "EngineBuilder", "Subcommand",
    "NodeInfo", "ArgInfo", "Specialized", "PluginInfo", "KERNEL_KINDS",
]

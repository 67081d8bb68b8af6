"""The plugin API: the only module a plugin author imports.

A plugin is a module (or object) with ``@hookimpl`` functions named after the
hooks in :mod:`srcore.plugin.hookspecs`; each hook yields records from
:mod:`srcore.plugin.types`. See docs/writing-a-plugin.md.

For plugin authors: this module (``hookimpl`` and the records),
``hookspecs.py`` (the hooks, with examples; docs/plugin-hooks.md) and
``types.py`` (the records). Internal: ``manager.py`` (discovery, isolation,
blocking, reports; ``get_plugin_manager()``) and ``builtin.py`` (srcore's own
op declarations, through the same hooks).
"""
import pluggy

from ..errors import KernelError, QuantizationError
from .types import (KERNEL_KINDS, ArgInfo, Const, Backend, DType, EngineBuilder, Kernel, NodeInfo, OpLibrary,
                    PluginInfo, Segment, Specialized, Subcommand)

hookimpl = pluggy.HookimplMarker("srcore")

__all__ = [
    "hookimpl", "Kernel", "OpLibrary", "Backend", "DType", "EngineBuilder", "Subcommand",
    "NodeInfo", "ArgInfo", "Specialized", "Const", "PluginInfo", "Segment", "KERNEL_KINDS",
    # what kernels need from the rest of srcore (plugins import only this module)
    "KernelError", "QuantizationError", "QuantizedArray", "QParams", "QDTYPES", "SCALAR_TYPE_CODES",
    "add_scalar_qparams", "mul_scalar_qparams",
]


#: re-exported on first use: discovery (importing a plugin's ``__init__``) must not load the IR or numpy
_LAZY = {"QuantizedArray": "srcore.qarray", "QParams": "srcore.ir.quant", "QDTYPES": "srcore.ir.quant",
         "add_scalar_qparams": "srcore.ir.quant", "mul_scalar_qparams": "srcore.ir.quant",
         "SCALAR_TYPE_CODES": "srcore.ir.types"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
from .types import (KERNEL_KINDS, ArgInfo, Const, Backend, DType, EngineBuilder, EngineData, EngineOp, Kernel,
                    NodeInfo, OpLibrary, PluginInfo, Segment, ShapeRule, Specialized, Subcommand)

hookimpl = pluggy.HookimplMarker("srcore")

# what shape rules and kernels need, imported on first use (discovery imports this module: it must
# not load the IR or numpy)
_LAZY = {
    "TensorType": ("srcore.ir.types", "TensorType"),
    "ShapeContext": ("srcore.ops.shapes.base", "Ctx"),
    "AbstractValue": ("srcore.ops.shapes.base", "A"),
    "ShapeError": ("srcore.errors", "ShapeError"),
    "QuantizedArray": ("srcore.qarray", "QuantizedArray"),
    "QParams": ("srcore.ir.quant", "QParams"),
    "QDTYPES": ("srcore.ir.quant", "QDTYPES"),
    "add_scalar_qparams": ("srcore.ir.quant", "add_scalar_qparams"),
    "mul_scalar_qparams": ("srcore.ir.quant", "mul_scalar_qparams"),
    "SCALAR_TYPE_CODES": ("srcore.ir.types", "SCALAR_TYPE_CODES"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "hookimpl", "Kernel", "OpLibrary", "ShapeRule", "Backend", "DType", "EngineBuilder", "EngineData", "EngineOp",
    "Subcommand",
    "NodeInfo", "ArgInfo", "Specialized", "Const", "PluginInfo", "Segment", "KERNEL_KINDS",
    "TensorType", "ShapeContext", "AbstractValue", "ShapeError",
    # what kernels need from the rest of srcore (plugins import only this module)
    "KernelError", "QuantizationError", "QuantizedArray", "QParams", "QDTYPES", "SCALAR_TYPE_CODES",
    "add_scalar_qparams", "mul_scalar_qparams",
]

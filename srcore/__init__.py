"""srcore: a static inference runtime for graph models, on numpy, with plugin backends.

The public API (see docs/api.md)::

    graph = srcore.parse_graph(text)
    model = srcore.load("m.srm")
    model = srcore.from_torchscript(module_or_path, example_inputs=None)
    model = srcore.from_torch(module, example_inputs)
    model = srcore.from_onnx("model.onnx")
    srcore.save(model, "m.srm")
    sm = srcore.StaticModule(model, options=srcore.Options(...), backends=("cpu",))
    out = sm(x)

Attributes load on first use so that ``import srcore`` stays cheap.
"""
from __future__ import annotations

from ._attrs_code_cache import install as _install_attrs_code_cache
from ._attrs_lazy import install as _install_lazy_attrs
from ._lazy import lazy_getattr
from ._module_bundle import install as _install_module_bundle

_install_module_bundle()  # srcore's modules found and read from one file (srcore._module_bundle)
_install_attrs_code_cache()  # before any srcore class is defined: their attrs methods come compiled
_install_lazy_attrs()  # attrs' validators, converters and filters run on first use (srcore._attrs_lazy)

from .errors import *  # noqa: F401,F403  (the error tree is part of the facade)
from .errors import __all__ as _error_names

__version__ = "0.1.0"


def _log_from_env() -> None:
    """``SRCORE_LOG=info|debug`` turns srcore's logging on for any script (srcore.log)."""
    import os

    if os.environ.get("SRCORE_LOG"):
        from .log import configure, env_level

        configure(env_level())


_log_from_env()

# public name -> "module:attribute", imported on first access
_LAZY = {
    "parse_graph": "srcore.ir.parser:parse_graph",
    "print_graph": "srcore.ir.printer:print_graph",
    "Graph": "srcore.ir.graph:Graph",
    "GraphBuilder": "srcore.ir.builder:GraphBuilder",
    "FunctionSchema": "srcore.ops.schema:FunctionSchema",
    "Model": "srcore.model:Model",
    "InputSpec": "srcore.model:InputSpec",
    "load": "srcore.format.srm:load",
    "save": "srcore.format.srm:save",
    "from_torchscript": "srcore.frontends.torchscript:from_torchscript",
    "from_torch": "srcore.frontends.torch_export:from_torch",
    "from_onnx": "srcore.frontends.onnx_import:from_onnx",
    "StaticModule": "srcore.runtime.static_module:StaticModule",
    "StaticRuntime": "srcore.runtime.static_runtime:StaticRuntime",
    "RuntimePool": "srcore.runtime.pool:RuntimePool",
    "Options": "srcore.runtime.options:Options",
    "get_plugin_manager": "srcore.plugin.manager:get_plugin_manager",
    "QuantizedArray": "srcore.qarray:QuantizedArray",
    "QParams": "srcore.ir.qparams:QParams",
    "quantize": "srcore.quantization.api:quantize",
}
_SUBMODULES = {"ir", "ops", "passes", "plugin", "dispatch", "runtime", "memory", "frontends", "format", "cli",
               "quantization"}

__all__ = sorted([*_LAZY, *_error_names, "__version__"])


__getattr__ = lazy_getattr("srcore", _LAZY, globals(), _SUBMODULES)


def __dir__():
    return __all__

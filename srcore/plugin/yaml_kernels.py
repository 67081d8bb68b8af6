"""Kernels bound in a declaration file (RFC-0020): ``dispatch:`` and ``structured_delegate``.

A plugin's ``- func:`` file may bind kernels the way native_functions.yaml does::

    - func: acosh(Tensor self) -> Tensor
      structured_delegate: acosh.out
    - func: acosh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
      structured: True
      dispatch:
        CPU: acosh_out              # srcore_mylib:acosh_out

Each dispatch line becomes a :class:`srcore.plugin.Kernel` of the declaring
plugin: kind ``out`` for an out overload, ``native`` otherwise. An overload
with a ``structured_delegate`` gets its delegate's kernels: as out variants
for the functional form (same calling convention: arguments, then ``out=``),
and for an in-place form (``acosh_``) as a native kernel that calls the out
kernel with ``out=self``. Torch's dispatch keys map to srcore backends
(``CPU`` -> ``cpu``, ``QuantizedCPU`` -> ``quantized_cpu``); keys for devices
srcore does not run on (``CUDA``, ``MPS``, ...) are skipped; any other name is
used as a srcore backend name (and rejected like any kernel for an unknown
backend). A kernel whose module does not exist is rejected at registry build,
naming the plugin, the op and the file line; a missing attribute is found
when a model uses the op (a ``PluginError`` with the same line).
"""
from __future__ import annotations

import importlib.util
from typing import Any, Callable

from ..dispatch.lazy import import_ref
from .types import Kernel

#: torch dispatch keys that are srcore backends
TORCH_BACKENDS = {"CPU": "cpu", "QuantizedCPU": "quantized_cpu"}
#: torch dispatch keys of devices and layouts srcore does not run on: their lines are skipped
FOREIGN_KEYS = frozenset({
    "CUDA", "HIP", "MPS", "XPU", "XLA", "Lazy", "Meta", "IPU", "MTIA", "HPU", "VE", "FPGA", "ORT", "Vulkan",
    "Metal", "PrivateUse1", "MkldnnCPU", "SparseCPU", "SparseCUDA", "SparseCsrCPU", "SparseCsrCUDA", "SparseMeta",
    "QuantizedCUDA", "QuantizedMeta", "NestedTensorCPU", "NestedTensorCUDA", "NestedTensorMeta", "ZeroTensor",
    "CompositeImplicitAutograd", "CompositeImplicitAutogradNestedTensor", "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional", "Autograd", "AutogradCPU", "AutogradCUDA",
})


class InPlaceFromOut:
    """A native kernel for an in-place overload (``acosh_``) run by its delegate's out kernel:
    ``kernel(self, *args, out=self)``. The out kernel is imported at load (``resolve_at_load``)."""

    def __init__(self, ref: str):
        self.ref = ref

    def resolve_at_load(self) -> Callable[..., Any]:
        out_kernel = import_ref(self.ref)

        def in_place(self_, *args, **kwargs):
            return out_kernel(self_, *args, out=self_, **kwargs)

        in_place.__name__ = f"{getattr(out_kernel, '__name__', 'kernel')}_inplace"
        return in_place

    def __call__(self, *args, **kwargs):  # used unresolved (a direct call): resolve every time
        return self.resolve_at_load()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"InPlaceFromOut({self.ref!r})"


def _ref(kernel: str, package: str | None) -> str | None:
    if ":" in kernel:
        return kernel
    return f"{package}:{kernel}" if package else None


def _module_exists(module: str, cache: dict[str, bool]) -> bool:
    found = cache.get(module)
    if found is None:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package that does not import
            found = False
        cache[module] = found
    return found


def library_kernels(lib, decls) -> tuple[list[Kernel], list[str]]:
    """``(kernels, problems)`` bound by ``decls`` (one library's declarations, names qualified)."""
    package = lib.resource[0] if lib.resource is not None else None
    by_name = {d.schema.qualified_name: d for d in decls}
    kernels: list[Kernel] = []
    problems: list[str] = []
    modules: dict[str, bool] = {}
    for d in decls:
        op = d.schema.qualified_name
        entries, kind, in_place = d.dispatch, ("out" if d.schema.is_out else "native"), False
        if d.structured_delegate is not None:
            target = by_name.get(d.structured_delegate)
            if target is None:  # the parser checked the file; a delegate in another library is an error here
                problems.append(f"{d.source}: structured_delegate {d.structured_delegate!r} of {op} is not declared")
                continue
            entries = target.dispatch
            in_place = d.schema.is_mutable  # acosh_: writes self
            kind = "native" if in_place else "out"
        for e in entries:
            ref = _ref(e.kernel, package)
            if ref is None:
                problems.append(f"{e.source}: dispatch of {op} names kernel {e.kernel!r} without a module, and its "
                                "library is not a package file: write 'module:attr'")
                continue
            if not _module_exists(ref.partition(":")[0], modules):
                problems.append(f"{e.source}: dispatch of {op} points at {ref!r}, but module "
                                f"{ref.partition(':')[0]!r} does not exist")
                continue
            for backend in e.backends:
                if backend in FOREIGN_KEYS:
                    continue
                name = TORCH_BACKENDS.get(backend, backend)
                try:
                    kernels.append(Kernel(op, name, kind, e.dtypes, InPlaceFromOut(ref) if in_place else ref,
                                          source=e.source))
                except ValueError as exc:  # a backend or dtype name the record refuses
                    problems.append(f"{e.source}: dispatch of {op}: {exc}")
    return kernels, problems


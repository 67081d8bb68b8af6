"""srcore-cpu: numpy kernels for backend ``cpu``.

This module is imported while plugins are discovered, so it imports no numpy
and no kernel module: kernels are declared as records whose ``impl`` is a
``"srcore_cpu.kernels.<family>:<function>"`` string, imported only when a
model uses the op.

Kernel declarations live in ``srcore_cpu/decl/<family>.py``, each defining a
list ``KERNELS``; every module of that package is picked up, in name order.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

from srcore.plugin import Backend, Kernel, hookimpl

BACKEND = Backend("cpu", "numpy kernels (srcore-cpu)")

# ---------------------------------------------------------------------------------------------
# Kernel records that do not belong to a family module in srcore_cpu/decl/ (kernel author: fill
# in here or, preferably, add a srcore_cpu/decl/<family>.py with a KERNELS list).
EXTRA_KERNELS: list[Kernel] = []
# ---------------------------------------------------------------------------------------------


def _decl_kernels() -> list[Kernel]:
    """Each ``decl`` module's ``KERNELS``, in module name order."""
    import pkgutil  # only when the record cache misses

    from . import decl

    kernels: list[Kernel] = []
    for mod in sorted(m.name for m in pkgutil.iter_modules(decl.__path__)):
        kernels.extend(importlib.import_module(f"{decl.__name__}.{mod}").KERNELS)
    return kernels


def declared_kernels() -> Sequence[Kernel]:
    """Every Kernel record of this plugin: each ``decl`` module's ``KERNELS``, then ``EXTRA_KERNELS``.

    The ``decl`` modules' records come from srcore's record cache (keyed on those files, this module,
    the installed distributions and whether torch is importable), so a start-up imports none of them.
    """
    from srcore.plugin import cached_kernels

    from .decl.torch_fallback import AVAILABLE  # the one decl module whose records depend on more than its text

    here = os.path.dirname(__file__)
    kernels = cached_kernels(__name__, _decl_kernels, sources=(os.path.join(here, "decl"), __file__),
                             key=(AVAILABLE,))
    return [*kernels, *EXTRA_KERNELS] if EXTRA_KERNELS else kernels


@hookimpl
def srcore_backends():
    yield BACKEND


@hookimpl
def srcore_kernels():
    return declared_kernels()  # as it is: a cache hit's records are built by the registry, already stamped


@hookimpl
def srcore_shape_rules():
    from .decl.torch_fallback import AVAILABLE

    if AVAILABLE:  # ops that fall back to torch (and have no rule of their own) are typed by torch's meta kernels
        from srcore.plugin import ShapeRule   # (built on first use: a selective start calls no rule hook)

        yield ShapeRule(("aten::*",), "srcore_cpu.torch_fallback:meta_rule")

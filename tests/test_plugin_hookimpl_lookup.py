"""srcore's pluggy manager finds a module plugin's hook implementations as pluggy's own does (it skips attributes
that hold no function without ``inspect.getattr_static``): the same options for every attribute of every installed
plugin's module and of a module with the odd cases (methods, wrappers, descriptors, lazy names)."""
from __future__ import annotations

import types

import pluggy
import pytest

from srcore.plugin import hookimpl
from srcore.plugin.manager import _pluggy_manager, get_plugin_manager

#: the plugin manager's hook lookup, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass


def _same_as_pluggy(module) -> int:
    ours, theirs = _pluggy_manager(pluggy), pluggy.PluginManager("srcore")
    names = dir(module)
    for name in names:
        assert ours.parse_hookimpl_opts(module, name) == theirs.parse_hookimpl_opts(module, name), name
    return sum(theirs.parse_hookimpl_opts(module, name) is not None for name in names)


def test_the_installed_plugins_hooks_are_found_as_pluggy_finds_them():
    pm = get_plugin_manager()
    modules = [obj for obj in pm._objects.values() if type(obj) is types.ModuleType]
    assert modules
    assert sum(_same_as_pluggy(m) for m in modules) >= len(modules)   # every plugin has a hook


def test_odd_attributes_of_a_module_are_looked_up_as_pluggy_does():
    mod = types.ModuleType("oddplugin")

    @hookimpl
    def srcore_kernels():
        return []

    def plain():
        return None

    class Holder:
        @staticmethod
        @hookimpl
        def stat():
            return []

        @classmethod
        @hookimpl
        def cls(cls):
            return []

        @hookimpl
        def meth(self):
            return []

    marked_static = staticmethod(hookimpl(lambda: []))
    marked_class = classmethod(hookimpl(lambda cls: []))
    mod.__dict__.update(
        srcore_kernels=srcore_kernels, plain=plain, Holder=Holder, bound=Holder().meth, static=marked_static,
        klass=marked_class, number=3, prop=property(lambda self: 1), builtin=len, other=types.ModuleType("m"),
        srcore_backends=hookimpl(specname="srcore_backends")(lambda: []),
        __getattr__=lambda name: srcore_kernels,     # a lazily provided name: pluggy never asks __getattr__
        __dir__=lambda: sorted([*mod.__dict__, "lazy_hook"]),
    )
    assert _same_as_pluggy(mod) >= 4   # srcore_kernels, bound, static, klass, srcore_backends

"""Discovering plugins, isolating their failures, and building the registry they feed.

``get_plugin_manager()`` returns the process-wide manager, loaded once: the
builtin plugin, then every entry point of group ``srcore.plugins`` sorted by
name, each imported in its own try/except. Hooks are collected one plugin at
a time, so a plugin that fails (import error, a hook that raises, an invalid
record, a bad schema) is reported with its name, version, hook and reason and
the others still load. ``PluginManager()`` makes a fresh one (tests).

A selective start defers pluggy (``PluginManager(defer_pluggy=True)``): the
selected plugins' hook implementations are plain functions it calls directly,
so pluggy is imported only when something needs it (``hook``, the full
registry, a plugin using pluggy's wrappers, ordering or ``specname``); then
every plugin registered so far is registered with pluggy, and checked by it.

Environment: ``SRCORE_DISABLE_PLUGINS=a,b`` blocks plugins by entry-point
name (``builtin`` cannot be blocked); with ``SRCORE_SELECTION=file`` the
process-wide manager imports only the plugins the selection names (its
registry is built from them alone), and the others when something asks for
every plugin (``reports``, ``load_all()``, a selection naming them); ``SRCORE_STRICT_PLUGINS=1`` turns every
plugin failure into a raised :class:`srcore.PluginError`. The entry-point scan
is cached on disk (``srcore.plugin.discovery``; ``SRCORE_NO_PLUGIN_CACHE=1``
turns that off); the plugins themselves are imported afresh in every process.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Collection, Iterable

import attrs

from .._lazylog import LazyLogger
from .._repr import shared_repr
from ..errors import PluginError, RegistrationError
from . import discovery
from .hook_names import HOOK_RECORDS, PROJECT, impl_opts, plain
from .registry import Registry
from .types import PluginInfo

log = LazyLogger("srcore.plugin")

ENTRY_POINT_GROUP = "srcore.plugins"
BUILTIN_NAME = "builtin"
#: plugins that cannot be blocked (pytest's "essential plugins")
ESSENTIAL_PLUGINS = frozenset({BUILTIN_NAME})


@attrs.define
@shared_repr
class PluginReport:
    """What ``srcore plugins`` shows for one plugin.

    ``status`` is ``loaded``, ``failed`` (nothing it provides is used; ``error``
    says why) or ``disabled``. ``errors`` lists records that were rejected one
    by one (a kernel for an undeclared op, an unknown backend or dtype) while
    the rest of a loaded plugin is used.
    """

    name: str
    dist: str | None = None
    version: str | None = None
    status: str = "loaded"
    error: str | None = None
    hooks: tuple[str, ...] = ()
    errors: list[str] = attrs.Factory(list)

    @property
    def info(self) -> PluginInfo:
        return PluginInfo(self.name, self.dist, self.version)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dist": self.dist, "version": self.version, "status": self.status,
                "error": self.error, "hooks": list(self.hooks), "errors": list(self.errors)}


def __getattr__(name: str):
    # ``importlib.metadata`` costs ~15 ms to import and is only needed when the entry-point cache
    # misses (srcore.plugin.discovery); the name stays reachable for code that patches it (tests)
    if name == "importlib_metadata":
        import importlib.metadata

        return importlib.metadata
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _env_list(name: str) -> set[str]:
    return {p.strip() for p in os.environ.get(name, "").split(",") if p.strip()}


def _pluggy_manager(pluggy: Any) -> Any:
    """pluggy's manager for project ``srcore``, whose hookimpl lookup skips a module plugin's attributes that hold
    no function without ``inspect.getattr_static`` (what it finds for a module: the value in its ``__dict__``;
    ~150 attributes of the installed plugins' modules a full start, each walking ``ModuleType``'s MRO)."""
    import inspect
    import types

    hookable = (staticmethod, classmethod, types.MethodType)

    class _Manager(pluggy.PluginManager):
        def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
            if type(plugin) is types.ModuleType:
                value = plugin.__dict__.get(name)
                if not (inspect.isfunction(value) or isinstance(value, hookable)):
                    return None   # pluggy's answer for it too (it hooks functions and methods only)
            return super().parse_hookimpl_opts(plugin, name)

    return _Manager(PROJECT)


class PluginManager:
    """A pluggy manager for the ``srcore`` hooks plus reports, blocking and the built registry
    (``defer_pluggy``: pluggy only when needed, see the module's docstring)."""

    def __init__(self, *, strict: bool | None = None, defer_pluggy: bool = False):
        self._pluggy = None   # the pluggy manager, created by ``_pm``
        self._objects: dict[str, Any] = {}   # the registered plugins: name -> module or object
        self.strict = os.environ.get("SRCORE_STRICT_PLUGINS", "") not in ("", "0") if strict is None else strict
        self._reports: dict[str, PluginReport] = {}
        self._blocked: set[str] = set()
        self._load_errors: dict[str, list[str]] = {}
        self._registry: Registry | None = None
        self._selected: dict = {}  # selection path -> its registry (registry_for)
        self._loaded = False
        self._deferred: list = []  # (group, names loaded) of selective loads: load_all imports the others
        #: seconds spent in load() (discovery + imports) and in the last registry build
        self.timings: dict[str, float] = {}
        if not defer_pluggy:
            self._pm  # noqa: B018 (created now)

    @property
    def _pm(self):
        """The pluggy manager (created on first use, with every plugin registered so far)."""
        pm = self._pluggy
        if pm is None:
            import pluggy

            from .hookspecs import SrcoreSpecs

            pm = self._pluggy = _pluggy_manager(pluggy)
            pm.add_hookspecs(SrcoreSpecs)
            for name, plugin in list(self._objects.items()):
                try:
                    pm.register(plugin, name=name)
                except Exception as exc:  # pluggy's PluginValidationError
                    self.fail(name, "register", exc)
        return pm

    def _forget(self, name: str) -> None:
        self._objects.pop(name, None)
        if self._pluggy is not None and self._pluggy.get_plugin(name) is not None:
            self._pluggy.unregister(name=name)

    # -- registering ----------------------------------------------------------------------
    def block(self, name: str) -> None:
        """Never load or use plugin ``name`` (unregisters it if already registered)."""
        if name in ESSENTIAL_PLUGINS:
            raise PluginError(f"plugin {name} cannot be disabled: it holds srcore's own op declarations")
        self._blocked.add(name)
        self._forget(name)
        rep = self._reports.get(name)
        self._reports[name] = PluginReport(name, rep.dist if rep else None, rep.version if rep else None,
                                           "disabled")
        self._registry, self._selected = None, {}

    def is_blocked(self, name: str) -> bool:
        return name in self._blocked

    def register(self, plugin: Any, name: str | None = None, *, dist: str | None = None,
                 version: str | None = None) -> PluginReport:
        """Register a module or object with ``@hookimpl`` functions (tests, notebooks, entry points)."""
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        if name in self._blocked:
            return self._reports.setdefault(name, PluginReport(name, dist, version, "disabled"))
        if name in self._objects:
            raise PluginError(f"a plugin named {name!r} is already registered ({self._reports[name].info})")
        report = PluginReport(name, dist, version, "loaded")
        self._reports[name] = report
        self._registry, self._selected = None, {}
        try:
            unknown = [a for a in dir(plugin) if a.startswith("srcore_") and callable(getattr(plugin, a, None))
                       and getattr(getattr(plugin, a), "srcore_impl", None) is not None
                       and a not in HOOK_RECORDS]
            if unknown:
                raise PluginError(f"unknown hook(s) {', '.join(unknown)}; known hooks: {', '.join(HOOK_RECORDS)}")
            self._objects[name] = plugin
            if self._pluggy is not None:
                self._pluggy.register(plugin, name=name)
            elif not _direct(plugin):
                self._pm  # noqa: B018 (pluggy now: it registers and checks this plugin with the others)
        except Exception as exc:  # pluggy's PluginValidationError: a hookimpl with a bad signature
            self.fail(name, "register", exc)
            return report
        if report.status == "loaded":
            report.hooks = (tuple(sorted(_hook_names(plugin))) if self._pluggy is None else
                            tuple(sorted(h.name for h in self._pluggy.get_hookcallers(plugin) or ())))
        return report

    def unregister(self, name: str) -> None:
        self._forget(name)
        self._reports.pop(name, None)
        self._registry, self._selected = None, {}

    def load(self, *, entry_points: bool = True, only: Collection[str] | None = None) -> "PluginManager":
        """Register the builtin plugin, then (unless ``entry_points=False``) every installed plugin, or
        with ``only`` the installed plugins of those names (:meth:`load_all` imports the others)."""
        if self._loaded:
            return self
        self._loaded = True
        t0 = time.perf_counter()
        from . import builtin
        from .. import __version__

        self.register(builtin, BUILTIN_NAME, dist="srcore", version=__version__)
        for name in _env_list("SRCORE_DISABLE_PLUGINS") - ESSENTIAL_PLUGINS:
            self.block(name)
        if entry_points:
            self.load_entry_points(only=only)
        self.timings["load"] = time.perf_counter() - t0
        return self

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP, *, only: Collection[str] | None = None) -> None:
        """Import every entry point of ``group`` (with ``only``: those of these names; the others wait
        for :meth:`load_all`), sorted by name, each in its own try/except."""
        # a cached scan (see srcore.plugin.discovery); with ``only``, checked by what those depend on
        eps = discovery.entry_points(group, only=only)
        if only is not None:
            self._deferred.append((group, frozenset(only)))
        self._load_entry_points(eps)

    def load_all(self) -> None:
        """Import the plugins a selective :meth:`load` left out (nothing when there are none)."""
        if self._deferred:
            with _lock:
                deferred, self._deferred = self._deferred, []
                for group, only in deferred:
                    self._load_entry_points([ep for ep in discovery.entry_points(group) if ep.name not in only])

    def _load_entry_points(self, eps) -> None:
        for ep in sorted(eps, key=lambda e: (e.name, getattr(getattr(e, 'dist', None), 'name', '') or '')):
            dist = getattr(ep, "dist", None)
            dname = dist.name if dist is not None else None
            dver = dist.version if dist is not None else None
            if ep.name in self._blocked:
                self._reports[ep.name] = PluginReport(ep.name, dname, dver, "disabled")
                continue
            first = self._reports.get(ep.name)
            if ep.name in ESSENTIAL_PLUGINS or (first is not None and first.status != "failed"):
                # two distributions with one entry-point name: the first (by distribution name) stays
                if first is not None:
                    self.reject(first.name, f"entry point {ep.name!r} of {dname} {dver or ''} ignored: "
                                 "the name is taken", at_load=True)
                continue
            try:
                obj = ep.load()
            except BaseException as exc:  # a plugin's import may raise anything, even SystemExit
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self._reports[ep.name] = PluginReport(ep.name, dname, dver, "failed")
                self.fail(ep.name, "import", exc)
                continue
            self.register(obj, ep.name, dist=dname, version=dver)

    def fail(self, plugin: str, hook: str, exc: BaseException) -> None:
        """Mark ``plugin`` failed in ``hook`` (nothing it provides is used); raises under strict mode."""
        report = self._reports[plugin]
        report.status = "failed"
        report.error = f"{hook}: {type(exc).__name__}: {exc}"
        log.info("plugin %s (%s) failed: %s ('srcore plugins' lists every plugin)", report.name, report.info,
                 report.error)
        self._forget(report.name)
        if self.strict:
            raise PluginError(f"plugin {report.name} ({report.info}) failed in {hook}: {exc}") from exc

    def reject(self, plugin: str, message: str, *, at_load: bool = False) -> None:
        """Report one record of ``plugin`` as rejected (the rest of the plugin is used): a
        ``RegistrationError`` in ``srcore plugins``, raised under strict mode. ``at_load``: a
        rejection found while loading, kept across registry rebuilds (which recompute the others)."""
        report = self._reports[plugin]
        err = RegistrationError(f"plugin {report.name} ({report.info}): {message}")
        report.errors.append(str(err))
        if at_load:
            self._load_errors.setdefault(report.name, []).append(str(err))
        if self.strict:
            raise err

    def clear_rejections(self) -> None:
        """Forget the rejections a registry build found (a rebuild finds them again)."""
        for report in self._reports.values():
            report.errors = list(self._load_errors.get(report.name, ()))

    # -- reading ----------------------------------------------------------------------------
    @property
    def reports(self) -> list[PluginReport]:
        """Every plugin seen, builtin first, then sorted by name (imports those a selective load left out)."""
        self.load_all()
        return self.loaded_reports()

    def loaded_reports(self) -> list[PluginReport]:
        """Like :attr:`reports`, without importing the plugins a selective load left out."""
        return sorted(self._reports.values(), key=lambda r: (r.name != BUILTIN_NAME, r.name))

    def report(self, name: str) -> PluginReport:
        if name not in self._reports:
            self.load_all()
        return self._reports[name]

    @property
    def hook(self):
        return self._pm.hook

    @property
    def registry(self) -> Registry:
        """The checked registry (built on first use, rebuilt after register/block); with
        ``SRCORE_SELECTION=file`` the registry of that selection (:meth:`registry_for`)."""
        registry = self._registry
        if registry is None:
            from .._gcpause import paused

            with _lock, paused():  # StaticModules may be built from several threads
                if self._registry is None:
                    t0 = time.perf_counter()
                    selection = os.environ.get("SRCORE_SELECTION", "")
                    if selection:
                        self._registry = self.registry_for(selection)
                    else:
                        from .registry import build_registry

                        self._registry = build_registry(self)
                        _warn_failures(self._reports.values())
                    self.timings["registry"] = time.perf_counter() - t0
                    log.info("registry of %d plugin(s) built in %.1f ms: %d ops, %d kernels, backends %s",
                             len(self._reports), self.timings["registry"] * 1e3, len(self._registry.declared),
                             len(self._registry.kernel_table), ", ".join(sorted(self._registry.backends)))
                registry = self._registry
        return registry

    def registry_for(self, selection: Any) -> Registry:
        """The registry of a selective build: ``selection`` is a file written by ``srcore select``
        (a path) or a ``srcore.plugin.selection.Selection``; built once per path."""
        from .selection import Selection, build_selected_registry, read_selection

        key = selection if isinstance(selection, Selection) else os.path.abspath(os.fspath(selection))
        cache = self._selected
        with _lock:
            reg = cache.get(id(key) if isinstance(key, Selection) else key)
            if reg is None:
                sel = key if isinstance(key, Selection) else (_read_at_load.pop(key, None) or read_selection(key))
                if not set(sel.plugins) <= self._reports.keys():
                    self.load_all()  # a selection naming plugins a selective load left out
                reg = build_selected_registry(self, sel)
                _warn_failures(self._reports.values())
                cache[id(key) if isinstance(key, Selection) else key] = reg
        return reg

    @property
    def kernel_table(self):
        return self.registry.kernel_table

    @property
    def schemas(self):
        return self.registry.schemas

    def hookimpls(self, hook: str) -> Iterable:
        """The hookimpls of ``hook`` (``plugin_name``, ``function``), builtin first, then by plugin name."""
        if self._pluggy is None:   # every registered plugin's implementations are plain functions
            impls = [_DirectImpl(name, fn) for name, plugin in self._objects.items()
                     if (fn := getattr(plugin, hook, None)) is not None and impl_opts(fn) is not None]
        else:
            impls = getattr(self._pluggy.hook, hook).get_hookimpls()
        return sorted(impls, key=lambda i: (i.plugin_name != BUILTIN_NAME, i.plugin_name))


class _DirectImpl:
    """A hook implementation called without pluggy (what ``hookimpls`` needs of pluggy's ``HookImpl``)."""

    __slots__ = ("plugin_name", "function")

    def __init__(self, plugin_name: str, function):
        self.plugin_name = plugin_name
        self.function = function


def _hook_names(plugin) -> list[str]:
    return [a for a in dir(plugin) if a.startswith("srcore_") and impl_opts(getattr(plugin, a, None)) is not None]


def _direct(plugin) -> bool:
    """True if pluggy would add nothing to calling ``plugin``'s hook implementations: each a function
    (or bound method) of no required argument, marked without pluggy's options."""
    for a in _hook_names(plugin):
        fn = getattr(plugin, a)
        opts = impl_opts(fn)
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        if not plain(opts) or code is None:
            return False
        bound = 1 if hasattr(fn, "__func__") else 0   # a method: its self or cls is given
        required = code.co_argcount - len(getattr(fn, "__defaults__", None) or ()) - bound
        if required != 0 or code.co_kwonlyargcount - len(getattr(fn, "__kwdefaults__", None) or {}):
            return False
    return True


_default: PluginManager | None = None
_lock = threading.RLock()
_warned: set[tuple[str, str | None]] = set()


def _warn_failures(reports) -> None:
    """Warn about each failed plugin once per process (a load that touches its namespace names it
    again, in its error or its load report)."""
    failed = [r for r in reports if r.status == "failed" and (r.name, r.error) not in _warned]
    if not failed:
        return
    import warnings

    from ..errors import SrcoreWarning
    from .requirements import describe_failure

    for r in failed:
        _warned.add((r.name, r.error))
        warnings.warn(f"{describe_failure(r)}; its ops and kernels are unavailable (srcore plugins lists "
                      "every plugin)", SrcoreWarning, stacklevel=4)


def get_plugin_manager() -> PluginManager:
    """The process-wide manager, loaded on first call (with ``SRCORE_SELECTION``: the plugins it names)."""
    global _default
    if _default is None:
        from .._gcpause import paused

        with _lock, paused():
            if _default is None:
                only = _selected_plugins()
                _default = PluginManager(defer_pluggy=only is not None).load(only=only)
    return _default


def _selected_plugins() -> frozenset[str] | None:
    """The plugins ``SRCORE_SELECTION`` names (None without one, or if it cannot be read: then every
    plugin loads, and building the registry reports the file's problem)."""
    path = os.environ.get("SRCORE_SELECTION", "")
    if not path:
        return None
    from ..errors import SelectionError
    from .selection import read_selection

    path = os.path.abspath(path)
    try:
        sel = _read_at_load[path] = read_selection(path)  # registry_for takes it from here
    except SelectionError:
        return None
    return frozenset(sel.plugins)


_read_at_load: dict = {}

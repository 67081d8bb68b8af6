"""The registry: everything the loaded plugins provide, checked; and how it is built.

:func:`build_registry` calls the hooks one plugin at a time (builtin first,
then by name), through the manager's public interface (``hookimpls``,
``fail``, ``reject``). A hook that raises or yields something that is not its
record type, or an op library that does not parse, fails that plugin only:
none of its records are used. A record that names an undeclared op, an
unknown backend or dtype, or duplicates another plugin's name is rejected on
its own and reported as a ``RegistrationError`` of its plugin. Static
dispatch (:mod:`srcore.dispatch`) only reads a finished :class:`Registry`.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .._repr import shared_repr
from ..dispatch.table import STANDARD_DTYPES, KernelTable, op_key
from ..errors import RegistrationError
from .hook_names import HOOK_RECORDS, record_type
from .schemas import DeclaredOps, library_entries, new_schema_registry
from .types import ANY_QUANTIZED, PluginInfo

if TYPE_CHECKING:
    from .types import Backend, DType, EngineBuilder, OpLibrary, Subcommand


@attrs.frozen
@shared_repr
class Registry:
    """Everything the loaded plugins provide, checked: the input of static dispatch."""

    schemas: Any
    kernel_table: Any
    #: qualified overload name -> (schema, who declared it): a ``Mapping`` (``DeclaredOps`` builds a schema on look-up)
    declared: Mapping[str, tuple[Any, PluginInfo]]
    op_libraries: tuple[OpLibrary, ...]
    dtypes: dict[str, DType]
    backends: dict[str, Backend]
    engine_builders: dict[str, EngineBuilder]
    subcommands: dict[str, Subcommand]
    shape_rules: Any = None  # srcore.ops.shapes.table.ShapeRuleTable
    decompositions: Any = None  # srcore.ops.decomposition_table.DecompositionTable
    #: the ``srcore.plugin.selection.Selection`` this registry was built from (None: every plugin's records)
    selection: Any = None


def collect_records(manager, hooks=None) -> dict[str, dict[str, list]]:
    """``{plugin: {hook: [records]}}`` for every hook (or the given ones), one plugin at a time."""
    records: dict[str, dict[str, list]] = {}
    for hook in HOOK_RECORDS:
        if hooks is not None and hook not in hooks:
            continue
        cls = None  # the record class, resolved when a plugin implements the hook
        for impl in manager.hookimpls(hook):
            report = manager.report(impl.plugin_name)
            if report.status != "loaded":
                continue
            try:
                got = impl.function()
                cached = sys.modules.get("srcore.plugin.record_cache")  # imported by a plugin that uses it
                if cached is not None and isinstance(got, cached.CachedKernels) and hook == "srcore_kernels":
                    records.setdefault(report.name, {})[hook] = got.with_provider(report.info)  # checked, stamped
                    continue
                items = [] if got is None else list(got)
                if items and cls is None:
                    cls = record_type(hook)
                for r in items:
                    if not isinstance(r, cls):
                        raise TypeError(f"yielded {r!r}; expected {cls.__name__} records")
                records.setdefault(report.name, {})[hook] = [r.provided_by(report.info) for r in items]
            except Exception as exc:  # the hook raised, or a record failed validation
                manager.fail(report.name, hook, exc)
    order = sorted(records, key=lambda n: (n != "builtin", n))
    return {n: records[n] for n in order if manager.report(n).status == "loaded"}


def _add_schemas(manager, records, registry, declared) -> tuple[list, dict[str, list]]:
    """Declare every plugin's ops (``declared``: qualified name -> ``(DeclaredOp, PluginInfo)``; the
    schemas are built on first look-up); returns the libraries and, per plugin, ``(library, ops)``."""
    libraries = []
    parsed_libs: dict[str, list] = {}
    for name in list(records):
        report = manager.report(name)
        libs = records[name].get("srcore_op_libraries", [])
        try:
            parsed, mine = [], []
            for lib in libs:
                ops = library_entries(lib)
                mine.append((lib, ops))
                for op in ops:
                    qn = op.qualified_name
                    old = declared.get(qn)
                    if old is not None and str(old[0].schema) != str(op.schema):  # builds the two only here
                        raise RegistrationError(f"{qn} is already declared as {old[0].schema}; {op.source} "
                                                f"declares {op.schema}")
                    if old is None:
                        parsed.append(op)
        except Exception as exc:  # SchemaError/DeclarationError/RegistrationError, or a missing resource
            manager.fail(name, "srcore_op_libraries", exc)
            del records[name]
            continue
        info = report.info  # one record per plugin, not one per schema (~1,000 at start-up)
        provider = str(info)
        for op in parsed:
            if op.qualified_name not in declared:
                declared[op.qualified_name] = (op, info)
                if registry is not None:
                    registry.add_lazy(op, provider=provider)
        libraries.extend(libs)
        parsed_libs[name] = mine
    return libraries, parsed_libs


def _library_kernels(manager, name, libs) -> list:
    """Kernels a plugin binds in its declaration files (``dispatch:``), stamped; problems rejected."""
    report = manager.report(name)
    out = []
    for lib, ops in libs:
        if not any(op.binds_kernels for op in ops):
            continue
        from .yaml_kernels import library_kernels  # only for a file that binds kernels: no shipped one does

        kernels, problems = library_kernels(lib, [op.declaration for op in ops])
        for p in problems:
            manager.reject(name, p)
        out.extend(k.provided_by(report.info) for k in kernels)
    return out


def unique_records(manager, records, hook, key) -> dict[str, Any]:
    """Records of ``hook`` by name; a name two plugins use is rejected for the later one."""
    out: dict[str, Any] = {}
    for name, hooks in records.items():
        for r in hooks.get(hook, []):
            k = key(r)
            if k in out:
                manager.reject(name, f"{type(r).__name__} {k!r} is already provided by "
                                f"{out[k].provider.name} ({out[k].provider})")
            elif hook == "srcore_dtypes" and k in STANDARD_DTYPES:
                manager.reject(name, f"DType {k!r} is a standard dtype")
            else:
                out[k] = r
    return out


def _check_kernel(k, declared, backends, dtypes) -> str | None:
    problem = _kernel_problem(k, declared, backends, dtypes)
    return f"{k.source}: {problem}" if problem and k.source else problem


def _kernel_problem(k, declared, backends, dtypes) -> str | None:
    if k.is_wildcard:
        if not any(q.startswith(k.op[:-1]) for q in declared):
            return f"kernel for {k.op!r} ({k.backend}, {k.kind}): no op of that namespace is declared"
    elif op_key(k.op) not in declared:
        return f"kernel for undeclared op {k.op!r} ({k.backend}, {k.kind}): declare it in srcore_op_libraries"
    if k.backend not in backends:
        return (f"kernel for {k.op} names unknown backend {k.backend!r}; "
                f"known: {', '.join(sorted(backends)) or 'none'}")
    bad = [d for d in k.dtypes if d not in ("*", ANY_QUANTIZED) and d not in STANDARD_DTYPES and d not in dtypes]
    if bad:
        return f"kernel for {k.op} ({k.backend}, {k.kind}) names unknown dtype(s) {', '.join(bad)}"
    return None


def _shape_rules(manager, records, declared):
    """The rule table: builtin's rules first, then each plugin's; a plugin's rule must name a declared op
    (an overload, or a base name with declared overloads) that has no rule yet."""
    from ..ir.names import base_op as base_name
    from ..ops.rule_table import ShapeRuleTable

    table = ShapeRuleTable()
    bases = None  # base names of the ~1,650 declared overloads: only for a plugin rule naming no overload
    for name, hooks in records.items():
        for r in hooks.get("srcore_shape_rules", []):
            for op in r.ops:
                op = op_key(op)
                if name != "builtin" and op not in declared and not (
                        op.endswith("::*") and any(q.startswith(op[:-1]) for q in declared)):
                    if bases is None:
                        bases = {base_name(q) for q in declared}
                    if op not in bases:
                        manager.reject(name, f"shape rule for undeclared op {op!r}: declare it in "
                                       "srcore_op_libraries")
                        continue
                old = table.add(op, r.rule, r.provider)
                if old is not None:
                    manager.reject(name, f"shape rule for {op} ignored: {old.provider.name} ({old.provider}) "
                                    "already gives one")
    return table


def _decompositions(manager, records, declared):
    """The decomposition table: builtin's first, then each plugin's; one per op (or ``ns::*``)."""
    from ..ops.decomposition_table import DecompositionTable

    table = DecompositionTable()
    for name, hooks in records.items():
        for r in hooks.get("srcore_decompositions", []):
            op = op_key(r.op)
            if op.endswith("::*"):
                if not any(q.startswith(op[:-1]) for q in declared):
                    manager.reject(name, f"decomposition for {op!r}: no op of that namespace is declared")
                    continue
            elif op not in declared:
                manager.reject(name, f"decomposition of undeclared op {op!r}: declare it in srcore_op_libraries")
                continue
            old = table.add(r)
            if old is not None:
                manager.reject(name, f"decomposition of {op} ignored: {old.provider.name} ({old.provider}) "
                                "already gives one")
    return table


def build_registry(manager):
    """Call every hook and return a checked :class:`srcore.plugin.manager.Registry`."""
    manager.clear_rejections()  # a rebuild recomputes every registration error
    records = collect_records(manager)
    schemas = new_schema_registry()
    declared: dict = {}
    libraries, parsed_libs = _add_schemas(manager, records, schemas, declared)
    dtypes = unique_records(manager, records, "srcore_dtypes", lambda r: r.name)
    backends = unique_records(manager, records, "srcore_backends", lambda r: r.name)
    subcommands = unique_records(manager, records, "srcore_subcommands", lambda r: r.name)
    table = KernelTable(schemas)
    for name, hooks in records.items():
        good = []
        for k in [*hooks.get("srcore_kernels", []), *_library_kernels(manager, name, parsed_libs.get(name, ()))]:
            problem = _check_kernel(k, declared, backends, dtypes)
            if problem:
                manager.reject(name, problem)
            else:
                good.append(k)
        table.add(good)
    engines = {}
    for name, hooks in records.items():
        for e in hooks.get("srcore_engine_builders", []):
            if e.backend not in backends:
                manager.reject(name, f"engine builder for unknown backend {e.backend!r}")
            elif e.backend in engines:
                manager.reject(name, f"engine builder for {e.backend!r} is already provided "
                                f"by {engines[e.backend].provider.name}")
            else:
                engines[e.backend] = e
    rules = _shape_rules(manager, records, declared)
    decompositions = _decompositions(manager, records, declared)
    return Registry(schemas, table, DeclaredOps(dict(sorted(declared.items()))), tuple(libraries), dtypes, backends, engines,
                    subcommands, rules, decompositions)

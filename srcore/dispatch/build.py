"""Building the checked registry from the loaded plugins' hook results.

Hooks are called one plugin at a time (builtin first, then by name). A hook
that raises or yields something that is not its record type, or an op
library that does not parse, fails that plugin only: none of its records are
used. A record that names an undeclared op, an unknown backend or dtype, or
duplicates another plugin's name is rejected on its own and reported as a
``RegistrationError`` of its plugin.
"""
from __future__ import annotations

from typing import Any

from ..errors import RegistrationError
from ..plugin.hookspecs import HOOK_RECORDS
from .schemas import library_schemas, new_schema_registry, schema_name
from .table import STANDARD_DTYPES, KernelTable, op_key


def _call_hooks(manager) -> dict[str, dict[str, list]]:
    records: dict[str, dict[str, list]] = {}
    for hook, cls in HOOK_RECORDS.items():
        for impl in manager._impls(hook):
            report = manager._reports[impl.plugin_name]
            if report.status != "loaded":
                continue
            try:
                got = impl.function()
                items = [] if got is None else list(got)
                for r in items:
                    if not isinstance(r, cls):
                        raise TypeError(f"yielded {r!r}; expected {cls.__name__} records")
                records.setdefault(report.name, {})[hook] = [r.provided_by(report.info) for r in items]
            except Exception as exc:  # the hook raised, or a record failed validation
                manager._fail(report, hook, exc)
    order = sorted(records, key=lambda n: (n != "builtin", n))
    return {n: records[n] for n in order if manager._reports[n].status == "loaded"}


def _add_schemas(manager, records, registry, declared) -> list:
    libraries = []
    for name in list(records):
        report = manager._reports[name]
        libs = records[name].get("srcore_op_libraries", [])
        try:
            parsed = []
            for lib in libs:
                for schema, source in library_schemas(lib):
                    qn = schema_name(schema)
                    old = declared.get(qn)
                    if old is not None and str(old[0]) != str(schema):
                        raise RegistrationError(f"{qn} is already declared as {old[0]}; {source} declares {schema}")
                    if old is None:
                        parsed.append((qn, schema, source))
        except Exception as exc:  # SchemaError/DeclarationError/RegistrationError, or a missing resource
            manager._fail(report, "srcore_op_libraries", exc)
            del records[name]
            continue
        info = report.info  # one record per plugin, not one per schema (~1,000 at start-up)
        provider = str(info)
        for qn, schema, source in parsed:
            if qn not in declared:
                declared[qn] = (schema, info)
                if registry is not None:
                    registry.add(schema, provider=provider, source=source)
        libraries.extend(libs)
    return libraries


def _unique(manager, records, hook, key) -> dict[str, Any]:
    """Records of ``hook`` by name; a name two plugins use is rejected for the later one."""
    out: dict[str, Any] = {}
    for name, hooks in records.items():
        for r in hooks.get(hook, []):
            k = key(r)
            if k in out:
                manager._reject(manager._reports[name], f"{type(r).__name__} {k!r} is already provided by "
                                f"{out[k].provider.name} ({out[k].provider})")
            elif hook == "srcore_dtypes" and k in STANDARD_DTYPES:
                manager._reject(manager._reports[name], f"DType {k!r} is a standard dtype")
            else:
                out[k] = r
    return out


def _check_kernel(k, declared, backends, dtypes) -> str | None:
    if op_key(k.op) not in declared:
        return f"kernel for undeclared op {k.op!r} ({k.backend}, {k.kind}): declare it in srcore_op_libraries"
    if k.backend not in backends:
        return (f"kernel for {k.op} names unknown backend {k.backend!r}; "
                f"known: {', '.join(sorted(backends)) or 'none'}")
    bad = [d for d in k.dtypes if d != "*" and d not in STANDARD_DTYPES and d not in dtypes]
    if bad:
        return f"kernel for {k.op} ({k.backend}, {k.kind}) names unknown dtype(s) {', '.join(bad)}"
    return None


def _shape_rules(manager, records, declared):
    """The rule table: builtin's rules first, then each plugin's; a plugin's rule must name a declared op
    (an overload, or a base name with declared overloads) that has no rule yet."""
    from ..ops.shapes.base import base_name
    from ..ops.shapes.table import ShapeRuleTable

    table = ShapeRuleTable()
    bases = {base_name(q) for q in declared}
    for name, hooks in records.items():
        report = manager._reports[name]
        for r in hooks.get("srcore_shape_rules", []):
            for op in r.ops:
                op = op_key(op)
                if name != "builtin" and op not in declared and op not in bases:
                    manager._reject(report, f"shape rule for undeclared op {op!r}: declare it in srcore_op_libraries")
                    continue
                old = table.add(op, r.rule, r.provider)
                if old is not None:
                    manager._reject(report, f"shape rule for {op} ignored: {old.provider.name} ({old.provider}) "
                                    "already gives one")
    return table


def build_registry(manager):
    """Call every hook and return a checked :class:`srcore.plugin.manager.Registry`."""
    from ..plugin.manager import Registry

    for report in manager._reports.values():  # a rebuild recomputes every registration error
        report.errors = list(manager._load_errors.get(report.name, ()))
    records = _call_hooks(manager)
    schemas = new_schema_registry()
    declared: dict = {}
    libraries = _add_schemas(manager, records, schemas, declared)
    dtypes = _unique(manager, records, "srcore_dtypes", lambda r: r.name)
    backends = _unique(manager, records, "srcore_backends", lambda r: r.name)
    subcommands = _unique(manager, records, "srcore_subcommands", lambda r: r.name)
    table = KernelTable(schemas)
    for name, hooks in records.items():
        report = manager._reports[name]
        good = []
        for k in hooks.get("srcore_kernels", []):
            problem = _check_kernel(k, declared, backends, dtypes)
            if problem:
                manager._reject(report, problem)
            else:
                good.append(k)
        table.add(good)
    engines = {}
    for name, hooks in records.items():
        for e in hooks.get("srcore_engine_builders", []):
            if e.backend not in backends:
                manager._reject(manager._reports[name], f"engine builder for unknown backend {e.backend!r}")
            elif e.backend in engines:
                manager._reject(manager._reports[name], f"engine builder for {e.backend!r} is already provided "
                                f"by {engines[e.backend].provider.name}")
            else:
                engines[e.backend] = e
    rules = _shape_rules(manager, records, declared)
    return Registry(schemas, table, dict(sorted(declared.items())), tuple(libraries), dtypes, backends, engines,
                    subcommands, rules)

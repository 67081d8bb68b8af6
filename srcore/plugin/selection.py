"""Selective build (RFC-0020 step 3): a registry holding only what some models use.

``srcore select MODEL.srm... -o selection.yaml`` loads each model and records
every op overload it needs (as converted, and as prepared: fused and
decomposed ops included) with its schema, the dtypes it was dispatched for,
the kernels static dispatch chose, its shape rule and its decomposition, and
the plugin (entry point, distribution, version) behind each. With
``SRCORE_SELECTION=selection.yaml`` (or ``Options(selection=...)``) the
registry is built from that file alone: no op library, kernel, rule or
decomposition hook is called, only the selected schemas are parsed, only the
selected kernel modules can ever be imported, and each kernel takes only the
dtypes the models were dispatched with. A model that needs anything else (an
op, or an op for another dtype) fails at load naming it.

The file is YAML (:mod:`srcore.plugin.selection_file`): reading rejects
unknown keys and malformed values, and :func:`check_selection` ops whose
plugin is not installed (or has another version than the one selected from)
and kernels whose module does not exist, each as a
:class:`srcore.SelectionError` naming ``file:line`` and the op.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Iterable, Sequence

import attrs

from .._repr import shared_repr
from ..errors import SelectionError
from .types import PluginInfo

ENGINE_KIND = "srcore::engine"

FORMAT = 1


@attrs.frozen
@shared_repr
class SelectedKernel:
    """A kernel record as static dispatch chose it (``op`` may be ``"ns::*"``: a generic kernel)."""

    op: str
    backend: str
    kind: str
    dtypes: tuple[str, ...]
    impl: str
    matcher: str | None
    priority: int
    plugin: str


@attrs.frozen
@shared_repr
class SelectedOp:
    """One op overload a selected model needs; ``plugin`` None: the model file brings its schema."""

    op: str
    schema: str
    plugin: str | None
    dtypes: tuple[str, ...] = ()
    kernels: tuple[SelectedKernel, ...] = ()
    rule: tuple[str, str, str] | None = None          # (key in the rule table, "module:attr", plugin)
    decomposition: tuple[str, str] | None = None      # (IR text, plugin)
    line: int | None = attrs.field(default=None, eq=False)


@attrs.frozen
@shared_repr
class Selection:
    """What ``srcore select`` records; ``source`` names the file it was read from."""

    models: tuple[str, ...]
    plugins: dict[str, tuple[str, str | None]]          # entry-point name -> (distribution, version)
    backends: dict[str, tuple[str, str]]                # backend -> (plugin, description)
    dtypes: dict[str, dict[str, Any]]                   # plugin dtype -> {plugin, kind, storage, params}
    ops: tuple[SelectedOp, ...]
    #: shape rules of node kinds that have no schema (prim::Constant, ...): kind -> (key, "module:attr", plugin)
    rules: dict[str, tuple[str, str, str]] = attrs.Factory(dict)
    #: the plugins of the full registry the models were loaded with by ``srcore select``, as
    #: ``(name, dist, version, status)`` (empty if they were loaded selectively): a graph saved prepared
    #: under that registry and the same options is the graph this selection was made from, and a load
    #: with the selection uses it as saved (``srcore.runtime.prepared.fingerprints``)
    made_under: tuple[tuple[str, str | None, str | None, str], ...] = ()
    source: str = attrs.field(default="<selection>", eq=False)

    def op_names(self) -> list[str]:
        return [o.op for o in self.ops]


# -- recording --------------------------------------------------------------------------------------------
def _ref(obj: Any, what: str) -> str:
    """A ``"module:attr"`` string for a kernel, matcher or rule given as a string or an importable callable."""
    if isinstance(obj, str):
        return obj.strip()
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if module and qual and "<" not in qual:
        return f"{module}:{qual}"
    raise SelectionError(f"cannot record {what}: {obj!r} is not an importable 'module:attr'")


def _plugin_of(info: PluginInfo | None, plugins: dict) -> str:
    if info is None:
        raise SelectionError("cannot record a record that no plugin provided")
    plugins.setdefault(info.name, (info.dist or info.name, info.version))
    return info.name


def collect(modules: Iterable[Any], models: Sequence[str] = ()) -> Selection:
    """The selection of loaded ``StaticModule``s: the ops of each model as given and as prepared."""
    modules = list(modules)
    plugins: dict[str, tuple[str, str | None]] = {}
    backends: dict[str, tuple[str, str]] = {}
    ops: dict[str, dict] = {}
    dtypes: dict[str, dict] = {}
    kind_rules: dict[str, tuple[str, str, str]] = {}
    for sm in modules:
        registry = sm.registry
        for kind in _schemaless_kinds(sm):
            rule = registry.shape_rules.lookup(kind)
            if rule is not None:
                kind_rules[kind] = (rule.op, _ref(rule.ref, f"the shape rule of {kind}"),
                                    _plugin_of(rule.provider, plugins))
        for b in sm.options.backends:
            rec = registry.backends.get(b)
            if rec is not None:
                backends[b] = (_plugin_of(rec.provider, plugins), rec.description)
        for schema in _schemas_used(sm):
            entry = _op_entry(ops, schema, registry, plugins)
            _add_rule(entry, schema.qualified_name, registry, plugins)
            _add_decomposition(entry, schema, registry, plugins)
        for node, rk in sm.resolved_kernels.items():
            schema = node.schema
            if schema is None or node.kind == ENGINE_KIND:  # engines come from their builder's hook
                continue
            entry = _op_entry(ops, schema, registry, plugins)
            from ..dispatch.resolve import dispatch_dtypes

            entry["dtypes"].update(dispatch_dtypes(node))
            k = rk.kernel
            entry["kernels"][(k.op, k.backend, k.kind, k.provider.name if k.provider else "")] = SelectedKernel(
                k.op, k.backend, k.kind, tuple(k.dtypes), _ref(k.impl, f"the kernel of {k.op}"),
                None if k.matcher is None else _ref(k.matcher, f"the matcher of {k.op}"), k.priority,
                _plugin_of(k.provider, plugins))
            for d in entry["dtypes"]:
                rec = registry.dtypes.get(d)
                if rec is not None:
                    dtypes[d] = {"plugin": _plugin_of(rec.provider, plugins), "kind": rec.kind,
                                 "storage": rec.storage, "params": dict(rec.params)}
    selected = tuple(SelectedOp(op, e["schema"], e["plugin"], tuple(sorted(e["dtypes"])),
                                tuple(e["kernels"].values()), e["rule"], e["decomposition"])
                     for op, e in sorted(ops.items()))
    return Selection(tuple(models), dict(sorted(plugins.items())), dict(sorted(backends.items())),
                     dict(sorted(dtypes.items())), selected, dict(sorted(kind_rules.items())), _made_under(modules))


def _made_under(modules: Sequence[Any]) -> tuple:
    """The full registry's plugins all ``modules`` were loaded with (empty if any was loaded selectively or
    with another plugin manager)."""
    pms = {id(sm.plugin_manager): sm.plugin_manager for sm in modules}
    if len(pms) != 1 or any(sm.registry.selection is not None for sm in modules):
        return ()
    from ..runtime.prepared import registry_plugins

    return registry_plugins(next(iter(pms.values())))


def _schemaless_kinds(sm) -> set[str]:
    """Kinds of the nodes propagation looks up by kind (no schema: prim::Constant, prim::ListConstruct...)."""
    return {n.kind for g in (sm.source_graph, sm.graph) for n in g.all_nodes() if n.schema is None}


def _schemas_used(sm):
    """Schemas of every node of the model as given (schema resolution and the passes see those) and
    as prepared (what runs)."""
    seen = {}
    for n in (*sm.source_graph.all_nodes(), *sm.graph.all_nodes()):
        if n.schema is not None:
            seen.setdefault(n.schema.qualified_name, n.schema)
    return seen.values()


def _op_entry(ops: dict, schema, registry, plugins) -> dict:
    q = schema.qualified_name
    entry = ops.get(q)
    if entry is None:
        declared = registry.declared.get(q)
        plugin = _plugin_of(declared[1], plugins) if declared is not None else None
        entry = ops[q] = {"schema": str(schema), "plugin": plugin, "dtypes": set(), "kernels": {}, "rule": None,
                          "decomposition": None}
    return entry


def _add_rule(entry: dict, op: str, registry, plugins) -> None:
    rule = registry.shape_rules.lookup(op) if registry.shape_rules is not None else None
    if rule is not None and entry["rule"] is None:
        entry["rule"] = (rule.op, _ref(rule.ref, f"the shape rule of {op}"), _plugin_of(rule.provider, plugins))


def _add_decomposition(entry: dict, schema, registry, plugins) -> None:
    table = registry.decompositions
    rec = table.lookup(schema.qualified_name) if table is not None else None
    if rec is None or entry["decomposition"] is not None:
        return
    from ..ops.decomposition_table import _text  # the text a generator writes for this op

    text = _text(rec, schema, registry.schemas)
    if text is not None:
        entry["decomposition"] = (text, _plugin_of(rec.provider, plugins))


# -- the registry ----------------------------------------------------------------------------------------
def check_selection(sel: Selection, reports: dict) -> dict[str, PluginInfo]:
    """The loaded plugins the selection names, as ``PluginInfo``; ``SelectionError`` for one that is
    missing, failed, or has another distribution or version than the one selected from."""
    infos = {}
    for name, (dist, version) in sel.plugins.items():
        rep = reports.get(name)
        users = [o for o in sel.ops if o.plugin == name or any(k.plugin == name for k in o.kernels)]
        where = f"{sel.source}:{users[0].line}: {users[0].op}" if users and users[0].line else sel.source
        if rep is None or rep.status != "loaded":
            state = "not installed" if rep is None else f"{rep.status}" + (f" ({rep.error})" if rep.error else "")
            raise SelectionError(f"{where}: selected from plugin {name} ({dist} {version or ''}), which is "
                                 f"{state}".rstrip())
        if (rep.dist or name, rep.version) != (dist, version):
            raise SelectionError(f"{where}: selected from {dist} {version}, but {rep.dist} {rep.version} is "
                                 "installed: run srcore select again")
        infos[name] = rep.info
    for o in sel.ops:
        for k in o.kernels:
            module = k.impl.partition(":")[0]
            if importlib.util.find_spec(module.split(".")[0]) is None:
                raise SelectionError(f"{sel.source}:{o.line}: {o.op}: kernel module {module!r} does not exist")
    return infos


def read_selection(path):
    """The :class:`Selection` of a file ``srcore select`` wrote (parsed once per content)."""
    from .selection_file import read_selection as read

    return read(path)


def write_selection(sel: Selection, path) -> None:
    """Write ``sel`` as YAML to ``path`` (``"-"``: standard output)."""
    from .selection_file import write_selection as write

    write(sel, path)


def to_yaml(sel: Selection) -> str:
    from .selection_file import to_yaml as dump

    return dump(sel)


def build_selected_registry(manager, sel: Selection):
    """The registry of ``sel`` (plugins' engine builders and subcommands still come from their hooks)."""
    from ..dispatch.resolve import accepts_dtypes
    from ..dispatch.table import KernelTable
    from ..ops.rule_table import ShapeRuleTable
    from .registry import Registry, collect_records, unique_records
    from .schemas import new_schema_registry
    from .types import Backend, Kernel

    infos = check_selection(sel, {r.name: r for r in manager.loaded_reports()})
    schemas = new_schema_registry()
    declared: dict = {}
    parsed = _parse_schemas(sel)
    kernels: dict[tuple, tuple] = {}
    kernel_dtypes: dict[tuple, dict] = {}
    rules = ShapeRuleTable()
    decompositions = None   # a table only when some op has one (most selections: none)
    for o in sel.ops:
        if o.plugin is not None:
            schema = parsed[o.op]
            declared[o.op] = (schema, infos[o.plugin])
            schemas.add(schema, provider=str(infos[o.plugin]), source=f"{sel.source}:{o.line}")
        for k in o.kernels:
            # only the dtypes the models were dispatched with (all the kernel's when they used no tensor)
            used = [d for d in o.dtypes if accepts_dtypes(k, (d,))] or list(k.dtypes)
            key = (k.op, k.backend, k.kind, k.plugin, k.impl)
            kernel_dtypes.setdefault(key, {}).update(dict.fromkeys(used))
            if key not in kernels:
                kernels[key] = (k, f"{sel.source}:{o.line}")
        if o.rule is not None:
            rules.add(o.rule[0], o.rule[1], infos[o.rule[2]])
        if o.decomposition is not None:
            if decompositions is None:
                from ..ops.decomposition_table import DecompositionTable

                decompositions = DecompositionTable()
            from .hook_types import Decomposition

            decompositions.add(Decomposition(o.op, o.decomposition[0]).provided_by(infos[o.decomposition[1]]))
    for key, ref, plugin in sel.rules.values():
        rules.add(key, ref, infos[plugin])
    table = KernelTable(schemas)
    table.add(Kernel(k.op, k.backend, k.kind, tuple(kernel_dtypes[key]), k.impl, matcher=k.matcher, priority=k.priority,
                     source=where).provided_by(infos[k.plugin]) for key, (k, where) in kernels.items())
    backends = {b: Backend(b, desc).provided_by(infos[p]) for b, (p, desc) in sel.backends.items()}
    dtypes = {}
    if sel.dtypes:
        from .hook_types import DType

        dtypes = {n: DType(n, d["kind"], d["storage"], d["params"]).provided_by(infos[d["plugin"]])
                  for n, d in sel.dtypes.items()}
    records = collect_records(manager, ("srcore_engine_builders", "srcore_subcommands"))
    engines = {}
    for hooks in records.values():
        for e in hooks.get("srcore_engine_builders", []):
            if e.backend in backends and e.backend not in engines:
                engines[e.backend] = e
    subcommands = unique_records(manager, records, "srcore_subcommands", lambda r: r.name)
    return Registry(schemas, table, dict(sorted(declared.items())), (), dtypes, backends, engines, subcommands,
                    rules, decompositions, selection=sel)


def _parse_schemas(sel: Selection) -> dict:
    """The selected schemas, through the schema cache (one ``- func:`` text per selection file content)."""
    from ..ops.cache import load_schemas

    text = "".join(f"- func: {_quote(o.schema)}\n" for o in sel.ops if o.plugin is not None)
    return {d.schema.qualified_name: d.schema for d in load_schemas([(f"selection:{sel.source}", text)])}


def _quote(schema: str) -> str:
    return "'" + schema.replace("'", "''") + "'"

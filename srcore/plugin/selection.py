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

The file is YAML; :func:`read_selection` rejects unknown keys, malformed
values, ops whose plugin is not installed (or has another version than the
one selected from) and kernels whose module does not exist, each as a
:class:`srcore.SelectionError` naming ``file:line`` and the op.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Any, Iterable, Sequence

import attrs

from ..errors import SelectionError
from .types import PluginInfo

ENGINE_KIND = "srcore::engine"

FORMAT = 1


@attrs.frozen
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
class Selection:
    """What ``srcore select`` records; ``source`` names the file it was read from."""

    models: tuple[str, ...]
    plugins: dict[str, tuple[str, str | None]]          # entry-point name -> (distribution, version)
    backends: dict[str, tuple[str, str]]                # backend -> (plugin, description)
    dtypes: dict[str, dict[str, Any]]                   # plugin dtype -> {plugin, kind, storage, params}
    ops: tuple[SelectedOp, ...]
    #: shape rules of node kinds that have no schema (prim::Constant, ...): kind -> (key, "module:attr", plugin)
    rules: dict[str, tuple[str, str, str]] = attrs.Factory(dict)
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
                     dict(sorted(dtypes.items())), selected, dict(sorted(kind_rules.items())))


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


# -- the file ---------------------------------------------------------------------------------------------
def to_yaml(sel: Selection) -> str:
    """The selection as YAML (what ``srcore select`` writes)."""
    import yaml

    def kernel(k: SelectedKernel) -> dict:
        d = {"op": k.op, "backend": k.backend, "kind": k.kind, "dtypes": list(k.dtypes), "impl": k.impl}
        if k.matcher:
            d["matcher"] = k.matcher
        if k.priority:
            d["priority"] = k.priority
        d["plugin"] = k.plugin
        return d

    ops = {}
    for o in sel.ops:
        d: dict[str, Any] = {"schema": o.schema, "plugin": o.plugin, "dtypes": list(o.dtypes)}
        if o.kernels:
            d["kernels"] = [kernel(k) for k in o.kernels]
        if o.rule:
            d["rule"] = {"key": o.rule[0], "ref": o.rule[1], "plugin": o.rule[2]}
        if o.decomposition:
            d["decomposition"] = {"graph": o.decomposition[0], "plugin": o.decomposition[1]}
        ops[o.op] = d
    rules = {kind: {"key": k, "ref": ref, "plugin": p} for kind, (k, ref, p) in sel.rules.items()}
    doc = {
        "srcore_selection": FORMAT,
        "models": list(sel.models),
        "plugins": {n: {"dist": d, "version": v} for n, (d, v) in sel.plugins.items()},
        "backends": {b: {"plugin": p, "description": desc} for b, (p, desc) in sel.backends.items()},
        "dtypes": {n: dict(d) for n, d in sel.dtypes.items()},
        "ops": ops,
        "rules": rules,
    }
    head = ("# srcore selective build: written by `srcore select`; use with SRCORE_SELECTION=<this file>\n"
            "# or srcore.Options(selection=<this file>). Every op, kernel and rule a load may use is here.\n")

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper, value):  # IR text as a block scalar, one line per node
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    return head + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True, default_flow_style=None)


def write_selection(sel: Selection, path: str | os.PathLike) -> None:
    text = to_yaml(sel)
    if os.fspath(path) == "-":
        print(text, end="")
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


_TOP = ("srcore_selection", "models", "plugins", "backends", "dtypes", "ops", "rules")
_OP_KEYS = ("schema", "plugin", "dtypes", "kernels", "rule", "decomposition")
_KERNEL_KEYS = ("op", "backend", "kind", "dtypes", "impl", "matcher", "priority", "plugin")


class _Reader:
    """YAML nodes -> values, every error naming ``file:line``."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, node, message: str) -> SelectionError:
        line = node.start_mark.line + 1 if node is not None else None
        return SelectionError(f"{self.source}:{line}: {message}" if line else f"{self.source}: {message}")

    def mapping(self, node, what: str, keys: Sequence[str] | None = None, required: Sequence[str] = ()) -> dict:
        import yaml

        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping")
        out = {}
        for k, v in node.value:
            name = k.value if isinstance(k, yaml.ScalarNode) else None
            if keys is not None and name not in keys:
                raise self.fail(k, f"unknown key {name!r} in {what} (allowed: {', '.join(keys)})")
            if name in out:
                raise self.fail(k, f"duplicate key {name!r} in {what}")
            out[name] = (k, v)
        for r in required:
            if r not in out:
                raise self.fail(node, f"{what} lacks {r!r}")
        return out

    def scalar(self, node, what: str, types=(str,), optional: bool = False):
        import yaml

        if optional and isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            return None
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{what} must be a {' or '.join(t.__name__ for t in types)}")
        value = yaml.safe_load(yaml.serialize(node)) if node.tag != "tag:yaml.org,2002:str" else node.value
        if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
            raise self.fail(node, f"{what} must be a {' or '.join(t.__name__ for t in types)}, not {value!r}")
        return value

    def strings(self, node, what: str) -> tuple[str, ...]:
        import yaml

        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, f"{what} must be a list")
        return tuple(self.scalar(v, f"an entry of {what}") for v in node.value)


def read_selection(path: str | os.PathLike) -> Selection:
    """Parse a selection file (structure only; :func:`check_selection` checks it against the plugins).

    A file is parsed once per content: the result is kept, as plain tuples (``marshal``, never
    pickle), beside the schema cache (``$SRCORE_CACHE_DIR/selections/``), so that a start-up with a
    selection does not even import the YAML parser. ``SRCORE_NO_SCHEMA_CACHE=1`` turns it off.
    """
    source = os.fspath(path)
    try:
        with open(source, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SelectionError(f"cannot read selection {source}: {exc}") from None
    cache = _cache_file(source, data)
    if cache is not None:
        sel = _read_cache(cache, source)
        if sel is not None:
            return sel
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SelectionError(f"{source}: not UTF-8 text: {exc}") from None
    sel = _parse(text, source)
    if cache is not None:
        _write_cache(cache, sel)
    return sel


def _cache_file(source: str, data: bytes):
    if os.environ.get("SRCORE_NO_SCHEMA_CACHE", "") not in ("", "0"):
        return None
    import hashlib

    from .. import __version__
    from ..cachedir import cache_root

    h = hashlib.sha256(data)
    h.update(f"\0{os.path.abspath(source)}\0{__version__}\0{FORMAT}".encode())
    return cache_root() / "selections" / f"{h.hexdigest()[:40]}.marshal"


def _read_cache(path, source: str) -> Selection | None:
    import marshal

    try:
        models, plugins, backends, dtypes, ops, rules = marshal.loads(path.read_bytes())
        return Selection(models, plugins, backends, dtypes,
                         tuple(SelectedOp(*o[:4], tuple(SelectedKernel(*k) for k in o[4]), *o[5:]) for o in ops),
                         rules, source)
    except Exception:  # missing, damaged or from another layout: parse the file
        return None


def _write_cache(path, sel: Selection) -> None:
    import marshal

    ops = tuple((o.op, o.schema, o.plugin, o.dtypes, tuple(attrs.astuple(k) for k in o.kernels), o.rule,
                 o.decomposition, o.line) for o in sel.ops)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(marshal.dumps((sel.models, sel.plugins, sel.backends, sel.dtypes, ops, sel.rules)))
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass  # an unwritable cache only costs the parse


def _parse(text: str, source: str) -> Selection:
    import yaml

    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise SelectionError(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    r = _Reader(source)
    if root is None:
        raise SelectionError(f"{source}: empty selection file")
    top = r.mapping(root, "a selection", _TOP, required=("srcore_selection", "ops"))
    fmt = r.scalar(top["srcore_selection"][1], "srcore_selection", (int,))
    if fmt != FORMAT:
        raise r.fail(top["srcore_selection"][1], f"selection format {fmt} (this srcore reads {FORMAT})")
    models = r.strings(top["models"][1], "models") if "models" in top else ()
    plugins = {}
    for name, (k, v) in (r.mapping(top["plugins"][1], "plugins") if "plugins" in top else {}).items():
        fields = r.mapping(v, f"plugin {name}", ("dist", "version"), required=("dist",))
        version = r.scalar(fields["version"][1], "version", (str, int, float), optional=True) \
            if "version" in fields else None
        plugins[name] = (r.scalar(fields["dist"][1], "dist"),
                         None if version is None else fields["version"][1].value)  # "1.0" as written, not 1.0
    backends = {}
    for name, (k, v) in (r.mapping(top["backends"][1], "backends") if "backends" in top else {}).items():
        fields = r.mapping(v, f"backend {name}", ("plugin", "description"), required=("plugin",))
        backends[name] = (_known_plugin(r, fields["plugin"][1], plugins),
                          r.scalar(fields["description"][1], "description") if "description" in fields else "")
    dtypes = {}
    for name, (k, v) in (r.mapping(top["dtypes"][1], "dtypes") if "dtypes" in top else {}).items():
        fields = r.mapping(v, f"dtype {name}", ("plugin", "kind", "storage", "params"), required=("plugin",))
        params = yaml.safe_load(yaml.serialize(fields["params"][1])) if "params" in fields else {}
        if not isinstance(params, dict):
            raise r.fail(fields["params"][1], "params must be a mapping")
        dtypes[name] = {"plugin": _known_plugin(r, fields["plugin"][1], plugins),
                        "kind": r.scalar(fields["kind"][1], "kind") if "kind" in fields else "quantized",
                        "storage": r.scalar(fields["storage"][1], "storage", optional=True)
                        if "storage" in fields else None, "params": params}
    ops = []
    for op, (k, v) in r.mapping(top["ops"][1], "ops").items():
        ops.append(_read_op(r, op, k, v, plugins))
    rules = {}
    for kind, (k, v) in (r.mapping(top["rules"][1], "rules") if "rules" in top else {}).items():
        rules[kind] = _read_rule(r, v, f"the rule of {kind}", plugins)
    return Selection(models, plugins, backends, dtypes, tuple(ops), rules, source)


def _read_rule(r: _Reader, node, what: str, plugins: dict) -> tuple[str, str, str]:
    rf = r.mapping(node, what, ("key", "ref", "plugin"), required=("key", "ref", "plugin"))
    return r.scalar(rf["key"][1], "key"), r.scalar(rf["ref"][1], "ref"), _known_plugin(r, rf["plugin"][1], plugins)


def _known_plugin(r: _Reader, node, plugins: dict, optional: bool = False) -> str | None:
    name = r.scalar(node, "plugin", optional=optional)
    if name is not None and name not in plugins:
        raise r.fail(node, f"plugin {name!r} is not listed under 'plugins'")
    return name


def _read_op(r: _Reader, op: str, key_node, node, plugins: dict) -> SelectedOp:
    from ..errors import SchemaError
    from ..ops.schema import FunctionSchema

    f = r.mapping(node, f"op {op}", _OP_KEYS, required=("schema",))
    schema_text = r.scalar(f["schema"][1], f"the schema of {op}")
    try:
        schema = FunctionSchema.parse(schema_text)
    except SchemaError as exc:
        raise r.fail(f["schema"][1], f"{op}: {exc}") from None
    if schema.qualified_name != op:
        raise r.fail(f["schema"][1], f"the schema of {op} declares {schema.qualified_name}")
    plugin = _known_plugin(r, f["plugin"][1], plugins, optional=True) if "plugin" in f else None
    dtypes = r.strings(f["dtypes"][1], f"the dtypes of {op}") if "dtypes" in f else ()
    kernels = []
    import yaml

    if "kernels" in f:
        if not isinstance(f["kernels"][1], yaml.SequenceNode):
            raise r.fail(f["kernels"][1], f"the kernels of {op} must be a list")
        for kn in f["kernels"][1].value:
            kf = r.mapping(kn, f"a kernel of {op}", _KERNEL_KEYS, required=("backend", "kind", "dtypes", "impl",
                                                                             "plugin"))
            kernels.append(SelectedKernel(
                r.scalar(kf["op"][1], "op") if "op" in kf else op, r.scalar(kf["backend"][1], "backend"),
                r.scalar(kf["kind"][1], "kind"), r.strings(kf["dtypes"][1], "dtypes"),
                r.scalar(kf["impl"][1], "impl"),
                r.scalar(kf["matcher"][1], "matcher", optional=True) if "matcher" in kf else None,
                r.scalar(kf["priority"][1], "priority", (int,)) if "priority" in kf else 0,
                _known_plugin(r, kf["plugin"][1], plugins)))
    rule = _read_rule(r, f["rule"][1], f"the rule of {op}", plugins) if "rule" in f else None
    decomposition = None
    if "decomposition" in f:
        df = r.mapping(f["decomposition"][1], f"the decomposition of {op}", ("graph", "plugin"),
                       required=("graph", "plugin"))
        decomposition = (r.scalar(df["graph"][1], "graph"), _known_plugin(r, df["plugin"][1], plugins))
    return SelectedOp(op, schema_text, plugin, dtypes, tuple(kernels), rule, decomposition, key_node.start_mark.line + 1)


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


def build_selected_registry(manager, sel: Selection):
    """The registry of ``sel`` (plugins' engine builders and subcommands still come from their hooks)."""
    from ..dispatch.build import _call_hooks, _unique
    from ..dispatch.schemas import new_schema_registry
    from ..dispatch.table import KernelTable
    from ..ops.decomposition_table import DecompositionTable
    from ..ops.shapes.table import ShapeRuleTable
    from .manager import Registry
    from .types import Backend, Decomposition, DType, Kernel

    infos = check_selection(sel, {r.name: r for r in manager.reports})
    schemas = new_schema_registry()
    declared: dict = {}
    parsed = _parse_schemas(sel)
    kernels: dict[tuple, tuple] = {}
    kernel_dtypes: dict[tuple, dict] = {}
    rules = ShapeRuleTable()
    decompositions = DecompositionTable()
    for o in sel.ops:
        if o.plugin is not None:
            schema = parsed[o.op]
            declared[o.op] = (schema, infos[o.plugin])
            schemas.add(schema, provider=str(infos[o.plugin]), source=f"{sel.source}:{o.line}")
        for k in o.kernels:
            # only the dtypes the models were dispatched with (all the kernel's when they used no tensor)
            used = [d for d in o.dtypes if "*" in k.dtypes or d in k.dtypes] or list(k.dtypes)
            key = (k.op, k.backend, k.kind, k.plugin, k.impl)
            kernel_dtypes.setdefault(key, {}).update(dict.fromkeys(used))
            if key not in kernels:
                kernels[key] = (k, f"{sel.source}:{o.line}")
        if o.rule is not None:
            rules.add(o.rule[0], o.rule[1], infos[o.rule[2]])
        if o.decomposition is not None:
            decompositions.add(Decomposition(o.op, o.decomposition[0]).provided_by(infos[o.decomposition[1]]))
    for key, ref, plugin in sel.rules.values():
        rules.add(key, ref, infos[plugin])
    table = KernelTable(schemas)
    table.add(Kernel(k.op, k.backend, k.kind, tuple(kernel_dtypes[key]), k.impl, matcher=k.matcher, priority=k.priority,
                     source=where).provided_by(infos[k.plugin]) for key, (k, where) in kernels.items())
    backends = {b: Backend(b, desc).provided_by(infos[p]) for b, (p, desc) in sel.backends.items()}
    dtypes = {n: DType(n, d["kind"], d["storage"], d["params"]).provided_by(infos[d["plugin"]])
              for n, d in sel.dtypes.items()}
    records = _call_hooks(manager, ("srcore_engine_builders", "srcore_subcommands"))
    engines = {}
    for hooks in records.values():
        for e in hooks.get("srcore_engine_builders", []):
            if e.backend in backends and e.backend not in engines:
                engines[e.backend] = e
    subcommands = _unique(manager, records, "srcore_subcommands", lambda r: r.name)
    return Registry(schemas, table, dict(sorted(declared.items())), (), dtypes, backends, engines, subcommands,
                    rules, decompositions, selection=sel)


def _parse_schemas(sel: Selection) -> dict:
    """The selected schemas, through the schema cache (one ``- func:`` text per selection file content)."""
    from ..ops.cache import load_schemas

    text = "".join(f"- func: {_quote(o.schema)}\n" for o in sel.ops if o.plugin is not None)
    return {d.schema.qualified_name: d.schema for d in load_schemas([(f"selection:{sel.source}", text)])}


def _quote(schema: str) -> str:
    return "'" + schema.replace("'", "''") + "'"

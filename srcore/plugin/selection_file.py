"""The selection file: :class:`srcore.plugin.selection.Selection` as YAML, and back.

Reading names ``file:line`` in every error (a :class:`srcore.SelectionError`)
and keeps the parsed result beside the schema cache, as plain tuples
(``marshal``), so that a start-up with a selection imports no YAML parser.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import attrs

from ..errors import SelectionError
from .selection import FORMAT, SelectedKernel, SelectedOp, Selection


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
    if sel.made_under:
        doc["made_under"] = [list(r) for r in sel.made_under]
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


_TOP = ("srcore_selection", "models", "plugins", "backends", "dtypes", "ops", "rules", "made_under")
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
    from .. import __version__
    from .._digest import small_blake2b
    from ..cachedir import cache_dir_str

    h = small_blake2b(data)
    h.update(f"\0{os.path.abspath(source)}\0{__version__}\0{FORMAT}".encode())
    return cache_dir_str("selections", f"b{h.hexdigest()[:40]}.marshal")   # "b": BLAKE2b keys


def _read_cache(path, source: str) -> Selection | None:
    import marshal

    from ..cachedir import read_bytes

    try:
        models, plugins, backends, dtypes, ops, rules, made_under = marshal.loads(read_bytes(path))
        return Selection(models, plugins, backends, dtypes,
                         tuple(SelectedOp(*o[:4], tuple(SelectedKernel(*k) for k in o[4]), *o[5:]) for o in ops),
                         rules, made_under, source)
    except Exception:  # missing, damaged or from another layout: parse the file
        return None


def _write_cache(path, sel: Selection) -> None:
    import marshal

    ops = tuple((o.op, o.schema, o.plugin, o.dtypes, tuple(attrs.astuple(k) for k in o.kernels), o.rule,
                 o.decomposition, o.line) for o in sel.ops)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{os.path.splitext(path)[0]}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(marshal.dumps((sel.models, sel.plugins, sel.backends, sel.dtypes, ops, sel.rules,
                                   sel.made_under)))
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
    made_under = _read_made_under(r, top["made_under"][1]) if "made_under" in top else ()
    return Selection(models, plugins, backends, dtypes, tuple(ops), rules, made_under, source)


def _read_made_under(r: _Reader, node) -> tuple:
    """``made_under``: ``[name, dist, version, status]`` lists (dist and version may be null)."""
    import yaml

    if not isinstance(node, yaml.SequenceNode):
        raise r.fail(node, "made_under must be a list")
    out = []
    for item in node.value:
        if not isinstance(item, yaml.SequenceNode) or len(item.value) != 4:
            raise r.fail(item, "an entry of made_under must be a list [name, dist, version, status]")
        name, dist, version, status = item.value
        out.append((r.scalar(name, "a plugin name"), r.scalar(dist, "a distribution", optional=True),
                    None if r.scalar(version, "a version", (str, int, float), optional=True) is None else version.value,
                    r.scalar(status, "a plugin status")))
    return tuple(out)


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



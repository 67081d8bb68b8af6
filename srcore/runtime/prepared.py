"""A model saved already prepared: its graph is what the load's passes made of it, and a record says so.

``StaticModule.save(path, prepared=True)`` writes the graph as the default pass pipeline left it (alias
normalization, out-overload lowering, decompositions, the passes) and its values' propagated types (the IR
text carries them), with a record in the model's metadata (key ``srcore.prepared``): the srcore version that
prepared it, the input types it was prepared for, the backends, and a fingerprint of the registry (a selective
build's selection, or the loaded plugins and their versions) and of the options. A load with the same record
(and ``optimize`` on) uses the graph as it is: no pass runs and no pass module is imported (~5 ms of imports
and ~1-2 ms of passes on a small model, on the Intel VM of docs/performance.md); when the record also says the
types are the propagated ones (``types``: checked at save, by parsing the printed graph back), no shape
propagation runs either and ``srcore.ops.shapes`` is not imported; and the layouts of the input signatures the
saving load had planned are kept, so that a first call with one of them propagates nothing either. Anything
else prepares it again, as any graph; the pipeline is idempotent, so that load gets the same graph: a record
made under another registry or other options never matches, nor one of another srcore version.

Only a load that decomposed nothing is saved with the record (the load report of a later load would otherwise
not list the decompositions).
"""
from __future__ import annotations

from typing import Any, Sequence

KEY = "srcore.prepared"
FORMAT = 2


def _fields(input_types: Sequence[Any], backends: Sequence[str], fingerprint: str) -> dict:
    from .. import __version__

    return {"format": FORMAT, "srcore": __version__, "input_types": [str(t) for t in input_types],
            "backends": list(backends), "fingerprint": fingerprint}


def record(input_types: Sequence[Any], backends: Sequence[str], fingerprint: str = "", types: bool = False,
           signatures: Sequence[Any] = ()) -> str:
    """The metadata value of a graph prepared for ``input_types`` on ``backends``, by this srcore, under the
    registry and options of ``fingerprint``; ``types``: the graph's value types are the propagated ones;
    ``signatures``: the planned tensors' layouts of the input signatures the saving load had seen
    (``[[[shape, dtype number], ...], [[slot, shape, dtype], ...]]``; a load's first call with one of
    them propagates nothing)."""
    import json

    return json.dumps({**_fields(input_types, backends, fingerprint), "types": bool(types),
                       "signatures": list(signatures)}, separators=(",", ":"))


def match(model: Any, input_types: Sequence[Any], backends: Sequence[str], fingerprint: str | Sequence[str]) -> dict | None:
    """The record of ``model`` if this srcore prepared it for these input types, backends and
    fingerprint, or one of these fingerprints (else None)."""
    text = (getattr(model, "metadata", None) or {}).get(KEY)
    if not isinstance(text, str):
        return None
    from .._fastjson import loads

    try:
        rec = loads(text)
    except ValueError:
        return None
    if not (isinstance(rec, dict) and isinstance(rec.get("types"), bool) and isinstance(rec.get("signatures"), list)):
        return None
    accepted = (fingerprint,) if isinstance(fingerprint, str) else tuple(fingerprint)
    expected = _fields(input_types, backends, "")
    del expected["fingerprint"]
    if not all(rec.get(k) == v for k, v in expected.items()):
        return None
    return rec if rec.get("fingerprint") in accepted else None


def prepared_for(model: Any, input_types: Sequence[Any], backends: Sequence[str], fingerprint: str = "") -> bool:
    """True if ``model`` holds a graph this srcore prepared for these input types, backends and fingerprint."""
    return match(model, input_types, backends, fingerprint) is not None


def registry_plugins(plugin_manager: Any) -> tuple[tuple[str, str | None, str | None, str], ...]:
    """The loaded plugins as a full registry's fingerprint names them: ``(name, dist, version, status)``."""
    return tuple((r.name, r.dist, r.version, r.status) for r in plugin_manager.loaded_reports())


def fingerprint(registry: Any, options: Any, plugin_manager: Any) -> str:
    """What a prepared graph and its types depend on besides the model: the registry (a selective
    build's selection, else the loaded plugins with their versions and states) and the options
    (all but the selection, which the registry stands for). Empty when the options hold values
    that are not plain data (engine options: such a load is never saved prepared)."""
    if getattr(options, "engine_options", ()):
        return ""
    sel = registry.selection
    if sel is not None:
        what: Any = ("selection", sel.plugins, sel.backends, sel.dtypes, sel.rules,
                     [(o.op, o.schema, o.plugin, o.dtypes, o.rule, o.decomposition,
                       [(k.op, k.backend, k.kind, k.dtypes, k.impl, k.matcher, k.priority, k.plugin)
                        for k in o.kernels])
                      for o in sel.ops])
    else:
        what = ("plugins", list(registry_plugins(plugin_manager)))
    return _digest(what, options)


def fingerprints(registry: Any, options: Any, plugin_manager: Any) -> tuple[str, ...]:
    """The fingerprints a record may hold for this load: :func:`fingerprint`, and for a selective build
    made by ``srcore select`` under a full registry (``Selection.made_under``) that registry's with these
    options too. A graph prepared under it is the graph the selection was collected from (its ops, kernels
    and rules are selected, which the load checks as for any graph); the passes would leave it as it is."""
    own = fingerprint(registry, options, plugin_manager)
    if not own:
        return ()
    sel = registry.selection
    if sel is None or not sel.made_under:
        return (own,)
    return own, _digest(("plugins", [tuple(r) for r in sel.made_under]), options)


def _digest(what: Any, options: Any) -> str:
    import attrs

    from .._digest import small_sha256

    # the selection: the registry stands for it; prepared_cache: where a prepared graph is kept, not what it is
    opts = [(a.name, getattr(options, a.name)) for a in attrs.fields(type(options))
            if a.name not in ("selection", "prepared_cache")]
    return small_sha256(repr((what, opts)).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def same_types(graph: Any, back: Any) -> bool:
    """True if every value of ``back`` (``graph`` printed and parsed back) has the type it has in ``graph`` (what lets
    a load of the saved graph skip propagation)."""
    from .process import enumerate_values

    ours, theirs = list(enumerate_values(graph)), list(enumerate_values(back))
    return len(ours) == len(theirs) and all(a.type is not None and a.type == b.type for a, b in zip(ours, theirs))

"""Which plugin distributions a model needs: recorded when it is saved, checked when it is loaded.

A ``.srm`` file records, for each op namespace its graph uses, the
distributions that declared those ops, and for each backend the model was
prepared with, the distribution that provides the backend
(:class:`RequiredPlugins`, ``__metadata__["plugins"]``). A load that misses
one of them (an op nobody declares, an unknown backend) says which
distribution to install; a load that touches the namespace of a plugin that
failed names that plugin and its error.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import attrs

from .._repr import shared_repr
from .types import PluginInfo


@attrs.frozen
@shared_repr
class Dist:
    """A distribution and its version, as recorded in a model file."""

    name: str
    version: str | None = None

    def __str__(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name

    @classmethod
    def of(cls, info: PluginInfo) -> "Dist":
        return cls(info.dist or info.name, info.version)


def _pairs(value) -> tuple:
    return tuple(sorted(dict(value).items()))


@attrs.frozen
@shared_repr
class RequiredPlugins:
    """``namespaces``: op namespace -> the distributions that declared the model's ops in it;
    ``backends``: backend -> the distribution that provides it."""

    namespaces: tuple[tuple[str, tuple[Dist, ...]], ...] = attrs.field(default=(), converter=_pairs)
    backends: tuple[tuple[str, Dist], ...] = attrs.field(default=(), converter=_pairs)

    def for_namespace(self, namespace: str) -> tuple[Dist, ...]:
        return dict(self.namespaces).get(namespace, ())

    def for_backend(self, backend: str) -> Dist | None:
        return dict(self.backends).get(backend)

    def to_json(self) -> str:
        import json

        return json.dumps({
            "namespaces": {ns: [{"dist": d.name, "version": d.version} for d in ds] for ns, ds in self.namespaces},
            "backends": {b: {"dist": d.name, "version": d.version} for b, d in self.backends},
        }, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "RequiredPlugins":
        """Parse ``__metadata__["plugins"]``; ``ValueError`` on anything malformed."""
        from .._fastjson import loads

        obj = loads(text)
        if not isinstance(obj, dict) or set(obj) - {"namespaces", "backends"}:
            raise ValueError("plugins must be an object with 'namespaces' and 'backends'")
        namespaces = obj.get("namespaces", {})
        backends = obj.get("backends", {})
        if not isinstance(namespaces, dict) or not isinstance(backends, dict):
            raise ValueError("plugins.namespaces and plugins.backends must be objects")
        return cls({ns: tuple(_dist(d) for d in _list(ds, ns)) for ns, ds in namespaces.items()},
                   {b: _dist(d) for b, d in backends.items()})


def _list(value, key) -> list:
    if not isinstance(value, list):
        raise ValueError(f"plugins.namespaces[{key!r}] must be a list")
    return value


def _dist(obj) -> Dist:
    if not isinstance(obj, dict) or not isinstance(obj.get("dist"), str) or \
            not isinstance(obj.get("version"), (str, type(None))):
        raise ValueError(f"bad distribution record {obj!r} (expected {{'dist': str, 'version': str}})")
    return Dist(obj["dist"], obj.get("version"))


def namespaces_of(graph) -> set[str]:
    return {n.kind.split("::", 1)[0] for n in graph.all_nodes() if "::" in n.kind}


def required_plugins(graph, registry, backends: Sequence[str] | None = None,
                     previous: RequiredPlugins | None = None) -> RequiredPlugins:
    """What ``graph`` needs from the plugins of ``registry``.

    ``backends``: the backends the model was prepared with (default: every installed backend
    with a kernel for one of the graph's ops). ``previous`` (the record the model was loaded
    with) fills in what this registry does not know: saving a model on a machine without
    its plugin keeps their names.
    """
    from ..dispatch.resolve import STRUCTURAL_KINDS

    namespaces: dict[str, set[Dist]] = {}
    ops: set[str] = set()
    schemas = registry.schemas
    for node in graph.all_nodes():
        if "::" not in node.kind or node.kind in STRUCTURAL_KINDS:
            continue
        schema = node.schema
        if schema is None:
            try:
                schema = schemas.resolve(node)
            except Exception:  # undeclared here: ``previous`` may know it
                schema = None
        qnames = [schema.qualified_name] if schema is not None else \
            [s.qualified_name for s in schemas.overloads(node.kind)]
        for q in qnames:
            q = q[:-1] if q.endswith(".") else q
            declared = registry.declared.get(q)
            if declared is not None:
                namespaces.setdefault(q.split("::", 1)[0], set()).add(Dist.of(declared[1]))
                ops.add(q)
    explicit = backends is not None
    if backends is None:
        backends = sorted({k.backend for op in ops for k in registry.kernel_table.kernels_for(op)})
    recorded = {b: Dist.of(registry.backends[b].provider) for b in backends
                if b in registry.backends and registry.backends[b].provider is not None}
    if previous is not None:
        for ns, dists in previous.namespaces:
            if ns in namespaces_of(graph) and ns not in namespaces:
                namespaces[ns] = set(dists)
        for b, d in previous.backends:
            if not explicit or b in backends:
                recorded.setdefault(b, d)
    return RequiredPlugins({ns: tuple(sorted(ds, key=str)) for ns, ds in namespaces.items()}, recorded)


def failed_plugins_touching(namespaces: Iterable[str], reports, required: RequiredPlugins | None) -> list:
    """The failed plugins' reports whose namespace the model touches: the plugin's name is the
    namespace, or the model records the plugin's distribution for it."""
    namespaces = set(namespaces)
    dists = {d.name for ns in namespaces for d in (required.for_namespace(ns) if required else ())}
    return [r for r in reports if r.status == "failed" and (r.name in namespaces or (r.dist and r.dist in dists))]


def describe_failure(report) -> str:
    """``plugin mylib (srcore-mylib 1.0) failed to import: ModuleNotFoundError: ...``."""
    hook, _, reason = (report.error or "").partition(": ")
    what = "failed to import" if hook == "import" else f"failed in {hook}"
    return f"plugin {report.name} ({report.info}) {what}: {reason or report.error}"


def install_hints(required: RequiredPlugins | None, namespaces: Iterable[str], registry, reports) -> list[str]:
    """One line per namespace the registry does not declare, or whose plugin failed: what to install or fix."""
    lines = []
    failed = failed_plugins_touching(namespaces, reports, required)
    for r in failed:
        lines.append(describe_failure(r))
    failed_dists = {r.dist for r in failed}
    declared_ns = {q.split("::", 1)[0] for q in registry.declared}
    for ns in sorted(set(namespaces)):
        dists = [d for d in (required.for_namespace(ns) if required else ()) if d.name not in failed_dists]
        if ns not in declared_ns and dists:
            lines.append(f"the model's {ns}:: ops come from {', '.join(map(str, dists))}, which is not installed: "
                         f"pip install {' '.join(d.name for d in dists)}")
    return lines


def backend_hint(required: RequiredPlugins | None, backend: str) -> str:
    d = required.for_backend(backend) if required is not None else None
    return f" (the model was prepared with it from {d}: pip install {d.name})" if d is not None else ""


"""The ``.srm`` model file: a safetensors file whose ``__metadata__`` carries the model.

``save(model, path)`` writes the parameters as the tensors and, in
``__metadata__`` (all str -> str): the format name and version, the srcore
version, the producer, the graph as IR text, the input specs, output names,
model metadata and required ops (JSON), and two SHA-256 checksums: of the data
section and of the header (canonical JSON of the header without that field).

``load(path, verify="header")`` maps the file and returns a ``Model`` whose
parameters are read-only views on the map. ``verify="header"`` (the default)
checks the structure and the header checksum, which costs microseconds and
keeps loading O(header); ``verify="full"`` also hashes the data section (about
0.6 s per GB), which catches flipped bits inside the weights. See docs/srm-format.md.
"""
from __future__ import annotations

import os
import time
from typing import Any

from .._digest import small_blake2b, small_sha256
from .._fastjson import loads
from .._lazylog import LazyLogger
from ..errors import SrcoreError, SrcoreFormatError
from ..model import Model, collect_params, required_ops, specs_from_json, specs_to_json
from .safetensors_io import Container, canonical_json, encode_header, raw_bytes, tensor_layout, write_file

log = LazyLogger("srcore.format")

FORMAT_NAME = "srcore.srm"
FORMAT_VERSION = "1"
#: version 2: the graph has quantized values (types with ``scale=``/``zero_point=``, quantized parameters
#: stored as their integers); a model without them is still written as version 1
QUANTIZED_FORMAT_VERSION = "2"
SUPPORTED_VERSIONS = {"1", "2"}
_REQUIRED_KEYS = ("format", "format_version", "srcore_version", "producer", "graph", "input_specs",
                  "output_names", "required_ops", "metadata", "data_sha256", "header_sha256")


def _header_digest(header: dict[str, Any]) -> str:
    h = dict(header)
    md = dict(h["__metadata__"])
    md.pop("header_sha256", None)
    h["__metadata__"] = md
    return small_sha256(canonical_json(h).encode("utf-8")).hexdigest()


def save(model: Model, path: str | os.PathLike, *, producer: str | None = None,
         backends: list[str] | tuple[str, ...] | None = None) -> None:
    """Write ``model`` to ``path`` as a ``.srm`` file (atomically).

    The file records which plugin distributions provide the op namespaces the graph uses
    and the backends the model was prepared with (``backends``; default: every installed
    backend with a kernel for one of its ops), so that a load without them can say what to
    install.
    """
    write(model, path, producer=producer, backends=backends)


def write(model: Model, path: str | os.PathLike, *, producer: str | None = None, backends: Any = None,
          registry: Any = None, more_metadata: Any = None, data_blake2b: bool = False,
          graph_form: bool = False) -> None:
    """:func:`save` for srcore's own writers: ``registry`` (default: the plugin manager's) tells which plugins
    the graph's ops come from; ``more_metadata(graph)``, called with the graph parsed back from the IR text to
    be written (the check every save makes), returns metadata to record beside the model's (one print and one
    parse serve both). ``data_blake2b``: also record the data section's BLAKE2b-256 (``data_blake2b``, which
    ``load(verify="entry")`` checks instead of the SHA-256: the prepared cache's entries). ``graph_form``: also record
the graph parsed back in ``srcore.format.graph_form``'s JSON (``graph_form``, which ``load(verify="entry")``
builds the graph from without the IR parser: the prepared cache's entries), when that form carries it exactly."""
    from .. import __version__
    from ..ir.printer import print_graph

    params = dict(model.params)
    for name, arr in collect_params(model.graph).items():  # the graph's arrays are the truth
        params.setdefault(name, arr)
    model.validate()
    engines_md, engine_arrays = _engines_out(getattr(model, "engines", None) or {}, params, path)
    stored = {**params, **engine_arrays}
    try:
        entries, order = tensor_layout(stored)
    except TypeError as exc:
        raise SrcoreError(f"cannot save {os.fspath(path)}: {exc}") from exc
    text = print_graph(model.graph)
    try:  # never write a file that load() would reject
        from ..ir.parser import parse_graph

        back = parse_graph(text, params=params, locate=False)
    except SrcoreError as exc:
        raise SrcoreError(f"cannot save {os.fspath(path)}: the graph's IR text does not parse back: {exc}") from exc
    metadata = model.metadata if more_metadata is None else {**model.metadata, **more_metadata(back)}
    import hashlib
    import json

    data_hash = hashlib.sha256()
    fast_hash = small_blake2b() if data_blake2b else None
    for name in order:
        data_hash.update(raw_bytes(stored[name]))
        if fast_hash is not None:
            fast_hash.update(raw_bytes(stored[name]))
    md = {
        "format": FORMAT_NAME,
        "format_version": QUANTIZED_FORMAT_VERSION if _has_quantized(model.graph) else FORMAT_VERSION,
        "srcore_version": __version__,
        "producer": producer or model.metadata.get("producer", f"srcore {__version__}"),
        "graph": text,
        "input_specs": specs_to_json(model.input_specs),
        "output_names": json.dumps(list(model.output_names)),
        "metadata": canonical_json(metadata),
        "required_ops": json.dumps(required_ops(model.graph)),
        "plugins": _required_plugins(model, backends, registry).to_json(),
        "schemas": json.dumps([str(sch) for sch in _undeclared(model, registry)]),
        "data_sha256": data_hash.hexdigest(),
    }
    if fast_hash is not None:
        md["data_blake2b"] = fast_hash.hexdigest()
    if graph_form:
        from .graph_form import encode

        form = encode(back, params)
        if form is not None:
            md["graph_form"] = form
    if engines_md:
        md["engines"] = canonical_json(engines_md)
    header: dict[str, Any] = {"__metadata__": md, **entries}
    md["header_sha256"] = _header_digest(header)
    write_file(path, encode_header(header), stored, order)


#: tensor names of serialized engines' arrays: ``engine/<n>/<name>``
_ENGINE_PREFIX = "engine/"


def _engines_out(engines: dict, params: dict, path) -> tuple[dict, dict]:
    """The ``engines`` metadata (segment key -> backend, meta, array tensor names) and the arrays."""
    md, arrays = {}, {}
    for i, (key, data) in enumerate(sorted(engines.items())):
        names = {}
        for name, arr in sorted(data.arrays.items()):
            tensor = f"{_ENGINE_PREFIX}{i}/{name}"
            if tensor in params:
                raise SrcoreError(f"cannot save {os.fspath(path)}: parameter {tensor!r} collides with an engine array")
            names[name] = tensor
            arrays[tensor] = arr
        md[key] = {"backend": data.backend, "meta": data.meta, "arrays": names}
    return md, arrays


def _engines_in(c: Container, md: dict, params: dict) -> dict:
    """The serialized engines of a file (their tensors leave ``params``); structure checked."""
    raw = md.get("engines")
    if raw is None:
        return {}
    from ..plugin.engine_types import EngineData  # only for a file that carries engines

    try:
        table = loads(raw)
        if not isinstance(table, dict):
            raise ValueError("not an object")
        out = {}
        for key, entry in table.items():
            if not (isinstance(entry, dict) and isinstance(entry.get("backend"), str)
                    and isinstance(entry.get("meta"), dict) and isinstance(entry.get("arrays"), dict)):
                raise ValueError(f"engine {key[:16]}: expected backend, meta and arrays")
            arrays = {}
            for name, tensor in entry["arrays"].items():
                if not (isinstance(tensor, str) and tensor.startswith(_ENGINE_PREFIX)) or tensor not in params:
                    raise ValueError(f"engine {key[:16]}: array {name!r} names no tensor of the file ({tensor!r})")
                arrays[name] = params[tensor]
            out[key] = EngineData(entry["backend"], entry["meta"], arrays)
    except (ValueError, TypeError) as exc:
        c.fail(f"bad engines metadata: {exc}")
    for entry in table.values():
        for tensor in entry["arrays"].values():
            params.pop(tensor, None)
    return out


def load(path: str | os.PathLike, *, verify: str = "header") -> Model:
    """Read a ``.srm`` file; parameters are zero-copy read-only views on the mapped file.

    ``verify``: ``"header"`` (default) checks the container structure and the header
    checksum; ``"full"`` also checks the SHA-256 of every parameter byte (``"entry"``, the prepared
    cache's: the BLAKE2b-256 its entries record, else as ``"full"``).
    Any problem raises ``SrcoreFormatError`` naming the file.
    """
    from .._gcpause import paused

    with paused():   # a cold start's load: no garbage collection meanwhile (srcore._gcpause)
        return _load(path, verify)


def _load(path, verify: str) -> Model:
    if verify not in ("header", "full", "entry"):
        raise ValueError(f"verify must be 'header' or 'full', not {verify!r}")
    t0 = time.perf_counter()
    c = Container(path)
    md = c.metadata
    if md.get("format") != FORMAT_NAME:
        c.fail(f"not a .srm file (format {md.get('format')!r}, expected {FORMAT_NAME!r})")
    if md.get("format_version") not in SUPPORTED_VERSIONS:
        c.fail(f"unsupported .srm format version {md.get('format_version')!r} "
               f"(this srcore reads {', '.join(sorted(SUPPORTED_VERSIONS))})")
    missing = [k for k in _REQUIRED_KEYS if k not in md]
    if missing:
        c.fail(f"header metadata lacks {', '.join(missing)}")
    if _header_digest(c.header) != md["header_sha256"]:
        c.fail("header checksum mismatch: the header was modified or corrupted")
    if verify == "entry" and isinstance(md.get("data_blake2b"), str) and len(c.data_view()) < 1 << 20:
        # covered by the header checksum checked above; ~3.4x fewer instructions than CPython's SHA-256 (a
        # larger section goes to OpenSSL's SHA-256 below, faster per byte than CPython's BLAKE2b once imported)
        if small_blake2b(c.data_view()).hexdigest() != md["data_blake2b"]:
            c.fail("data checksum mismatch: the parameter data was modified or corrupted")
    elif verify != "header":
        data = c.data_view()
        if len(data) < 1 << 20:   # CPython's SHA-256 for a small model: no OpenSSL import (srcore._digest)
            digest = small_sha256(data).hexdigest()
        else:
            import hashlib

            digest = hashlib.sha256(data).hexdigest()
        if digest != md["data_sha256"]:
            c.fail("data checksum mismatch: the parameter data was modified or corrupted")
    params = {name: c.array(name) for name in c.entries}
    engines = _engines_in(c, md, params)
    try:
        specs = specs_from_json(md["input_specs"])
        outputs = loads(md["output_names"])
        meta = loads(md["metadata"])
        if not (isinstance(outputs, list) and all(isinstance(o, str) for o in outputs)):
            raise ValueError("output_names must be a list of str")
        if not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
            raise ValueError("metadata must map str to str")
    except (ValueError, TypeError) as exc:
        c.fail(f"bad model metadata: {exc}")
    plugins = None
    if "plugins" in md:  # files written before srcore recorded plugins have none
        from ..plugin.requirements import RequiredPlugins

        try:
            plugins = RequiredPlugins.from_json(md["plugins"])
        except (ValueError, TypeError) as exc:
            c.fail(f"bad plugins metadata: {exc}")
    op_schemas = ()
    if md.get("schemas", "[]") != "[]":  # ops no plugin declared where the model was saved: torch's schemas
        op_schemas = _schemas(c, md["schemas"])
    from ..runtime.prepared_cache import parsed_before, remember

    if md["format_version"] == FORMAT_VERSION and parsed_before(md["header_sha256"]):
        # this header parsed and checked before: the graph is parsed when used (a prepared-cache hit never
        # uses it). Not for quantized graphs (format 2), whose parse also rewrites ``params``.
        from .lazy_graph import unparsed

        model = unparsed(c.path, md["graph"], params, specs, tuple(outputs), meta, engines=engines, plugins=plugins,
                         op_schemas=op_schemas)
    else:
        graph = None
        if verify == "entry" and "graph_form" in md:   # a prepared-cache entry: the graph without the parser
            graph = _from_form(c.path, md["graph_form"], params)
        if graph is None:
            graph = _parse(c.path, md["graph"], params)
        params.update(collect_params(graph))  # quantized parameters: their integers with the type's qparams
        model = Model(graph, params, specs, tuple(outputs), meta, engines, plugins=plugins, op_schemas=op_schemas)
        _validate(c.path, model)
    # a StaticModule of it may keep it prepared (its key)
    remember(model, path, params, c.data_view(), md["header_sha256"])
    log.info("read %s (%d parameters, verify=%s) in %.1f ms", os.fspath(path), len(params), verify,
             (time.perf_counter() - t0) * 1e3)
    return model


def parse_checked(path: str, text: str, params: dict, specs, outputs, metadata):
    """The graph of a file read earlier without it (``srcore.format.lazy_graph``), parsed and checked as the
    load would have (with the file's own arrays, specs, outputs and metadata)."""
    from .._gcpause import paused

    with paused():
        graph = _parse(path, text, params)
        _validate(path, Model(graph, params, specs, outputs, metadata))
    return graph


def _validate(path: str, model: Model) -> None:
    try:
        model.validate()
    except SrcoreError as exc:
        raise SrcoreFormatError(f"{path}: inconsistent model: {exc}")


def _registry(registry):
    if registry is not None:
        return registry
    from ..plugin.manager import get_plugin_manager

    return get_plugin_manager().registry


def _required_plugins(model: Model, backends, registry=None):
    from ..plugin.requirements import required_plugins

    return required_plugins(model.graph, _registry(registry), backends, model.plugins)


def _undeclared(model: Model, registry=None) -> tuple:
    return model.undeclared_schemas(_registry(registry).declared)


def _schemas(c: Container, text: str) -> tuple:
    from ..errors import SchemaError
    from ..ops.schema import FunctionSchema

    try:
        texts = loads(text)
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError("schemas must be a JSON list of str")
        return tuple(FunctionSchema.parse(t) for t in texts)
    except (ValueError, SchemaError) as exc:
        c.fail(f"bad schemas metadata: {exc}")


def _from_form(path: str, form: str, params):
    """The graph of an entry's ``graph_form`` (``srcore.format.graph_form``), or None: then the text is parsed."""
    from .graph_form import decode

    try:
        return decode(form, params)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        log.info("%s: graph_form not used (%s: %s)", path, type(exc).__name__, exc)
        return None


def _parse(path: str, text: str, params):
    from ..ir.parser import parse_graph

    try:
        return parse_graph(text, params=params, locate=False)
    except SrcoreError as exc:
        raise SrcoreFormatError(f"{path}: the graph does not parse: {exc}")
    except Exception as exc:  # a parser bug must still surface as a format problem of this file
        raise SrcoreFormatError(f"{path}: the graph does not parse: {type(exc).__name__}: {exc}")


def _has_quantized(graph) -> bool:
    from ..ir.quant import is_quantized
    from ..ir.types import TensorType

    def quantized(v) -> bool:
        return isinstance(v.type, TensorType) and is_quantized(v.type.dtype)

    return any(quantized(v) for v in graph.inputs) or any(
        quantized(o) for n in graph.all_nodes() for o in n.outputs)


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``__metadata__`` of a ``.srm`` file (for ``srcore inspect``), structure checked."""
    return dict(Container(path).metadata)

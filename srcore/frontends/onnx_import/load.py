"""Reading an ONNX model for conversion: the file, its checks, opset, external data.

Every problem with the input is a ``ConversionError`` that names the file (and the
tensor or node where it applies): a truncated or invalid file, an opset newer than
the installed onnx package knows, external data that is missing or escapes the
model's directory. Models older than opset 13 are upgraded with onnx's version
converter; ops srcore has no converter for that ONNX defines by a function are expanded into
it (expand.py); model-local functions are inlined; ONNX shape inference supplies the
dtypes and shapes the converters read.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ...errors import ConversionError
from .dtypes import dtype_of, np_dtype
from .expand import expand_function_ops

#: the oldest opset converted as it is; older models go through onnx's version converter
MIN_OPSET = 13


def import_onnx():
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - onnx is an optional dependency
        raise ConversionError("from_onnx needs the onnx package: pip install 'srcore[onnx]'") from exc
    return onnx


@attrs.define
class LoadedModel:
    """A checked, opset >= 13, shape-inferred ModelProto and where it came from."""

    proto: Any
    source_name: str           # the file's base name ("model.onnx"), or "<ModelProto>"
    where: str                 # how errors name the model: the path as given, or "<ModelProto>"
    base_dir: Path | None      # where external data files are looked up
    opset: int                 # the default domain's opset after any upgrade
    original_opset: int
    large_initializers: dict = attrs.field(factory=dict)   # name -> TensorProto, set aside (see below)

    def read_tensor(self, t) -> np.ndarray:
        """A TensorProto's array (external data memory-mapped, read-only); ``ValueError`` if it cannot."""
        return read_tensor(t, self.base_dir, self.where)


def load_model(src, base_dir=None, constant_inputs=None) -> LoadedModel:
    """``src``: a path, bytes, or an ``onnx.ModelProto``; see the module docstring. ``constant_inputs``:
    graph input name -> array, made initializers (the model no longer takes them)."""
    onnx = import_onnx()
    if isinstance(src, onnx.ModelProto):
        proto, where, name = src, "<ModelProto>", "<ModelProto>"
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)   # the caller's proto stays as it was (upgrades and inlining edit it)
        proto = copy
    elif isinstance(src, (bytes, bytearray, memoryview)):
        proto, where, name = _parse(onnx, bytes(src), "<bytes>"), "<bytes>", "<bytes>"
    elif isinstance(src, (str, os.PathLike)):
        path = Path(os.fspath(src))
        where, name = os.fspath(src), path.name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConversionError(f"{where}: cannot read the ONNX file: {exc.strerror or exc}") from None
        proto = _parse(onnx, data, where)
        if base_dir is None:
            base_dir = path.parent
    else:
        raise ConversionError(f"from_onnx takes a file path, bytes or an onnx.ModelProto, not {type(src).__name__}")
    if not proto.HasField("graph") or not proto.ir_version:
        raise ConversionError(f"{where}: not an ONNX model (no graph or IR version: an empty or truncated file?)")
    original = opset = _default_opset(onnx, proto, where)
    if constant_inputs:
        proto = _bind_inputs(onnx, proto, constant_inputs, where)
    proto, big = _strip_large_initializers(onnx, proto)
    if opset < MIN_OPSET:
        proto = _upgrade(onnx, proto, opset, where)
        opset = _default_opset(onnx, proto, where)
    _check(onnx, proto, where)
    proto = expand_function_ops(onnx, proto, opset, where)
    if len(proto.functions):
        try:
            import onnx.inliner   # a submodule `import onnx` does not load (AttributeError in a fresh process)

            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as exc:  # noqa: BLE001 - any onnx failure is the model's
            raise ConversionError(f"{where}: cannot inline the model's local functions: {exc}") from None
    proto = _infer_shapes(onnx, proto)
    return LoadedModel(proto, name, where, None if base_dir is None else Path(base_dir), opset, original, big)


def _bind_inputs(onnx, proto, values, where: str):
    """``proto`` with the named graph inputs made initializers holding ``values`` (a copy)."""
    from onnx import numpy_helper

    inputs = {vi.name: vi for vi in proto.graph.input}
    inits = {t.name for t in proto.graph.initializer}
    unknown = sorted(n for n in values if n not in inputs or n in inits)
    if unknown:
        raise ConversionError(f"{where}: constant_inputs names {unknown}, which are not graph inputs "
                              f"(the model takes {[n for n in inputs if n not in inits]})")
    out = onnx.ModelProto()
    _copy_fields(proto, out, skip="graph")
    _copy_fields(proto.graph, out.graph, skip="input")
    out.graph.input.extend(vi for vi in proto.graph.input if vi.name not in values)
    for name, value in values.items():
        arr = np.asarray(value)
        elem = inputs[name].type.tensor_type.elem_type
        try:
            want = np_dtype(dtype_of(elem)) if elem else arr.dtype
        except ValueError as exc:
            raise ConversionError(f"{where}: constant input {name!r}: {exc}") from None
        if arr.dtype != want:
            raise ConversionError(f"{where}: constant input {name!r} is {arr.dtype}, the model declares {want}")
        out.graph.initializer.append(numpy_helper.from_array(arr, name))
    return out


#: initializers with more elements than this are set aside while onnx checks and infers the model
#: (both serialize the whole model: seconds for a large one); shape computations use small ones
LARGE_INITIALIZER = 4096


def _strip_large_initializers(onnx, proto):
    """The model with its large (and external-data) main-graph initializers replaced by typed graph
    inputs, and those initializers (their data untouched) by name."""
    big = [t for t in proto.graph.initializer if int(np.prod(t.dims, dtype=np.int64)) > LARGE_INITIALIZER
           or t.data_location == t.EXTERNAL]  # external data is checked where it is read
    if not big:
        return proto, {}
    names = {t.name for t in big}
    light = onnx.ModelProto()
    _copy_fields(proto, light, skip="graph")
    _copy_fields(proto.graph, light.graph, skip="initializer")
    light.graph.initializer.extend(t for t in proto.graph.initializer if t.name not in names)
    listed = {i.name for i in light.graph.input}
    for t in big:
        if t.name not in listed:
            light.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return light, {t.name: t for t in big}


def _copy_fields(src, dst, skip: str) -> None:
    """Copy every set field of a message but one (a field-wise copy: no large blob is touched)."""
    for fd, value in src.ListFields():
        if fd.name == skip:
            continue
        if fd.is_repeated:
            getattr(dst, fd.name).extend(value)
        elif fd.message_type is not None:
            getattr(dst, fd.name).CopyFrom(value)
        else:
            setattr(dst, fd.name, value)


def _parse(onnx, data: bytes, where: str):
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and kin
        raise ConversionError(f"{where}: not a valid ONNX file (protobuf: {exc}); is it truncated or not "
                              f"an ONNX model?") from None
    return proto


def _default_opset(onnx, proto, where: str) -> int:
    versions = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise ConversionError(f"{where}: the model imports no opset of the default ONNX domain")
    v = max(versions)
    newest = onnx.defs.onnx_opset_version()
    if v > newest:
        raise ConversionError(f"{where}: opset {v} is newer than the newest the installed onnx "
                              f"{onnx.__version__} knows ({newest}); upgrade onnx or export with opset <= {newest}")
    if v < 1:
        raise ConversionError(f"{where}: opset {v} is not a valid ONNX opset")
    return v


def _upgrade(onnx, proto, opset: int, where: str):
    scan = next((n for n in proto.graph.node if n.op_type == "Scan" and n.domain in ("", "ai.onnx")), None)
    if opset < 9 and scan is not None:   # the converter drops its batch axis: the inputs no longer fit
        raise ConversionError(f"{where}: Scan node {scan.name or '(unnamed)'!r}: Scan before opset 9 (with a batch "
                              "axis) is not supported; export at opset 9 or newer")
    try:
        up = onnx.version_converter.convert_version(proto, MIN_OPSET)
        # the converter keeps an IR version < 4, whose rules (every initializer also a graph input) the
        # initializers it adds (Pad's pads, ...) break; opset 13 goes with IR version 7
        up.ir_version = max(up.ir_version, 7)
    except Exception as exc:  # noqa: BLE001 - the converter raises RuntimeError/ConvertError
        raise ConversionError(f"{where}: opset {opset} is older than {MIN_OPSET} and onnx's version converter "
                              f"cannot upgrade it: {exc}") from None
    _keep_upsample_coordinates(onnx, proto, up)
    _coerce_hardmax(onnx, up.graph, [0])
    return up


def _coerce_hardmax(onnx, graph, counter: list) -> None:
    """Hardmax before opset 13 works on the input flattened to 2-D at ``axis`` (default 1): one 1 per
    row of ``prod(shape[axis:])`` elements. onnx's version converter (as of 1.23) keeps the node as it
    is, which at opset 13 means along ``axis`` alone (it coerces Softmax and LogSoftmax, not Hardmax):
    a wrong answer, so the old meaning is spelt out here (Shape, Flatten, Hardmax(-1), Reshape), in
    subgraphs too."""
    helper = onnx.helper
    nodes = []
    for n in graph.node:
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _coerce_hardmax(onnx, g, counter)
        if n.op_type != "Hardmax" or n.domain not in ("", "ai.onnx"):
            nodes.append(n)
            continue
        axis = next((helper.get_attribute_value(a) for a in n.attribute if a.name == "axis"), 1)
        counter[0] += 1
        tag = f"_srcore_hardmax{counter[0]}_"
        x, y = n.input[0], n.output[0]
        nodes += [helper.make_node("Shape", [x], [tag + "shape"], name=tag + "shape"),
                  helper.make_node("Flatten", [x], [tag + "flat"], axis=axis, name=tag + "flatten"),
                  helper.make_node("Hardmax", [tag + "flat"], [tag + "max"], axis=-1, name=n.name or tag + "hardmax"),
                  helper.make_node("Reshape", [tag + "max", tag + "shape"], [y], name=tag + "reshape")]
    del graph.node[:]
    graph.node.extend(nodes)


def _keep_upsample_coordinates(onnx, old, up) -> None:
    """The Resize onnx's converter makes of an Upsample (or a linear Resize-10) gets Resize-11's default
    ``half_pixel`` coordinates; Upsample's are ``asymmetric`` (``x_in = x_out / scale``, nearest
    flooring), as onnxruntime computes it: set them (top-level graph)."""
    if old.opset_import and min(o.version for o in old.opset_import if o.domain in ("", "ai.onnx")) >= 11:
        return
    origin = {o: (n.op_type, next((onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "mode"),
                                  b"nearest")) for n in old.graph.node if n.op_type in ("Upsample", "Resize")
              for o in n.output}
    for n in up.graph.node:
        kind, mode = origin.get(n.output[0] if n.output else "", (None, None))
        if n.op_type != "Resize" or kind is None or any(a.name == "coordinate_transformation_mode"
                                                         for a in n.attribute):
            continue
        if kind == "Resize" and mode == b"nearest":
            continue   # Resize-10's nearest rounds differently when downsampling: left as converted
        n.attribute.append(onnx.helper.make_attribute("coordinate_transformation_mode", "asymmetric"))
        if mode == b"nearest":
            n.attribute.append(onnx.helper.make_attribute("nearest_mode", "floor"))


def _ort_default_domain_moved(onnx, proto):
    """``proto``, or a copy of it whose onnxruntime-only default-domain nodes (SimplifiedLayerNormalization,
    which onnx does not define) are put in the com.microsoft domain, so that onnx's checker checks the rest."""
    from .ops import ORT_DEFAULT_DOMAIN

    if not any(n.domain in ("", "ai.onnx") and n.op_type in ORT_DEFAULT_DOMAIN for n in proto.graph.node):
        return proto
    moved = onnx.ModelProto()
    moved.CopyFrom(proto)
    for n in moved.graph.node:
        if n.domain in ("", "ai.onnx") and n.op_type in ORT_DEFAULT_DOMAIN:
            n.domain = "com.microsoft"
    if not any(o.domain == "com.microsoft" for o in moved.opset_import):
        moved.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    return moved


def _check(onnx, proto, where: str) -> None:
    try:
        onnx.checker.check_model(_ort_default_domain_moved(onnx, proto))
    except Exception as exc:  # noqa: BLE001 - ValidationError, and C++ errors for broken protos
        msg = str(exc).strip().splitlines()
        raise ConversionError(f"{where}: invalid ONNX model: {' '.join(m.strip() for m in msg[:6])}") from None


def _infer_shapes(onnx, proto):
    try:
        return onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is a help: converters then see unknown shapes
        return proto


def read_tensor(t, base_dir: Path | None, where: str) -> np.ndarray:
    """A TensorProto as an array; external data is memory-mapped read-only."""
    from onnx import numpy_helper

    dtype = np_dtype(dtype_of(t.data_type))
    shape = tuple(int(d) for d in t.dims)
    if t.data_location == t.EXTERNAL:
        return _external(t, dtype, shape, base_dir, where)
    try:
        arr = numpy_helper.to_array(t)
    except Exception as exc:  # noqa: BLE001 - wrong byte counts and the like
        raise ValueError(f"its data does not fit its type and shape {list(shape)}: {exc}") from None
    if arr.dtype == dtype and arr.flags.c_contiguous and arr.shape == shape:
        return arr  # raw data: a read-only view of the proto's bytes, no copy
    return np.array(arr, dtype=dtype, order="C")  # not ascontiguousarray: it makes a 0-d array 1-d


def _external(t, dtype: np.dtype, shape, base_dir: Path | None, where: str) -> np.ndarray:
    info = {e.key: e.value for e in t.external_data}
    location = info.get("location", "")
    if base_dir is None:
        raise ValueError(f"its data is in the external file {location!r}, and no base_dir says where "
                         f"(pass base_dir= with an in-memory model)")
    rel = Path(location)
    if not location or rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"external data location {location!r} must be a relative path inside the model's "
                         f"directory")
    path = (base_dir / rel)
    try:
        resolved = path.resolve(strict=True)
    except OSError:
        raise ValueError(f"its external data file {str(path)!r} is missing") from None
    if base_dir.resolve() not in resolved.parents:
        raise ValueError(f"external data location {location!r} leaves the model's directory")
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else None
    except ValueError:
        raise ValueError(f"bad external data offset/length {info}") from None
    need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = resolved.stat().st_size
    if length is not None and length != need:
        raise ValueError(f"external data length {length} does not match its type and shape ({need} bytes)")
    if offset < 0 or offset + need > size:
        raise ValueError(f"external data file {str(path)!r} holds {size} bytes, the tensor needs {need} "
                         f"from offset {offset} (truncated?)")
    if need == 0:
        return np.zeros(shape, dtype)
    return np.memmap(resolved, dtype=dtype.newbyteorder("<"), mode="r", offset=offset, shape=shape)

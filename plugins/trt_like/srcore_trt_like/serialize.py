"""Serialized plans: a :class:`~.builder.plan.Plan` as JSON-able metadata and named arrays (no pickle).

A plan is stored as what it was built from and what was chosen: the network after fusion
(tensors, layers with their constant attributes, constants), the tactic chosen for each layer and
the weights it laid out (packed, Winograd-transformed; only float32 weights of shapes the tactic
checks, and MKL's packed bytes of the size MKL asks for: never index tables), the input signature,
the plan-shaping engine options, and a compatibility record (:func:`compat`): srcore, trt_like,
numba, numpy, BLAS and MKL versions, the CPU, its LLVM features, the kernel set and the intra-op
thread settings. Loading one (:func:`load_plan`) converts, fuses and times nothing and lays out no
stored weight; a record that differs from this process's raises :class:`StalePlan` (the engine
rebuilds that plan and says why), arrays that do not match the plan's SHA-256 raise
:class:`srcore.SrcoreFormatError` (a stored plan is never run unchecked).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any

import numpy as np

from srcore.plugin import QuantizationError, SrcoreFormatError

from .builder.fusion import FusedOp
from .builder.network import PLAIN_DTYPES, Layer, Network, Tensor
from .builder.plan import Plan
from .tactics.choose import MEMORY_TOLERANCE

#: bump when the stored form changes meaning (2: MKL's packed weights are no longer stored; format 1
#: stored them, but they are valid only at the address MKL packed them at, and read back they computed
#: wrong values or crashed: such plans are rebuilt)
FORMAT = 2

#: the engine options a plan depends on (a stored plan built with others is rebuilt)
PLAN_OPTIONS = ("fusion", "timing", "mkl", "exclude_tactics", "memory_tolerance", "thread_plan")


class StalePlan(Exception):
    """A stored plan this process must not run as is (built elsewhere, or with other options)."""


def compat() -> dict[str, Any]:
    """What a plan's compiled code, layouts and tactic choices depend on, in this process."""
    import numba

    from srcore import __version__ as srcore_version

    from . import kernels
    from .kernels import mkl, threads
    from .tactics import timing_cache

    return {"format": FORMAT, "srcore": srcore_version, "trt_like": _dist_version("srcore-trt-like"),
            "numba": numba.__version__, "numpy": np.__version__, "blas": timing_cache.blas_name(),
            "cpu": timing_cache.cpu_name(), "cpu_count": os.cpu_count(), "cpu_features": _cpu_features(),
            "kernels": kernels.kernel_set(), "threads": threads.count(),
            "mkl": mkl.version() if mkl.library() is not None else None, "mkl_threads": mkl.intra_op_threads()}


def plan_options(options: dict[str, Any]) -> dict[str, Any]:
    """The plan-shaping engine options, as stored (defaults filled in)."""
    return {"fusion": bool(options.get("fusion", True)), "timing": bool(options.get("timing", True)),
            "mkl": bool(options.get("mkl", True)), "exclude_tactics": sorted(options.get("exclude_tactics", ())),
            "memory_tolerance": float(options.get("memory_tolerance", MEMORY_TOLERANCE)),
            "thread_plan": bool(options.get("thread_plan", True))}


def stale_reason(meta: dict[str, Any], options: dict[str, Any], here: dict[str, Any] | None = None) -> str | None:
    """Why the stored plan ``meta`` must be rebuilt in this process (None: it may run)."""
    here = compat() if here is None else here
    then = meta.get("compat")
    if not isinstance(then, dict):
        return "it has no compatibility record"
    diffs = [f"{k} {then.get(k)!r} (here {here[k]!r})" for k in here if then.get(k) != here[k]]
    if diffs:
        return "it was built for another machine, kernel set or version: " + "; ".join(diffs)
    if meta.get("options") != plan_options(options):
        return f"it was built with other engine options ({meta.get('options')} here {plan_options(options)})"
    return None


# -- plan -> (meta, arrays) ---------------------------------------------------------------------------
def segment_constants(graph) -> dict[str, np.ndarray]:
    """The array constants of a segment graph by value name (what a plan's weights refer to)."""
    return {n.outputs[0].name: n.attrs["value"] for n in graph.all_nodes()
            if n.kind == "prim::Constant" and isinstance(n.attrs.get("value"), np.ndarray) and n.outputs[0].name}


def dump_plan(plan: Plan, shapes, options: dict[str, Any], here: dict[str, Any] | None = None,
              constants: dict[str, np.ndarray] | None = None):
    """``(meta, arrays)`` of ``plan`` (built for input ``shapes`` with ``options``). A layer attribute
    that is one of the segment's ``constants`` (a weight as the model holds it) is stored as a
    reference to it: the segment key covers those bytes, and the model file holds them once."""
    net = plan.net
    arrays: dict[str, np.ndarray] = {}
    enc = _Encoder(arrays, constants or {})
    layers = []
    for i, step in enumerate(plan.steps):
        layer = step.layer
        entry = {"kind": layer.kind, "inputs": list(layer.inputs), "outputs": list(layer.outputs),
                 "attrs": enc.value(layer.attrs, f"l{i}"), "source": layer.source, "tactic": step.tactic,
                 "precision": step.precision}
        if step.layout:
            entry["layout"] = {k: enc.array(np.asarray(v), f"l{i}.layout.{k}") for k, v in sorted(step.layout.items())}
        layers.append(entry)
    meta = {"format": FORMAT, "signature": [list(map(int, s)) for s in shapes],
            "tensors": [_tensor_entry(t) for t in net.tensors.values()],
            "inputs": list(net.inputs), "outputs": list(net.outputs),
            "constants": {str(t): enc.array(a, f"c{t}") for t, a in net.constants.items()},
            "layers": layers, "options": plan_options(options), "compat": compat() if here is None else here}
    meta["sha256"] = arrays_digest(arrays)
    return meta, arrays


def arrays_digest(arrays: dict[str, np.ndarray], after=None) -> str:
    """SHA-256 of named arrays (names, dtypes, shapes and bytes, in name order); ``after(array)`` is
    called on each once hashed (a file's arrays: drop its pages from the resident set)."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        digest.update(a.reshape(-1).view(np.uint8))
        if after is not None:
            after(arrays[name])
    return digest.hexdigest()


class _Encoder:
    """Layer attributes as JSON: arrays by name (into ``arrays``), tuples, slices, fused ops and
    non-finite floats marked."""

    def __init__(self, arrays: dict[str, np.ndarray], constants: dict[str, np.ndarray]):
        self.arrays = arrays
        self.by_memory = {_memory(a): name for name, a in constants.items()}

    def array(self, a: np.ndarray, name: str) -> str:
        self.arrays[name] = np.ascontiguousarray(a)
        return name

    def value(self, v: Any, path: str) -> Any:
        if isinstance(v, np.ndarray):
            ref = self._constant(v)
            return {"$segment": ref} if ref is not None else {"$array": self.array(v, path)}
        if isinstance(v, (bool, int, str)) or v is None:
            return v
        if isinstance(v, (float, np.floating)):
            v = float(v)
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, FusedOp):
            return {"$fused": [v.op, self.value(v.args, path), self.value(v.params, path)]}
        if isinstance(v, slice):
            return {"$slice": [v.start, v.stop, v.step]}
        if isinstance(v, tuple):
            return {"$tuple": [self.value(x, f"{path}.{i}") for i, x in enumerate(v)]}
        if isinstance(v, list):
            return [self.value(x, f"{path}.{i}") for i, x in enumerate(v)]
        if isinstance(v, dict):
            return {"$dict": [[k, self.value(x, f"{path}.{k}")] for k, x in v.items()]}
        raise TypeError(f"cannot serialize a layer attribute of type {type(v).__name__} ({path})")

    def _constant(self, v: np.ndarray) -> str | None:
        """The segment constant whose memory ``v`` is exactly (same address, dtype, shape, strides)."""
        return self.by_memory.get(_memory(v))


def _memory(a: np.ndarray) -> tuple:
    return a.__array_interface__["data"][0], a.dtype.str, a.shape, a.strides


# -- (meta, arrays) -> network and choices --------------------------------------------------------------
def load_network(meta: dict[str, Any], arrays: dict[str, np.ndarray], what: str,
                 constants: dict[str, np.ndarray] | None = None, release=None):
    """``(network, [(tactic, layout) per layer that is not a view], input shapes)`` of a stored plan
    (``constants``: the segment's, which layer attributes may refer to);
    :class:`srcore.SrcoreFormatError` naming ``what`` for anything malformed or modified."""
    try:
        if meta.get("format") != FORMAT:
            raise ValueError(f"plan format {meta.get('format')!r} (this trt_like reads {FORMAT})")
        if arrays_digest(arrays, release) != meta.get("sha256"):
            raise ValueError("its arrays do not match their checksum (modified or corrupted)")
        dec = _Decoder(arrays, constants or {})
        net = Network()
        for entry in meta["tensors"]:
            tensor = _tensor(entry)
            net.tensors[tensor.id] = tensor
        known = net.tensors.keys()
        net.inputs = [_tensor_id(t, known) for t in meta["inputs"]]
        net.outputs = [_tensor_id(t, known) for t in meta["outputs"]]
        for tid, name in meta["constants"].items():
            a = dec.array(name)
            tensor = net.tensors[_tensor_id(tid, known)]   # (an index a layer reads: int64)
            if a.dtype != tensor.storage or a.shape != tensor.shape:
                raise ValueError(f"constant {tid}: {a.dtype} {a.shape} does not match its tensor")
            net.constants[int(tid)] = np.array(a, copy=True)
        choices = []
        for entry in meta["layers"]:
            layer = Layer(str(entry["kind"]), [_tensor_id(t, known) for t in entry["inputs"]],
                          [_tensor_id(t, known) for t in entry["outputs"]], dec.value(entry["attrs"]),
                          str(entry.get("source") or ""))
            if not isinstance(layer.attrs, dict):
                raise ValueError(f"layer {layer.kind}: attributes are not a mapping")
            net.layers.append(layer)
            if layer.kind != "reshape":
                layout = {str(k): dec.array(v) for k, v in (entry.get("layout") or {}).items()}
                choices.append((str(entry["tactic"]), layout))
        shapes = tuple(tuple(int(d) for d in s) for s in meta["signature"])
    except SrcoreFormatError:
        raise
    except (KeyError, TypeError, ValueError, QuantizationError) as exc:
        raise SrcoreFormatError(f"{what}: the stored plan is malformed: {type(exc).__name__}: {exc}") from None
    return net, choices, shapes


def _tensor_entry(t: Tensor) -> list:
    """``[id, shape, name]``; a quantized tensor adds ``[dtype, scale, zero_point]``."""
    entry = [t.id, list(t.shape), t.name]
    if t.dtype in PLAIN_DTYPES:
        entry.append([t.dtype])
    elif t.dtype != "float32":
        entry.append([t.dtype, float(t.qparams.scale), int(t.qparams.zero_point)])
    return entry


def _tensor(entry) -> Tensor:
    if len(entry) == 3:
        tid, shape, name = entry
        return Tensor(int(tid), tuple(int(d) for d in shape), str(name))
    if len(entry) == 4 and len(entry[3]) == 1:   # an index or mask tensor
        tid, shape, name, (dtype,) = entry
        if dtype not in PLAIN_DTYPES:
            raise ValueError(f"tensor {tid}: unknown dtype {dtype!r}")
        return Tensor(int(tid), tuple(int(d) for d in shape), str(name), str(dtype))
    tid, shape, name, (dtype, scale, zero_point) = entry
    if dtype not in ("quint8", "qint8"):
        raise ValueError(f"tensor {tid}: unknown dtype {dtype!r}")
    from srcore.plugin import QParams

    return Tensor(int(tid), tuple(int(d) for d in shape), str(name), str(dtype),
                  QParams(float(scale), int(zero_point)))


def _tensor_id(t, known) -> int:
    tid = int(t)
    if tid not in known:
        raise ValueError(f"tensor {tid} is not among the plan's tensors")
    return tid


class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray], constants: dict[str, np.ndarray]):
        self.arrays = arrays
        self.constants = constants

    def array(self, name) -> np.ndarray:
        a = self.arrays.get(name)
        if not isinstance(a, np.ndarray):
            raise ValueError(f"array {name!r} is missing")
        return a

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            if isinstance(v, (bool, int, float, str)) or v is None:
                return v
            raise ValueError(f"unexpected {type(v).__name__} in a layer's attributes")
        if len(v) != 1:
            raise ValueError(f"unexpected object {sorted(v)} in a layer's attributes")
        (tag, x), = v.items()
        if tag == "$array":
            return np.array(self.array(x), copy=True)   # own, writeable (the file's are read-only maps)
        if tag == "$segment":
            if x not in self.constants:
                raise ValueError(f"the segment has no constant {x!r}")
            return self.constants[x]
        if tag == "$float":
            if x not in ("nan", "inf", "-inf"):
                raise ValueError(f"bad float {x!r}")
            return float(x)
        if tag == "$tuple":
            return tuple(self.value(e) for e in x)
        if tag == "$slice":
            start, stop, step = x
            return slice(*(None if e is None else int(e) for e in (start, stop, step)))
        if tag == "$fused":
            op, args, params = x
            return FusedOp(str(op), self.value(args), self.value(params))
        if tag == "$dict":
            return {str(k): self.value(e) for k, e in x}
        raise ValueError(f"unknown tag {tag!r} in a layer's attributes")


def _dist_version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:   # not installed as a distribution (a source checkout on sys.path)
        return None


def _cpu_features() -> str:
    """A short hash of the CPU features LLVM compiles for (numba's kernels are built for the host)."""
    try:
        from llvmlite import binding

        features = binding.get_host_cpu_features().flatten()
        return f"{binding.get_host_cpu_name()}-{hashlib.sha256(features.encode()).hexdigest()[:12]}"
    except Exception:   # an llvmlite without the query: the CPU model name stands in
        return ""


def dumps(meta: dict[str, Any]) -> str:
    """Canonical JSON of a plan's metadata (for files: the engine cache)."""
    return json.dumps(meta, sort_keys=True, separators=(",", ":"))

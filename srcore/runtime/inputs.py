"""Binding, checking and keying the inputs of a run.

Inputs are bound positionally then by name (the input specs' names). The
*signature* of a run is the shapes and dtypes of its tensor inputs (and the
values of its scalar inputs): memory plans and input checks are done once
per signature, so a run with a signature seen before pays only for the key.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

from .._lazyre import LazyPattern
from ..errors import SrcoreInputError
from ..ir.types import BOOL, FLOAT, INT, BoolType, FloatType, IntType, ListType, NoneType, TensorType, Type, lazy_type


def bind(names: Sequence[str], args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """Positional and keyword inputs in input order; wrong counts or names raise SrcoreInputError."""
    n = len(names)
    if len(args) > n:
        raise SrcoreInputError(f"the model takes {n} input(s) ({', '.join(names)}) but {len(args)} were given")
    values = list(args) + [_MISSING] * (n - len(args))
    for k, v in kwargs.items():
        i = _index(names, k)
        if i is None:
            raise SrcoreInputError(f"unknown input {k!r}; the model's inputs are: {', '.join(names)}") from None
        if values[i] is not _MISSING:
            raise SrcoreInputError(f"input {k!r} given twice (positionally and by name)")
        values[i] = v
    missing = [names[i] for i, v in enumerate(values) if v is _MISSING]
    if missing:
        raise SrcoreInputError(f"missing input(s): {', '.join(missing)} (the model takes {', '.join(names)})")
    return values


_MISSING = object()

#: what the frontends' ``clean_name`` replaces in a value name (torch.onnx names inputs ``onnx::Add_0``)
_NAME_BAD = LazyPattern(r"[^A-Za-z0-9_.]")   # only for a name not found as given


def _index(names: Sequence[str], k: str) -> int | None:
    """Where input ``k`` is: by its name, or by the name as the file spells it (an ONNX input
    ``onnx::Add_0`` is ``onnx__Add_0`` in srcore; onnxruntime's feed dicts use the former)."""
    if k in names:
        return names.index(k)
    alt = _NAME_BAD.sub("_", k) if isinstance(k, str) else k
    return names.index(alt) if alt != k and alt in names else None

#: the model metadata key of a torch.export model's input structure (see frontends/torch_export._input_tree)
INPUT_TREE = "input_tree"


def flatten_structured(tree: dict, names: Sequence[str], args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """A call of a torch.export model as torch takes it (lists, tuples and dicts of tensors, keyword
    arguments) -> its inputs in order, as export flattened them; a call with the flattened inputs
    (positional or by their names, ``xs_0``) is bound as it is."""
    structured = (any(type(v) in (list, tuple, dict) for v in args)
                  or any(type(v) in (list, tuple, dict) for v in kwargs.values()))
    if not structured and all(k in names for k in kwargs) and len(args) + len(kwargs) == len(names):
        return bind(names, args, kwargs)
    specs, (keys, kw_specs) = tree["args"], tree["kwargs"]
    if len(args) > len(specs):
        raise SrcoreInputError(f"the model takes {len(specs)} positional argument(s) (as exported), "
                               f"{len(args)} were given")
    unknown = sorted(set(kwargs) - set(keys))
    if unknown:
        raise SrcoreInputError(f"unknown keyword argument(s) {', '.join(unknown)}; the exported program "
                               f"takes {', '.join(keys) or 'none'}")
    leaves: list[Any] = []
    for i, (v, spec) in enumerate(zip(args, specs)):
        _flatten(v, spec, f"argument {i}", leaves)
    if len(args) < len(specs):
        raise SrcoreInputError(f"missing positional argument(s) {len(args)}..{len(specs) - 1} "
                               f"(the model takes {len(specs)})")
    for k, spec in zip(keys, kw_specs):
        if k not in kwargs:
            raise SrcoreInputError(f"missing keyword argument {k!r} (the exported program takes {', '.join(keys)})")
        _flatten(kwargs[k], spec, f"keyword argument {k!r}", leaves)
    return leaves


def _flatten(v: Any, spec, where: str, out: list) -> None:
    if spec == 0:
        out.append(v)
        return
    if spec[0] == "list":
        if not isinstance(v, (list, tuple)) or len(v) != len(spec[1]):
            raise SrcoreInputError(f"{where}: a list or tuple of {len(spec[1])} expected (as exported), "
                                   f"got {_what(v)}")
        for j, (x, s) in enumerate(zip(v, spec[1])):
            _flatten(x, s, f"{where}[{j}]", out)
        return
    keys = spec[1]
    if not isinstance(v, dict) or sorted(v) != sorted(keys):
        raise SrcoreInputError(f"{where}: a dict with keys {keys} expected (as exported), got {_what(v)}")
    for k, s in zip(keys, spec[2]):
        _flatten(v[k], s, f"{where}[{k!r}]", out)


def _what(v: Any) -> str:
    if isinstance(v, dict):
        return f"a dict with keys {sorted(v)}"
    if isinstance(v, (list, tuple)):
        return f"a {type(v).__name__} of {len(v)}"
    return type(v).__name__


def is_scalar_spec(s: Any) -> bool:
    """``isinstance(s, ScalarSpec)``, without building the class (none exists before its module is imported:
    models whose inputs are all tensors never import it)."""
    mod = sys.modules.get(_SCALAR_SPEC)
    return mod is not None and isinstance(s, mod.ScalarSpec)


_SCALAR_SPEC = __name__.rpartition(".")[0] + ".scalar_spec"


def __getattr__(name: str):   # ``inputs.ScalarSpec`` as before (PEP 562), from its own module
    if name == "ScalarSpec":
        from .scalar_spec import ScalarSpec

        return ScalarSpec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def as_arrays(values: list[Any], specs) -> list[Any]:
    """Tensor inputs that are not numpy arrays (lists, torch tensors) become arrays; a torch
    quantized tensor becomes a :class:`srcore.QuantizedArray`."""
    for i, (v, s) in enumerate(zip(values, specs)):
        if not isinstance(v, np.ndarray) and not is_scalar_spec(s):
            if getattr(v, "is_quantized", False) is True:
                values[i] = _from_torch_quantized(v, s.name)
                continue
            try:
                values[i] = np.asarray(v)
            except Exception as exc:
                raise SrcoreInputError(f"input {s.name!r}: expected an array, got "
                                       f"{type(v).__name__} ({exc})") from None
    return values


def _from_torch_quantized(t, name: str):
    """A torch quantized tensor as a QuantizedArray (its integers and parameters; no copy of the data)."""
    from ..ir.quant import QParams
    from ..qarray import QuantizedArray

    qdtype = {"torch.quint8": "quint8", "torch.qint8": "qint8", "torch.qint32": "qint32"}.get(str(t.dtype))
    scheme = str(t.qscheme())
    if qdtype is None or scheme not in ("torch.per_tensor_affine", "torch.per_channel_affine"):
        raise SrcoreInputError(f"input {name!r}: a torch {t.dtype} tensor quantized {scheme} has no srcore "
                               f"equivalent (quint8, qint8, qint32; per-tensor or per-channel affine)")
    if scheme == "torch.per_tensor_affine":
        qp = QParams(t.q_scale(), t.q_zero_point())
    else:
        qp = QParams(tuple(t.q_per_channel_scales().tolist()), tuple(t.q_per_channel_zero_points().tolist()),
                     int(t.q_per_channel_axis()))
    return QuantizedArray(t.int_repr().numpy(), qdtype, qp)


def has_foreign_byte_order(values: Sequence[Any], tensor_flags: Sequence[bool]) -> bool:
    """Whether a tensor input is stored in the other byte order (e.g. ``>f4`` read from a file)."""
    return any(t and isinstance(v, np.ndarray) and not v.dtype.isnative for v, t in zip(values, tensor_flags))


def to_native_byte_order(values: Sequence[Any], tensor_flags: Sequence[bool]) -> tuple[Any, ...]:
    """The inputs with byte-swapped arrays copied into native order: the same numbers, in the
    layout kernels and compiled engines read (numpy ufuncs would cope; numba and BLAS not)."""
    return tuple(v.astype(v.dtype.newbyteorder("=")) if t and isinstance(v, np.ndarray) and not v.dtype.isnative
                 else v for v, t in zip(values, tensor_flags))


def input_types(values: Sequence[Any], specs) -> list[Type]:
    """The concrete IR type of each input of a run (drives shape propagation)."""
    out: list[Type] = []
    for v, s in zip(values, specs):
        if isinstance(v, np.ndarray):
            out.append(TensorType(getattr(v, "qdtype", None) or str(v.dtype), tuple(v.shape)))
        elif isinstance(v, bool):
            out.append(BOOL)
        elif isinstance(v, int):
            out.append(INT)
        elif isinstance(v, float):
            out.append(FLOAT)
        else:
            out.append(s.type if is_scalar_spec(s) else TensorType())
    return out


def check(values: Sequence[Any], specs) -> None:
    """Raise SrcoreInputError naming the first input that contradicts its spec."""
    symbols: dict[str, tuple[int, str]] = {}
    for v, s in zip(values, specs):
        if is_scalar_spec(s):
            _check_scalar(s.name, v, s.type)
            continue
        if not isinstance(v, np.ndarray):
            raise SrcoreInputError(f"input {s.name!r}: expected a tensor (numpy array), got {type(v).__name__}")
        _check_dtype(s, v)
        if s.shape is None:
            continue
        if v.ndim != len(s.shape):
            raise SrcoreInputError(f"input {s.name!r}: expected rank {len(s.shape)} "
                                   f"(shape {_fmt(s.shape)}), got rank {v.ndim} (shape {tuple(v.shape)})")
        for axis, (want, got) in enumerate(zip(s.shape, v.shape)):
            if isinstance(want, int) and want != got:
                raise SrcoreInputError(f"input {s.name!r}: dimension {axis} must be {want} (shape "
                                       f"{_fmt(s.shape)}), got {got} (shape {tuple(v.shape)})")
            if isinstance(want, str):
                seen = symbols.get(want)
                if seen is None:
                    symbols[want] = (got, s.name)
                elif seen[0] != got:
                    raise SrcoreInputError(
                        f"input {s.name!r}: dimension {axis} is the symbolic dim {want!r}, which is "
                        f"{seen[0]} in input {seen[1]!r}, but here it is {got}")


def _check_dtype(s, v: np.ndarray) -> None:
    """The input's dtype is the spec's; a quantized spec takes a QuantizedArray of that dtype, and a
    plain spec never a QuantizedArray (its stored integers are not the values it stands for)."""
    from ..ir.quant import is_quantized

    qdtype = getattr(v, "qdtype", None)
    if s.dtype is None:
        return
    if is_quantized(s.dtype):
        if qdtype is None:
            raise SrcoreInputError(f"input {s.name!r}: expected a quantized tensor ({s.dtype}), got a plain {v.dtype} "
                                   f"array; pass a srcore.QuantizedArray (or a torch quantized tensor)")
        if qdtype != s.dtype:
            raise SrcoreInputError(f"input {s.name!r}: expected dtype {s.dtype}, got a quantized tensor of {qdtype}")
        return
    if qdtype is not None:
        raise SrcoreInputError(f"input {s.name!r}: expected dtype {s.dtype}, got a quantized tensor ({qdtype}); "
                               f"dequantize it first (QuantizedArray.dequantize())")
    if str(v.dtype) != s.dtype:
        raise SrcoreInputError(f"input {s.name!r}: expected dtype {s.dtype}, got {v.dtype}")


def _check_scalar(name: str, v: Any, t: Type) -> None:
    if isinstance(t, lazy_type("OptionalType")):
        if v is None:
            return
        t = t.elem
    ok = {IntType: lambda x: isinstance(x, (int, np.integer)) and not isinstance(x, bool),
          FloatType: lambda x: isinstance(x, (float, int, np.floating)) and not isinstance(x, bool),
          BoolType: lambda x: isinstance(x, (bool, np.bool_)),
          NoneType: lambda x: x is None,
          ListType: lambda x: isinstance(x, (list, tuple))}.get(type(t))
    if ok is not None and not ok(v):
        raise SrcoreInputError(f"input {name!r}: expected {t}, got {type(v).__name__} {v!r}")


def _fmt(shape) -> str:
    return "(" + ", ".join("*" if d is None else str(d) for d in shape) + ")"

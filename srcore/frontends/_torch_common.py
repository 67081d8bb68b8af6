"""Helpers shared by the PyTorch frontends: the lazy torch import, dtype and constant conversion.

Only the frontends import this module, and it imports torch only when called,
so running a converted model never needs torch.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ConversionError
from ..ir.graph import SourceLocation
from ..ir.types import (ANY, BOOL, DEVICE, FLOAT, INT, NONE, NUMBER, STR, DictType, ListType, UnionType,
                        OptionalType, TensorType, TupleType, Type, TORCH_TO_DTYPE)
from ..model import InputSpec

#: torch.memory_format / torch.layout -> the int codes TorchScript graphs use
MEMORY_FORMAT_CODES = {"contiguous_format": 0, "preserve_format": 1, "channels_last": 2, "channels_last_3d": 3}
LAYOUT_CODES = {"strided": 0, "sparse_coo": 1, "_mkldnn": 2}


def import_torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is an optional dependency
        raise ConversionError("this frontend needs PyTorch: pip install 'srcore[torch]'") from exc
    return torch


def np_dtype_name(torch_dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (srcore's dtype names are numpy's)."""
    name = str(torch_dtype).removeprefix("torch.")
    return {"bool": "bool", "half": "float16", "float": "float32", "double": "float64",
            "long": "int64", "int": "int32", "short": "int16"}.get(name, name)


def scalar_type_code(torch_dtype) -> int:
    """``torch.float32`` -> 6 (the ScalarType int that TorchScript graphs carry)."""
    from ..ir.types import DTYPE_TO_SCALAR_TYPE_CODE

    name = np_dtype_name(torch_dtype)
    if name not in DTYPE_TO_SCALAR_TYPE_CODE:
        raise ValueError(f"dtype {torch_dtype} has no ScalarType code in srcore")
    return DTYPE_TO_SCALAR_TYPE_CODE[name]


def tensor_to_numpy(t) -> np.ndarray:
    """A contiguous numpy copy of a (detached, CPU) tensor, bit-exact."""
    t = t.detach()
    if t.is_mkldnn:  # optimize_for_inference's weights: the same values in oneDNN's layout
        t = t.to_dense()
    if t.is_quantized:
        return quantized_array(t)
    if t.layout.__repr__() != "torch.strided":
        raise ValueError(f"cannot store a {t.layout} tensor as a parameter")
    if t.dtype.is_complex and t.element_size() == 4:
        raise ValueError(f"parameter dtype {t.dtype} is not supported (numpy has no complex32)")
    if str(t.dtype) == "torch.bfloat16":  # numpy has no bfloat16: ml_dtypes' (a dependency of srcore-cpu)
        try:
            import ml_dtypes
        except ImportError:
            raise ValueError("a bfloat16 parameter needs the ml_dtypes package (pip install ml_dtypes)") from None
        import torch
        bits = t.cpu().contiguous().view(torch.int16).numpy()
        return np.array(bits, copy=True, order="C").view(ml_dtypes.bfloat16)
    # np.array, not np.ascontiguousarray: the latter turns a 0-d tensor into shape (1,)
    return np.array(t.cpu().resolve_conj().resolve_neg().numpy(), copy=True, order="C")


def quantized_array(t):
    """A torch quantized tensor as a :class:`srcore.QuantizedArray` (its integers and parameters)."""
    from ..ir.quant import QParams
    from ..qarray import QuantizedArray

    qdtype = {"torch.quint8": "quint8", "torch.qint8": "qint8", "torch.qint32": "qint32"}.get(str(t.dtype))
    scheme = str(t.qscheme())
    if qdtype is None or scheme not in ("torch.per_tensor_affine", "torch.per_channel_affine"):
        raise ValueError(f"a {t.dtype} tensor quantized {scheme} has no srcore equivalent (quint8, qint8, qint32; "
                         "per-tensor or per-channel affine)")
    if scheme == "torch.per_tensor_affine":
        q = QParams(t.q_scale(), t.q_zero_point())
    else:
        q = QParams(tuple(t.q_per_channel_scales().tolist()), tuple(t.q_per_channel_zero_points().tolist()),
                    int(t.q_per_channel_axis()))
    return QuantizedArray(np.array(t.int_repr().numpy(), copy=True, order="C"), qdtype, q)


def array_type(a: np.ndarray) -> TensorType:
    """The IR type of a parameter array (a QuantizedArray with its quantized dtype and parameters)."""
    qdtype = getattr(a, "qdtype", None)
    if qdtype is not None:
        return TensorType(qdtype, a.shape, a.qparams)
    return TensorType(str(a.dtype), a.shape)


def ir_type(t) -> Type:
    """A ``torch._C`` JIT type -> an srcore IR type (raises ``ValueError`` for class/object types)."""
    kind = t.kind()
    if kind == "TensorType":
        st = t.scalarType()
        dtype = TORCH_TO_DTYPE.get(st) if st else None
        sizes = t.varyingSizes()
        return TensorType(dtype, None if sizes is None else tuple(sizes))
    simple = {"IntType": INT, "FloatType": FLOAT, "BoolType": BOOL, "StringType": STR, "NoneType": NONE,
              "DeviceObjType": DEVICE, "NumberType": NUMBER, "AnyType": ANY, "ScalarTypeType": INT,
              "LayoutType": INT, "MemoryFormatType": INT, "SymIntType": INT, "SymFloatType": FLOAT,
              "SymBoolType": BOOL}
    if kind in simple:
        return simple[kind]
    if kind == "ListType":
        return ListType(ir_type(t.getElementType()))
    if kind == "OptionalType":
        return OptionalType(ir_type(t.getElementType()))
    if kind == "TupleType":
        return TupleType(tuple(ir_type(e) for e in t.elements()))
    if kind == "DictType":
        return DictType(ir_type(t.getKeyType()), ir_type(t.getValueType()))
    if kind == "FutureType":
        from ..ir.types import FutureType

        return FutureType(ir_type(t.getElementType()))
    if kind == "UnionType":   # e.g. ``torch.tensor([-1.0, 0, 1])`` in a script: a List[Union[float, int]]
        return UnionType(tuple(ir_type(e) for e in t.containedTypes()))
    raise ValueError(f"type {t} ({kind}) has no srcore equivalent")


_NAME_BAD = re.compile(r"[^A-Za-z0-9_.]")


def clean_name(name: str | None) -> str | None:
    """A value name the IR text accepts (TorchScript's debug names mostly already are)."""
    if not name:
        return None
    return _NAME_BAD.sub("_", name)


_FILE_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def source_from_range(text: str) -> SourceLocation | None:
    """Parse ``node.sourceRange()`` (``File "f", line N`` + the source with ``~~~`` under the range)."""
    m = _FILE_LINE.search(text or "")
    if not m:
        return None
    col = None
    for line in text.splitlines()[1:]:
        s = line.rstrip()
        if s and set(s.strip()) <= {"~"} or "<--- HERE" in s:
            idx = s.find("~")
            col = idx if idx >= 0 else None
            break
    from ._paths import portable_path

    return SourceLocation(portable_path(m.group("file")), int(m.group("line")), col)


#: ops whose Tensor operand at these positions also takes a Scalar (their ``.Scalar`` overloads):
#: where torch.jit.trace records a Python number of ``x * 2.5`` as a wrapped-number tensor constant
WRAPPED_SCALAR_USES = {
    **{f"aten::{op}": (1,) for op in (
        "add", "sub", "mul", "div", "rsub", "remainder", "fmod", "floor_divide", "true_divide",
        "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor",
        "__and__", "__or__", "__xor__", "__lshift__", "__rshift__")},
    "aten::pow": (0, 1),
}


def wrapped_scalar(value, uses, torch) -> Any:
    """The Python number a 0-dim tensor constant stands for if it is a *wrapped number* (a traced
    Python scalar: it takes part in type promotion as a scalar, so ``int_tensor * 2.5`` is float32,
    not float64) and every use takes a Scalar there; else None. Tracing marks such tensors
    (``TensorImpl::is_wrapped_number``), which Python cannot read: a wrapped number loses to a
    0-dim float16 / int8 tensor in ``torch.result_type``, a real 0-dim float64 / int64 one wins."""
    if value.dim() != 0 or value.dtype not in (torch.float64, torch.int64, torch.bool):
        return None
    if value.dtype == torch.bool or not uses:
        return None  # a wrapped bool promotes like a bool tensor: nothing to change
    probe = torch.zeros((), dtype=torch.float16 if value.dtype == torch.float64 else torch.int8)
    if torch.result_type(probe, value) != probe.dtype:
        return None
    if not all(u.offset in WRAPPED_SCALAR_USES.get(u.user.kind(), ()) for u in uses):
        return None
    return value.item()


def python_constant(value: Any, torch) -> tuple[Any, Type]:
    """A non-tensor Python/torch value -> (IR constant value, IR type)."""
    from ..ir.constants import type_of_constant

    if isinstance(value, torch.dtype):
        return scalar_type_code(value), INT
    if isinstance(value, torch.memory_format):
        return MEMORY_FORMAT_CODES[str(value).removeprefix("torch.")], INT
    if isinstance(value, torch.layout):
        return LAYOUT_CODES[str(value).removeprefix("torch.")], INT
    if isinstance(value, torch.device):
        return str(value), DEVICE
    if isinstance(value, (list, tuple)):
        items = [python_constant(v, torch) for v in value]
        vals = [v for v, _ in items]
        if isinstance(value, tuple):
            return tuple(vals), TupleType(tuple(t for _, t in items))
        return vals, type_of_constant(vals)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value, type_of_constant(value)
    raise ValueError(f"constant {value!r} of type {type(value).__name__} has no srcore equivalent")


def input_specs(names: Sequence[str], example_inputs, graph_types: Sequence[Type],
                dynamic_dims: Mapping[str, Mapping[int, str]] | None, torch) -> tuple[InputSpec, ...]:
    """Specs of the tensor inputs, from example inputs (dtype, shape) or else the graph's input
    types; apply symbolic dims. Non-tensor inputs get no spec (their IR type says it all)."""
    dynamic_dims = dict(dynamic_dims or {})
    unknown = set(dynamic_dims) - set(names)
    if unknown:
        raise ConversionError(f"dynamic_dims names unknown inputs {sorted(unknown)} (inputs: {list(names)})")
    if example_inputs is not None and len(example_inputs) > len(names):
        raise ConversionError(f"{len(example_inputs)} example inputs for a model that takes {len(names)} "
                              f"({', '.join(names)})")
    specs = []
    for i, name in enumerate(names):
        ex = example_inputs[i] if example_inputs is not None and i < len(example_inputs) else None
        t = graph_types[i]
        if isinstance(ex, np.ndarray):   # a numpy example stands for the tensor it would become
            spec = InputSpec(name, str(ex.dtype), tuple(int(d) for d in ex.shape))
        elif isinstance(ex, torch.Tensor):   # also for an Optional[Tensor] input given a tensor
            spec = InputSpec(name, np_dtype_name(ex.dtype), tuple(int(d) for d in ex.shape))
        elif isinstance(t, TensorType):
            spec = InputSpec(name, t.dtype, t.shape)
        else:
            if name in dynamic_dims:
                raise ConversionError(f"input {name!r} is a {t}, not a tensor: it has no dims")
            continue
        if name in dynamic_dims:
            if spec.shape is None:
                raise ConversionError(f"input {name!r}: cannot mark dims symbolic, its rank is unknown")
            shape = list(spec.shape)
            for d, sym in dynamic_dims[name].items():
                if not -len(shape) <= d < len(shape):
                    raise ConversionError(f"input {name!r}: dim {d} out of range for rank {len(shape)}")
                shape[d] = sym
            spec = InputSpec(name, spec.dtype, tuple(shape))
        specs.append(spec)
    return tuple(specs)


@functools.lru_cache(maxsize=4096)
def parse_schema(text: str):
    """The schema for a torch schema string: srcore's declared one for that overload when the
    installed op libraries declare it with the same arguments, else the parsed torch schema;
    ``None`` if it does not parse (dispatch then resolves the node by kind)."""
    try:
        from ..ops.schema import FunctionSchema

        parsed = FunctionSchema.parse(text)
    except Exception:
        return None
    declared = _declared().get(parsed.qualified_name)
    if declared is not None and len(declared[0].arguments) == len(parsed.arguments):
        return declared[0]
    return parsed


@functools.lru_cache(maxsize=1)
def _declared() -> dict:
    try:
        from ..plugin.manager import get_plugin_manager

        return dict(get_plugin_manager().registry.declared)
    except Exception:  # no registry (or a broken plugin): torch's schemas are exact anyway
        return {}


def unsupported_error(what: str, problems: Sequence[str]) -> ConversionError:
    lines = "\n".join(f"  - {p}" for p in problems)
    return ConversionError(f"cannot convert {what}: {len(problems)} unsupported construct(s):\n{lines}")


_RESHAPE_SCHEMA = "aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)"


def relax_views(graph) -> int:
    """``aten::view(x, size)`` -> ``aten::reshape`` where nothing writes through either side.

    A view is only legal for torch's strides, and srcore's kernels may lay a result out
    differently (e.g. SDPA's output, which export's decompositions then ``view`` after a
    permute): without writes the two ops compute the same values, and reshape still views
    when it can. Returns the number of nodes changed.
    """
    from ..ir.alias import is_mutated

    n_changed = 0
    for node in list(graph.all_nodes()):
        if node.kind != "aten::view" or len(node.inputs) != 2 or not isinstance(node.inputs[1].type, ListType):
            continue
        if is_mutated(node.inputs[0]) or is_mutated(node.output):
            continue
        node.kind = "aten::reshape"
        node.schema = parse_schema(_RESHAPE_SCHEMA)
        n_changed += 1
    return n_changed


_BITWISE = {"aten::__and__": "bitwise_and", "aten::__or__": "bitwise_or", "aten::__xor__": "bitwise_xor"}


def rename_tensor_bitwise(graph) -> int:
    """``a & b`` on tensors: TorchScript and export say ``aten::__and__`` (and ``__or__``,
    ``__xor__``), the same op as ``aten::bitwise_and``; the number ops keep their names."""
    from ..ir.types import TensorType

    n_changed = 0
    for node in list(graph.all_nodes()):
        name = _BITWISE.get(node.kind)
        if name is None or len(node.inputs) != 2 or not isinstance(node.inputs[0].type, TensorType):
            continue
        overload = "Tensor(Tensor self, Tensor other)" if isinstance(node.inputs[1].type, TensorType) \
            else "Scalar(Tensor self, Scalar other)"
        node.kind = f"aten::{name}"
        node.schema = parse_schema(f"aten::{name}.{overload} -> Tensor")
        n_changed += 1
    return n_changed


def canonicalize(graph) -> None:
    """Frontend-independent clean-ups of a converted graph (see the functions called)."""
    relax_views(graph)
    rename_tensor_bitwise(graph)
    rename_convolution_mode(graph)


def rename_convolution_mode(graph) -> int:
    """Traced ``padding="same"/"valid"`` convolutions: ``aten::_convolution_mode`` is
    ``aten::conv{1,2,3}d.padding`` (same arguments) for a weight of rank 3, 4, 5."""
    from ..ir.types import TensorType
    from ..ir.constants import const_or

    n_changed = 0
    for node in list(graph.all_nodes()):
        if node.kind != "aten::_convolution_mode" or len(node.inputs) != 7:
            continue
        wt = node.inputs[1].type
        rank = wt.rank if isinstance(wt, TensorType) else None
        if rank is None:
            stride = const_or(node.inputs[3], None)
            rank = len(stride) + 2 if isinstance(stride, (list, tuple)) else None
        if rank not in (3, 4, 5):
            continue
        d = rank - 2
        node.kind = f"aten::conv{d}d"
        node.schema = parse_schema(
            f"aten::conv{d}d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[{d}] stride={[1] * d}, "
            f"str padding=\"valid\", SymInt[{d}] dilation={[1] * d}, SymInt groups=1) -> Tensor")
        n_changed += 1
    return n_changed

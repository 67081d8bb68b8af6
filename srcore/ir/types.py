"""The value types of srcore's IR, TorchScript's type system cut to inference.

Every type is an immutable attrs record with a canonical ``str()`` that the
text printer writes and the text parser reads back.

A tensor type carries an optional dtype (numpy name, ``None`` = unknown) and
an optional shape (``None`` = unknown rank). Each dimension is an ``int``
(fixed), a ``str`` (a symbolic dimension such as ``"batch"``) or ``None``
(unknown).

A tensor of a quantized dtype (``quint8``, ``qint8``, ``qint32``) may also carry its quantization
parameters (:class:`srcore.ir.quant.QParams`), printed after the dims:
``QUInt8(1, 8, scale=0.05, zero_point=64)``.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Union

import attrs

from .._convert import to_tuple
from .._repr import shared_repr

if TYPE_CHECKING:
    from .qparams import QParams

Dim = Union[int, str, None]

#: TorchScript scalar-type names (as in ``Float(2, 3)``) <-> srcore dtype names.
TORCH_TO_DTYPE = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
    "ComplexHalf": "complex32",
    "QUInt8": "quint8",
    "QInt8": "qint8",
    "QInt32": "qint32",
    "UInt16": "uint16",
    "UInt32": "uint32",
    "UInt64": "uint64",
    # ml_dtypes' numpy types (what onnx and JAX use): storage and casts, few kernels
    "Float8_e5m2": "float8_e5m2",
    "Float8_e4m3fn": "float8_e4m3fn",
    "Float8_e5m2fnuz": "float8_e5m2fnuz",
    "Float8_e4m3fnuz": "float8_e4m3fnuz",
    "UInt4": "uint4",
    "Int4": "int4",
}
DTYPE_TO_TORCH = {v: k for k, v in TORCH_TO_DTYPE.items()}

#: torch's ScalarType enum codes (what ``dtype=6`` means in a TorchScript graph).
SCALAR_TYPE_CODES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
    6: "float32", 7: "float64", 8: "complex32", 9: "complex64", 10: "complex128",
    11: "bool", 12: "qint8", 13: "quint8", 14: "qint32", 15: "bfloat16",
    23: "float8_e5m2", 24: "float8_e4m3fn", 25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz",
    27: "uint16", 28: "uint32", 29: "uint64", 33: "uint4", 40: "int4",
}
#: the dtypes of ml_dtypes (numpy has none): ``np.dtype(name)`` resolves them once ml_dtypes is imported
ML_DTYPES = frozenset({"bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
                       "uint4", "int4"})
#: storage-only dtypes: casts and data movement; arithmetic kernels reject them
FLOAT8_DTYPES = frozenset({"float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz"})
INT4_DTYPES = frozenset({"uint4", "int4"})
DTYPE_TO_SCALAR_TYPE_CODE = {v: k for k, v in SCALAR_TYPE_CODES.items()}


class Type:
    """Base class of IR types."""

    __slots__ = ()

    def is_tensor(self) -> bool:
        return False


_SYMBOL_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*|SS\(-?\d+\)"
_ID_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_ID = _ID_START | frozenset("0123456789")


def _is_symbol(d: str) -> bool:
    """``re.fullmatch(_SYMBOL_PATTERN, d)`` with str methods (``\\d`` as ``str.isdecimal``): every printed
    type with a symbolic dim asked it, and compiling the pattern was ~0.1 ms of a cold start
    (tests/test_ir_name_checks.py checks it against the regex)."""
    if d[:1] in _ID_START and _ID.issuperset(d):
        return True
    if d.startswith("SS(") and d.endswith(")"):
        inner = d[3:-1]
        inner = inner[1:] if inner.startswith("-") else inner
        return inner.isdecimal()
    return False


def _dim_str(d: Dim) -> str:
    if d is None:
        return "*"
    if isinstance(d, str) and not _is_symbol(d):  # e.g. "n+1": quoted so it reparses
        return '"' + d.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return str(d)


@attrs.frozen
@shared_repr
class TensorType(Type):
    """A tensor, with what is known of its dtype and shape (and, quantized, of its parameters)."""

    dtype: str | None = None
    shape: tuple[Dim, ...] | None = attrs.field(
        default=None, converter=lambda s: None if s is None else tuple(s))
    qparams: QParams | None = None

    def is_tensor(self) -> bool:
        return True

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when the dtype and every dimension are known integers."""
        return (self.dtype is not None and self.shape is not None
                and all(isinstance(d, int) for d in self.shape))

    def with_dtype(self, dtype: str | None) -> "TensorType":
        """This type with another dtype (quantization parameters go unless it stays the same)."""
        return attrs.evolve(self, dtype=dtype, qparams=self.qparams if dtype == self.dtype else None)

    def with_shape(self, shape) -> "TensorType":
        return attrs.evolve(self, shape=shape)

    def with_qparams(self, qparams: QParams | None) -> "TensorType":
        return attrs.evolve(self, qparams=qparams)

    def __str__(self) -> str:
        if self.dtype is None and self.shape is None:
            return "Tensor"
        name = DTYPE_TO_TORCH.get(self.dtype, self.dtype) if self.dtype else "Tensor"
        if self.qparams is not None:
            dims = "..., " if self.shape is None else "".join(f"{_dim_str(d)}, " for d in self.shape)
            return f"{name}({dims}{self.qparams.describe()})"
        if self.shape is None:
            return f"{name}(...)"
        return f"{name}({', '.join(_dim_str(d) for d in self.shape)})"


class _SimpleType(Type):
    """A field-less type (``int``, ``Tensor``'s scalar kin): written by hand rather than by attrs, since
    attrs compiles ``__init__``/``__eq__``/``__hash__``/``__repr__`` for each class at import and these
    fourteen classes were ~12% of that cost of every cold start. Same behaviour as ``@attrs.frozen``
    without fields: instances of one class are equal and hash alike, and are immutable."""

    __slots__ = ()
    _name = ""

    def __str__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return True

    def __ne__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return False

    def __hash__(self) -> int:
        return hash(self.__class__.__qualname__)

    def __setattr__(self, name, value):
        raise attrs.exceptions.FrozenInstanceError()

    def __delattr__(self, name):
        raise attrs.exceptions.FrozenInstanceError()

    def __reduce__(self):
        return (self.__class__, ())


def _simple(name: str) -> type:
    cls_name = name[0].upper() + name[1:] + "Type"
    return type(cls_name, (_SimpleType,), {"__slots__": (), "_name": name, "__qualname__": cls_name,
                                           "__module__": __name__})


IntType = _simple("int")
FloatType = _simple("float")
BoolType = _simple("bool")
StrType = _simple("str")
NoneType = _simple("NoneType")
DeviceType = _simple("Device")
NumberType = _simple("Scalar")
AnyType = _simple("Any")
ScalarTypeType = _simple("ScalarType")
LayoutType = _simple("Layout")
MemoryFormatType = _simple("MemoryFormat")
GeneratorType = _simple("Generator")
ComplexType = _simple("complex")
FunctionType = _simple("Function")  # a TorchScript function constant (prim::Constant[name="f"])
NoneType.__name__ = NoneType.__qualname__ = "NoneType"


@attrs.frozen
@shared_repr
class ListType(Type):
    elem: Type

    def __str__(self) -> str:
        return f"{self.elem}[]"


# Shared instances: the types are immutable, so one of each is enough.
INT = IntType()
FLOAT = FloatType()
BOOL = BoolType()
STR = StrType()
NONE = NoneType()
DEVICE = DeviceType()
NUMBER = NumberType()
ANY = AnyType()
SCALAR_TYPE = ScalarTypeType()
LAYOUT = LayoutType()
MEMORY_FORMAT = MemoryFormatType()
GENERATOR = GeneratorType()
FUNCTION = FunctionType()
COMPLEX = ComplexType()
TENSOR = TensorType()

#: simple type names as they appear in IR text
SIMPLE_TYPES: dict[str, Type] = {
    "int": INT, "float": FLOAT, "bool": BOOL, "str": STR, "NoneType": NONE,
    "Device": DEVICE, "Scalar": NUMBER, "number": NUMBER, "Any": ANY,
    "ScalarType": SCALAR_TYPE, "Layout": LAYOUT, "MemoryFormat": MEMORY_FORMAT,
    "Generator": GENERATOR, "Tensor": TENSOR, "Function": FUNCTION, "complex": COMPLEX,
    # torch's spellings of the same types: ``None`` (its printer's NoneType), symbolic scalars
    "None": NONE, "SymInt": INT, "SymFloat": FLOAT, "SymBool": BOOL,
}
#: TorchScript types that srcore carries without looking inside
OPAQUE_TYPE_NAMES = ("Storage", "Stream", "Capsule", "QScheme", "Quantizer", "AnyClassType", "AnyEnumType")


#: the types built on first use, and their modules: ``srcore.ir.compound_types`` (optionals, tuples, dicts) and
#: ``srcore.ir.rare_types`` (what TorchScript's classes, unions and handles need)
_LAZY_TYPES = {
    **{n: "compound_types" for n in ("OptionalType", "TupleType", "DictType")},
    **{n: "rare_types" for n in ("ClassType", "UnionType", "OpaqueType", "WrapperType", "FutureType")},
}
_PACKAGE = __name__.rpartition(".")[0]


class _NoInstances:
    """What :func:`lazy_type` answers for a type whose module is not imported: nothing is an instance of it."""

    __slots__ = ()


def __getattr__(name: str):
    module = _LAZY_TYPES.get(name)
    if module is not None:
        import importlib

        value = getattr(importlib.import_module(f"{_PACKAGE}.{module}"), name)
        globals()[name] = value   # a plain attribute from now on
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def lazy_type(name: str) -> type:
    """The IR type class ``name`` (``"TupleType"``, ``"UnionType"``...) once its module is imported, else a class
    nothing is an instance of: ``isinstance(t, lazy_type("TupleType"))`` without building the class (no value of
    that type exists before it is)."""
    mod = sys.modules.get(f"{_PACKAGE}.{_LAZY_TYPES[name]}")
    return _NoInstances if mod is None else getattr(mod, name)


def is_union(t: Type) -> bool:
    """``isinstance(t, UnionType)``, without importing ``srcore.ir.rare_types`` (no union exists before it is)."""
    return isinstance(t, lazy_type("UnionType"))


def holds_ml_dtype(t: Type) -> bool:
    """True if a value of type ``t`` is or holds a tensor of one of :data:`ML_DTYPES`."""
    if isinstance(t, TensorType):
        return t.dtype in ML_DTYPES
    if isinstance(t, (ListType, lazy_type("OptionalType"))):
        return holds_ml_dtype(t.elem)
    if isinstance(t, (lazy_type("TupleType"), lazy_type("UnionType"))):
        return any(holds_ml_dtype(e) for e in t.elems)
    if isinstance(t, lazy_type("DictType")):
        return holds_ml_dtype(t.value)
    return False


def contains_tensor(t: Type) -> bool:
    """True if a value of type ``t`` is or holds a tensor."""
    if isinstance(t, TensorType):
        return True
    if isinstance(t, (ListType, lazy_type("OptionalType"))):
        return contains_tensor(t.elem)
    if isinstance(t, lazy_type("TupleType")):
        return any(contains_tensor(e) for e in t.elems)
    if isinstance(t, lazy_type("DictType")):
        return contains_tensor(t.value)
    return isinstance(t, AnyType)

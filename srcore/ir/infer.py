"""Types of values that IR text writes without one (``%r = aten::acos(%x)``), as torch's parser gives them.

torch's ``parse_ir`` types an untyped output by the return type of the schema the node
matches, and anything else (graph inputs, outputs of ops without a schema) as ``Tensor``.
srcore does the same, and types the outputs of the structural ``prim::`` nodes by what
they build (a constant by its value, a list by its elements, ``prim::If`` by its blocks),
so that overload resolution of the nodes that use them works; shape propagation refines
every type later.
"""
from __future__ import annotations

from typing import Any

from .constants import type_of_constant as constant_type
from .types import (ANY, BOOL, DEVICE, FLOAT, INT, NONE, STR, TENSOR, DictType, ListType, OptionalType, TupleType,
                    Type)

__all__ = ["infer_output_type", "infer_block_input_type", "type_of_constant", "schema_type_to_ir"]


def type_of_constant(value: Any) -> Type:
    """The IR type of a ``prim::Constant[value=...]`` literal (a tensor literal is a ``Tensor``)."""
    try:
        return constant_type(value)
    except TypeError:
        return TENSOR


def infer_output_type(node, index: int, n_outputs: int) -> Type:
    """The type of output ``index`` of ``node`` (inputs, attributes and blocks parsed)."""
    kind = node.kind
    ins = [v.type for v in node.inputs]
    if kind == "prim::Constant":
        if "tensor" in node.attrs or "param" in node.attrs:
            return TENSOR
        return type_of_constant(node.attrs.get("value"))
    if kind == "prim::ListConstruct":
        return ListType(ins[0] if ins and all(t == ins[0] for t in ins) else (TENSOR if not ins else ANY))
    if kind == "prim::TupleConstruct":
        return TupleType(tuple(ins))
    if kind == "prim::ListUnpack" and ins and isinstance(ins[0], ListType):
        return ins[0].elem
    if kind == "prim::TupleUnpack" and ins and isinstance(ins[0], TupleType) and index < len(ins[0].elems):
        return ins[0].elems[index]
    if kind == "prim::If" and node.blocks:
        return node.blocks[0].outputs[index].type
    if kind == "prim::Loop":
        return ins[2 + index] if 2 + index < len(ins) else ANY
    if kind in ("prim::dtype", "prim::device", "prim::is_cuda", "prim::NumToTensor"):
        return {"prim::dtype": INT, "prim::device": DEVICE, "prim::is_cuda": BOOL}.get(kind, TENSOR)
    if kind.startswith("prim::") and kind not in ("prim::isinstance", "prim::TypeCheck"):
        return ANY if kind in ("prim::GetAttr", "prim::TupleIndex", "prim::Uninitialized") else TENSOR
    if kind == "prim::isinstance":
        return BOOL
    if kind == "prim::TypeCheck":  # the checked tensors, then the verdict
        return BOOL if index == n_outputs - 1 else (ins[index] if index < len(ins) else TENSOR)
    schema = _schema_of(node, n_outputs)
    if schema is not None and index < len(schema.returns):
        return schema_type_to_ir(schema.returns[index].type, node)
    return TENSOR


def infer_block_input_type(node, index: int) -> Type:
    """An untyped block parameter: a loop's trip counter is an int, its carried values keep their types."""
    if node.kind == "prim::Loop":
        if index == 0:
            return INT
        carried = node.inputs[2:]
        return carried[index - 1].type if index - 1 < len(carried) else ANY
    return TENSOR


def _schema_of(node, n_outputs: int):
    """The overload ``node`` calls, from the core's declarations (None if not declared)."""
    try:
        from ..ops.registry import cached_default_registry
        reg = cached_default_registry()
    except Exception:  # noqa: BLE001 - the registry is optional here: Tensor is torch's default
        return None
    best = None
    for s in reg.overloads(node.kind):
        if not s.is_varret and len(s.returns) != n_outputs:
            continue
        score = _score(node, s)
        if score is not None and (best is None or score < best[0]):
            best = (score, s)
    return None if best is None else best[1]


def _score(node, schema):
    from ..ops.matching import match_score

    class _Probe:  # the node without its outputs (not parsed yet): arity is checked by the caller
        inputs = node.inputs
        outputs = [None] * len(schema.returns)
    return match_score(_Probe, schema)


def schema_type_to_ir(st, node=None) -> Type:
    """A schema type (``Tensor``, ``int[]``, ``Tensor?``, ``(Tensor, Tensor)``, ``t``) as an IR type."""
    from ..ops.schema import BaseType, GenericType, OptionalType as SOpt, ListType as SList, TupleType as STuple

    if isinstance(st, SOpt):
        return OptionalType(schema_type_to_ir(st.elem))
    if isinstance(st, SList):
        return ListType(schema_type_to_ir(st.elem))
    if isinstance(st, STuple):
        return TupleType(tuple(schema_type_to_ir(e) for e in st.elems))
    if isinstance(st, GenericType):
        if st.name == "Dict" and len(st.args) == 2:
            return DictType(schema_type_to_ir(st.args[0]), schema_type_to_ir(st.args[1]))
        return ANY
    if isinstance(st, BaseType):
        return _BASE.get(st.name, ANY)
    return ANY


def _base_types() -> dict[str, Type]:
    from .types import COMPLEX, GENERATOR, NUMBER
    return {"Tensor": TENSOR, "int": INT, "SymInt": INT, "float": FLOAT, "bool": BOOL, "str": STR,
            "Scalar": NUMBER, "number": NUMBER, "Device": DEVICE, "NoneType": NONE, "complex": COMPLEX,
            # TorchScript carries these enums as ints
            "ScalarType": INT, "Layout": INT, "MemoryFormat": INT, "Generator": GENERATOR}


_BASE = _base_types()

"""prim:: ops: constants, list/tuple packing, dtype/device queries, casts, exceptions.

``prim::If`` and ``prim::Loop`` are not rules: ``propagate`` interprets them.
"""
from __future__ import annotations

from ...ir.constants import type_of_constant
from ...ir.types import (BOOL, DEVICE, INT, NONE, SCALAR_TYPE_CODES, DTYPE_TO_SCALAR_TYPE_CODE, ListType,
                         OptionalType, TensorType, TupleType)
from .base import A, BOTTOM, Ctx, UNKNOWN, rule, tt


def _constant_elems(value, t):
    if isinstance(value, (list, tuple)) and not hasattr(value, "dtype"):
        if isinstance(t, TupleType) and len(t.elems) == len(value):
            ets = list(t.elems)
        elif isinstance(t, ListType):
            ets = [t.elem] * len(value)
        else:
            ets = [type_of_constant(v) for v in value]
        return [A(et, v, _constant_elems(v, et)) for v, et in zip(value, ets)]
    return None


@rule("prim::Constant")
def constant(ctx: Ctx):
    node = ctx.node
    declared = node.outputs[0].type
    if "value" not in node.attrs:
        text = node.attrs.get("tensor")
        if isinstance(text, str) and text.startswith("{") and text.endswith("}"):
            return [_scalar_tensor_constant(text[1:-1].strip(), declared)]
        if isinstance(declared, TensorType) or "param" in node.attrs:
            return [declared]
        return [A(NONE if declared is None else declared, None)]
    value = node.attrs["value"]
    if hasattr(value, "dtype") and hasattr(value, "shape"):  # a tensor constant (quantized: with its qparams)
        return [type_of_constant(value)]
    t = declared if declared is not None else type_of_constant(value)
    return [A(t, value, _constant_elems(value, t))]


def _pack(ctx: Ctx, typ):
    elems = [A(a.type, a.known, a.elems) for a in ctx.args]
    known = [e.known for e in elems]
    if any(k is UNKNOWN for k in known) or any(isinstance(e.type, TensorType) for e in elems):
        known = UNKNOWN
    elif isinstance(typ, TupleType):
        known = tuple(known)
    return [A(typ, known, elems)]


@rule("prim::ListConstruct")
def list_construct(ctx: Ctx):
    """A list of tensors is typed by its elements' dtype when they all have the same known one (an
    RNN's weight list: its kernel then needs no dtype check per call), else by none."""
    declared = ctx.node.outputs[0].type
    if isinstance(declared, ListType) and isinstance(declared.elem, TensorType) and ctx.args:
        dtypes = {a.type.dtype if isinstance(a.type, TensorType) and a.type.qparams is None else None
                  for a in ctx.args}
        declared = ListType(TensorType(dtypes.pop() if len(dtypes) == 1 else None))
    return _pack(ctx, declared)


@rule("prim::TupleConstruct")
def tuple_construct(ctx: Ctx):
    return _pack(ctx, TupleType(tuple(a.type for a in ctx.args)))


def _unpack(ctx: Ctx):
    a = ctx.args[0]
    n = len(ctx.node.outputs)
    if a.elems is not None:
        if len(a.elems) != n:
            raise ctx.fail(f"cannot unpack {len(a.elems)} values into {n}")
        return list(a.elems)
    if isinstance(a.known, (list, tuple)) and len(a.known) == n:
        return [A(o.type, k) for o, k in zip(ctx.node.outputs, a.known)]
    if isinstance(a.type, TupleType) and len(a.type.elems) == n:
        return list(a.type.elems)
    if isinstance(a.type, ListType):
        return [a.type.elem] * n
    return [o.type for o in ctx.node.outputs]


rule("prim::ListUnpack", "prim::TupleUnpack")(_unpack)


@rule("prim::TupleIndex")
def tuple_index(ctx: Ctx):
    a, i = ctx.args[0], ctx.args[1].known
    if a.elems is not None and isinstance(i, int) and -len(a.elems) <= i < len(a.elems):
        return [a.elems[i]]
    if isinstance(a.type, TupleType) and isinstance(i, int) and -len(a.type.elems) <= i < len(a.type.elems):
        return [a.type.elems[i]]
    return [ctx.node.outputs[0].type]


@rule("prim::NumToTensor", "aten::scalar_tensor", "aten::as_tensor", "prim::NumToTensor.Scalar")
def num_to_tensor(ctx: Ctx):
    from .elementwise import promote
    a = ctx.args[0]
    if isinstance(a.type, TensorType):
        return [a.type]
    dtype = {"bool": "bool"}.get(type(a.known).__name__) if a.known is not UNKNOWN else None
    code = ctx.known(1, "dtype", default=None) if ctx.op.startswith("aten::scalar_tensor") else None
    if isinstance(code, int) and not isinstance(code, bool):
        dtype = SCALAR_TYPE_CODES.get(code)
    elif ctx.op.startswith("aten::scalar_tensor"):
        dtype = "float32"
    elif dtype is None:
        t = type(a.type).__name__
        dtype = {"IntType": "int64", "FloatType": "float64", "BoolType": "bool"}.get(t)
        if isinstance(a.known, int) and not isinstance(a.known, bool):
            dtype = "int64"
        elif isinstance(a.known, float):
            dtype = "float64"
    return [tt(dtype, ())]


@rule("prim::dtype")
def prim_dtype(ctx: Ctx):
    d = ctx.tensor(0).dtype
    code = DTYPE_TO_SCALAR_TYPE_CODE.get(d) if d is not None else None
    return [A(INT, UNKNOWN if code is None else code)]


@rule("prim::device")
def prim_device(ctx: Ctx):
    return [A(DEVICE, "cpu")]


@rule("prim::is_cuda", "prim::is_quantized", "prim::is_mkldnn", "prim::is_sparse", "prim::is_meta")
def prim_is_flag(ctx: Ctx):
    return [A(BOOL, ctx.tensor(0).dtype in ("quint8", "qint8", "qint32") if ctx.op == "prim::is_quantized"
              else False)]


@rule("prim::layout")
def prim_layout(ctx: Ctx):
    return [A(INT, 0)]


@rule("prim::RaiseException", "prim::PythonOp", "prim::Print")
def no_outputs(ctx: Ctx):
    return [o.type for o in ctx.node.outputs]


@rule("prim::Uninitialized")
def uninitialized(ctx: Ctx):
    """A value no execution ever reads (it stands in a branch that raised): joins ignore it."""
    return [A(ctx.node.outputs[0].type, BOTTOM)]


@rule("prim::unchecked_cast", "aten::_unwrap_optional", "prim::unchecked_unwrap_optional")
def unchecked_cast(ctx: Ctx):
    a = ctx.args[0]
    declared = ctx.node.outputs[0].type
    t = a.type
    if isinstance(t, OptionalType):
        t = t.elem
    if isinstance(declared, TensorType) and not isinstance(t, TensorType):
        t = declared
    return [A(t, a.known, a.elems)]


@rule("aten::append")
def append(ctx: Ctx):
    """The list is mutated. In straight-line code of the block that built it, the new element is
    tracked; elsewhere (a branch, a loop body) what was known of its length and elements is dropped."""
    lst, item = ctx.args[0], ctx.args[1]
    producer = ctx.node.inputs[0].node
    # a block input (a loop-carried list) is not built in this block: its abstract value is the
    # caller's, shared with the loop's initial list, and must not grow with each pass over the body
    if lst.elems is not None and producer.owning_block is ctx.node.owning_block and producer.kind != "prim::Param":
        lst.elems.append(A(item.type, item.known, item.elems))
        if lst.known is not UNKNOWN and item.known is not UNKNOWN and not isinstance(item.type, TensorType):
            lst.known = list(lst.known) + [item.known]
        else:
            lst.known = UNKNOWN
        return [lst]
    lst.known, lst.elems = UNKNOWN, None
    return [A(lst.type)]


@rule("prim::GetAttr", "prim::CallMethod", "prim::CallFunction")
def opaque(ctx: Ctx):
    return [o.type for o in ctx.node.outputs]


@rule("prim::requires_grad")
def requires_grad(ctx: Ctx):
    return [A(BOOL, False)]


def _scalar_tensor_constant(body: str, declared) -> TensorType:
    """TorchScript prints 0-dim tensor constants as ``{1.5}`` / ``{2}``: float64 / int64 unless declared."""
    if isinstance(declared, TensorType) and declared.dtype is not None:
        return TensorType(declared.dtype, ())
    if body in ("True", "False", "true", "false"):
        return TensorType("bool", ())
    try:
        int(body)
        return TensorType("int64", ())
    except ValueError:
        return TensorType("float64", ())


@rule("aten::_set_item", "aten::clear", "aten::extend", "aten::insert", "aten::pop", "aten::reverse",
      "aten::Delete", "aten::popitem", "aten::setdefault", "aten::update")
def list_mutation(ctx: Ctx):
    """The list (or dict) is mutated in place: forget what was known of it; outputs as declared."""
    target = ctx.args[0]
    target.known, target.elems = UNKNOWN, None
    return [A(o.type) for o in ctx.node.outputs]


@rule("prim::IfThenElse")
def if_then_else(ctx: Ctx):
    from .interp import join
    cond = ctx.known(0)
    x, y = ctx.args[1], ctx.args[2]
    if cond is True or cond is False:
        a = x if cond else y
        return [A(a.type, a.known, a.elems)]
    return [join(x, y, ctx.node.outputs[0].type if ctx.node.outputs else None)]


@rule("prim::tolist")
def tolist(ctx: Ctx):
    """The declared output type (``float[][]`` ...): TorchScript annotates it."""
    return [A(o.type) for o in ctx.node.outputs]


def _is_instance(t, candidate) -> bool | None:
    """Does a value of IR type ``t`` pass ``isinstance(x, candidate)``? None when the types cannot tell."""
    from ...ir.types import AnyType, OptionalType
    if isinstance(t, AnyType) or isinstance(t, OptionalType):
        return None
    if isinstance(candidate, TensorType):
        return isinstance(t, TensorType)
    if isinstance(candidate, (ListType, TupleType)):
        if not isinstance(t, type(candidate)):
            return False
        return True if isinstance(candidate, TupleType) or t.elem == candidate.elem else None
    return type(t) is type(candidate)


@rule("prim::isinstance")
def isinstance_(ctx: Ctx):
    """Known at load from the input's type (attribute ``types``): the constant folder then removes the node."""
    verdicts = [_is_instance(ctx.args[0].type, c) for c in ctx.node.attrs.get("types", [])]
    if any(v is True for v in verdicts):
        return [A(BOOL, True)]
    if verdicts and all(v is False for v in verdicts):
        return [A(BOOL, False)]
    return [A(BOOL)]

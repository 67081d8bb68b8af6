"""Structural natives: lists, tuples, tensor metadata, exceptions (``"*"`` dtypes, most with ``"quantized"``)."""
from __future__ import annotations

from srcore.plugin import ANY_QUANTIZED, Kernel

from . import ANY, family

_k = family("prim")

_DICT_KEYS = ("str", "int", "bool", "float", "Tensor")   # Dict(<key>, t) overloads (Tensor keys: by identity)

#: dict methods per key type (torch's fallback cannot take a dict: 'Expected a value of type Dict[str, t]')
_DICT_METHODS = (
    ("aten::items.{}", "dict_items"), ("aten::keys.{}", "dict_keys"), ("aten::values.{}", "dict_values"),
    ("aten::get.{}", "dict_get"), ("aten::get.default_{}", "dict_get"), ("aten::pop.Dict_{}", "dict_pop"),
    ("aten::pop.Dict_default_{}", "dict_pop"), ("aten::popitem.{}", "dict_popitem"),
    ("aten::setdefault.{}", "dict_setdefault"), ("aten::update.{}", "dict_update"),
    ("aten::Delete.Dict_{}", "dict_delete"), ("aten::copy.Dict_{}", "dict_copy"), ("aten::dict.Dict_{}", "dict_copy"),
    ("aten::dict.{}", "dict_from_items"), ("aten::clear.{}", "clear"))

_OPS = [  # (op, impl)
    ("prim::ListConstruct", "list_construct"), ("prim::ListUnpack", "list_unpack"),
    ("prim::TupleConstruct", "tuple_construct"), ("prim::TupleUnpack", "tuple_unpack"),
    ("prim::TupleIndex", "tuple_index"), ("prim::dtype", "dtype"), ("prim::device", "device"),
    ("prim::RaiseException", "raise_exception"), ("aten::warn", "warn"), ("prim::Uninitialized", "uninitialized"),
    ("prim::unchecked_cast", "identity"),
    ("aten::size", "size"), ("aten::size.int", "size"), ("aten::dim", "dim"), ("aten::numel", "numel"),
    ("aten::len.t", "len_"), ("aten::len.Tensor", "len_"), ("aten::len.any", "len_"), ("aten::len.str", "len_"),
    ("aten::__getitem__.t", "getitem"), ("aten::select.t", "getitem"), ("aten::slice.t", "list_slice"),
    ("aten::list.t", "list_copy"), ("aten::append.t", "append"), ("aten::_set_item.t", "set_item"),
    ("aten::insert.t", "insert"), ("aten::pop.t", "pop"), ("aten::extend.t", "extend"),
    ("aten::clear.t", "clear"), ("aten::reverse.t", "reverse"), ("aten::add.t", "list_add"),
    ("aten::add_.t", "list_iadd"), ("aten::mul.left_t", "list_mul"), ("aten::mul.right_", "list_rmul"),
    ("aten::__contains__.int_list", "contains"), ("aten::__contains__.float_list", "contains"),
    ("aten::index.list_int", "list_index"), ("aten::index.list_float", "list_index"),
    ("aten::index.list_bool", "list_index"), ("aten::format", "format"),
    ("aten::__contains__.int", "contains"), ("aten::__contains__.float", "contains"),
    ("aten::__contains__.bool", "contains"), ("aten::__contains__.str", "contains"),
    ("aten::__contains__.str_list", "contains"), ("aten::__contains__.Tensor", "contains"),
    ("prim::DictConstruct", "dict_construct"), ("prim::shape", "shape"), ("prim::layout", "layout"),
    ("prim::is_cuda", "false"), ("prim::is_nested", "false"), ("prim::requires_grad", "false"),
    ("aten::is_grad_enabled", "false"), ("aten::is_floating_point", "is_floating_point"), ("aten::is_autocast_enabled", "false"), ("prim::data", "identity"),
    ("prim::type", "device_type"), ("aten::mul_.t", "list_imul"),
    ("aten::sort.int", "list_sort"), ("aten::sort.float", "list_sort"), ("aten::sort.bool", "list_sort"),
    ("aten::sort.any", "list_sort"), ("aten::eq.Tensor_list", "tensor_list_eq"),
    ("aten::ne.Tensor_list", "tensor_list_ne"),
    ("prim::IfThenElse", "if_then_else"), ("prim::tolist", "tolist"), ("aten::list", "str_list"),
    ("aten::slice.str", "str_slice"), ("aten::str", "str_"),
] + [(f"aten::__getitem__.Dict_{k}", "dict_getitem") for k in _DICT_KEYS] \
  + [(f"aten::len.Dict_{k}", "len_") for k in _DICT_KEYS] \
  + [(f"aten::_set_item.{k}", "set_item") for k in _DICT_KEYS] \
  + [(op.format(k), impl) for k in _DICT_KEYS for op, impl in _DICT_METHODS]

#: kernels that never read a tensor's elements (they pass tensors around, or read their shape), so they
#: take quantized tensors as they take any: ``"*"`` alone leaves the quantized dtypes out (their stored
#: integers are not their values). Not ``prim::dtype`` (it would name the storage dtype), ``tolist``,
#: ``format``, the tensor comparisons and ``__contains__`` (they read elements).
_ANY_TENSOR = frozenset({
    "prim::ListConstruct", "prim::ListUnpack", "prim::TupleConstruct", "prim::TupleUnpack", "prim::TupleIndex",
    "prim::Uninitialized", "prim::unchecked_cast", "prim::data", "prim::IfThenElse", "prim::DictConstruct",
    "prim::device", "prim::layout", "prim::is_cuda", "prim::is_nested", "prim::requires_grad", "prim::shape",
    "prim::RaiseException", "aten::warn",
    "aten::size", "aten::size.int", "aten::dim", "aten::numel", "aten::len.t", "aten::len.Tensor", "aten::len.any",
    "aten::is_floating_point",   # quantized tensors are not floating point, nor are their stored integers
    "aten::__getitem__.t", "aten::select.t", "aten::slice.t", "aten::list.t", "aten::append.t", "aten::_set_item.t",
    "aten::insert.t", "aten::pop.t", "aten::extend.t", "aten::clear.t", "aten::reverse.t", "aten::add.t",
    "aten::add_.t", "aten::mul.left_t", "aten::mul.right_",
    *(f"aten::{op}.Dict_{k}" for op in ("__getitem__", "len") for k in _DICT_KEYS),
    *(f"aten::_set_item.{k}" for k in _DICT_KEYS),
    *(op.format(k) for k in _DICT_KEYS for op, _impl in _DICT_METHODS),
})

KERNELS: list[Kernel] = [_k(op, impl, ANY + (ANY_QUANTIZED,) if op in _ANY_TENSOR else ANY, kind="native")
                         for op, impl in _OPS]

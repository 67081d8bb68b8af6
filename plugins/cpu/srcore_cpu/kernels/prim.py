"""Structural ops of TorchScript graphs: lists, tuples, tensor metadata, exceptions, format.

All natives on Python values (lists are Python lists, tuples Python tuples).
List-mutating ops (``aten::append``, ``aten::_set_item``) mutate their list
argument and return it, as TorchScript does.
"""
from __future__ import annotations

import re

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import DTYPE_TO_SCALAR_TYPE_CODE


def list_construct(*elems):
    """``prim::ListConstruct``: a new list of the inputs."""
    return list(elems)


def list_unpack(lst):
    """``prim::ListUnpack``: the elements as a tuple (one per output)."""
    return tuple(lst)


def tuple_construct(*elems):
    return tuple(elems)


def tuple_unpack(tup):
    return tuple(tup)


def tuple_index(tup, i):
    return tup[i]


def dtype(a):
    """``prim::dtype``: the torch ScalarType code of a tensor's dtype (float32 -> 6)."""
    return DTYPE_TO_SCALAR_TYPE_CODE[a.dtype.name]


def device(a):
    return "cpu"


def raise_exception(msg, cls=None):
    """``prim::RaiseException``: a KernelError carrying TorchScript's message (and exception class)."""
    raise KernelError(f"{cls}: {msg}" if cls else str(msg))


def warn(message, stacklevel=2):
    """``aten::warn`` (``warnings.warn`` in a scripted model, e.g. inside ``F.affine_grid``): a
    Python ``UserWarning``, as TorchScript gives."""
    import warnings

    warnings.warn(str(message), UserWarning, stacklevel=2)


def uninitialized():
    return None


def identity(x):
    """``prim::unchecked_cast`` and friends: the value itself."""
    return x


def size(self, dim=None):
    """``aten::size`` (a list of ints) / ``aten::size.int``."""
    if dim is None:
        return list(self.shape)
    nd = self.ndim
    if not -nd <= dim < nd:
        if nd == 0:
            raise KernelError(f"dimension specified as {dim} but tensor has no dimensions")
        raise KernelError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    return self.shape[dim]


def is_floating_point(self):
    """``aten::is_floating_point``: a float16/32/64 tensor (as torch: complex is not)."""
    return self.dtype.kind == "f"


def dim(self):
    return self.ndim


def numel(self):
    return int(self.size)


def len_(a):
    """``aten::len`` (list, str, Tensor: the first dimension)."""
    if hasattr(a, "ndim"):
        if a.ndim == 0:
            raise KernelError("len() of a 0-d tensor")
        return a.shape[0]
    return len(a)


def getitem(lst, idx):
    """``aten::__getitem__.t`` / ``aten::select.t``: negative indices count from the end."""
    try:
        return lst[idx]
    except IndexError as exc:
        raise KernelError(f"list index {idx} out of range for a list of {len(lst)} elements") from exc


def list_slice(l, start=None, end=None, step=1):
    return l[start:end:step]


def list_copy(l):
    """``aten::list.t``: a shallow copy."""
    return list(l)


def append(self, el):
    self.append(el)
    return self


def dict_getitem(d, key):
    """``aten::__getitem__.Dict_*``: ``d[key]`` (e.g. a ``Dict[str, Tensor]`` input's features)."""
    try:
        return d[key]
    except KeyError:
        raise KernelError(f"KeyError: {key!r} (the dict has keys {list(d)})") from None


def set_item(l, idx, el):
    """``aten::_set_item.t``."""
    l[idx] = el
    return l


def insert(self, idx, el):
    self.insert(idx, el)


def pop(self, idx=-1):
    return self.pop(idx)


def extend(self, other):
    self.extend(other)


def clear(self):
    self.clear()


def reverse(self):
    self.reverse()


def list_iadd(self, other):
    """``aten::add_.t`` (``l += other``): extends ``self`` and returns it (``extend`` returns None)."""
    self.extend(other)
    return self


def list_add(a, b):
    """``aten::add.t``: concatenation into a new list."""
    return list(a) + list(b)


def list_mul(l, n):
    """``aten::mul.left_t``."""
    return list(l) * n


def list_rmul(n, l):
    """``aten::mul.right_``."""
    return n * list(l)


def contains(l, item):
    return item in l


def list_index(self, el):
    try:
        return self.index(el)
    except ValueError as exc:
        raise KernelError(f"'{el}' is not in list") from exc


_FIELD = re.compile(r"\{\}")


def format(self, *args):
    """``aten::format``: TorchScript's ``"{}".format(...)`` (positional ``{}`` fields only)."""
    it = iter(args)

    def repl(_m):
        v = next(it, "")
        if isinstance(v, bool):
            return "True" if v else "False"
        return str(v)

    return _FIELD.sub(repl, self)


class _ByIdentity:
    """An array as a dict key: torch hashes and compares tensor keys by identity."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _ByIdentity) and other.obj is self.obj


def _key(k):
    return _ByIdentity(k) if isinstance(k, np.ndarray) else k


class ScriptDict(dict):
    """A TorchScript dict: str/int/float/bool keys by value, tensor (array) keys by identity, as torch's."""

    def __init__(self, items=()):
        super().__init__((_key(k), v) for k, v in items)

    def __getitem__(self, key):
        return super().__getitem__(_key(key))

    def __setitem__(self, key, value):
        super().__setitem__(_key(key), value)

    def __contains__(self, key):
        return super().__contains__(_key(key))

    def __iter__(self):
        return (k.obj if isinstance(k, _ByIdentity) else k for k in super().__iter__())

    def keys(self):
        return list(self)

    def items(self):
        return list(zip(self, self.values()))

    def copy(self):
        return ScriptDict(self.items())

    def __repr__(self):
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.items()) + "}"


# -- dict methods: on ScriptDicts and on the plain dicts callers pass (str/int/float/bool keys) ----------
def dict_items(d):
    """``aten::items``: ``[(key, value), ...]`` in insertion order."""
    return [(k, d[k]) for k in d]


def dict_keys(d):
    return list(d)


def dict_values(d):
    return [d[k] for k in d]


def dict_get(d, key, default_value=None):
    """``aten::get`` (``d.get(k)`` is None when missing, ``d.get(k, v)`` is v)."""
    return d[key] if key in d else default_value


_MISSING = object()


def dict_pop(d, key, default_value=_MISSING):
    if key in d:
        return dict.pop(d, _key(key))
    if default_value is _MISSING:
        raise KernelError(f"KeyError: {key!r} (the dict has keys {list(d)})")
    return default_value


def dict_popitem(d):
    if not d:
        raise KernelError("popitem(): dictionary is empty")
    k, v = dict.popitem(d)
    return (k.obj if isinstance(k, _ByIdentity) else k, v)


def dict_setdefault(d, key, default_value):
    if key not in d:
        d[key] = default_value
    return d[key]


def dict_update(d, to_add):
    for k in list(to_add):
        d[k] = to_add[k]


def dict_delete(d, key):
    """``aten::Delete.Dict_*``: ``del d[key]``."""
    if key not in d:
        raise KernelError(f"KeyError: {key!r} (the dict has keys {list(d)})")
    dict.__delitem__(d, _key(key))


def dict_copy(d):
    """``aten::copy.Dict_*`` / ``aten::dict.Dict_*``: a shallow copy."""
    return ScriptDict(dict_items(d))


def dict_from_items(inputs):
    """``aten::dict.<key>``: ``dict([(k, v), ...])``."""
    return ScriptDict(inputs)


def dict_construct(*kv):
    """``prim::DictConstruct``: a dict from alternating key, value inputs."""
    return ScriptDict(zip(kv[0::2], kv[1::2]))


def shape(self):
    """``prim::shape``: the sizes as a list of ints."""
    return list(self.shape)


def layout(a):
    """``prim::layout``: torch.strided (0), the only layout here."""
    return 0


def false(*args):
    """``prim::is_cuda``, ``prim::is_nested``, ``prim::requires_grad``, ``aten::is_grad_enabled``, ...."""
    return False


def device_type(device):
    """``prim::type``: the device type ("cpu" of "cpu:0")."""
    return str(device).split(":")[0]


def list_sort(self, reverse=False):
    """``aten::sort.int`` / ``.float`` / ``.bool`` / ``.any``: sorts the list in place, returns nothing."""
    self.sort(reverse=reverse)


def list_imul(l, n):
    """``aten::mul_.t``: repeat the list ``n`` times in place."""
    l[:] = l * n if n > 0 else []
    return l


def tensor_list_eq(a, b):
    """``aten::eq.Tensor_list``: same length and every pair of tensors equal."""
    return len(a) == len(b) and all(x.shape == y.shape and bool((x == y).all()) for x, y in zip(a, b))


def tensor_list_ne(a, b):
    return not tensor_list_eq(a, b)


def if_then_else(cond, x, y):
    """``prim::IfThenElse``: ``x if cond else y``."""
    return x if cond else y


def tolist(self, dim, elem_type):
    """``prim::tolist(self, dim, elem_type)``: nested Python lists (elem_type 0 int, 1 float, 2 bool)."""
    if self.ndim != dim:
        raise KernelError(f"Output annotation list dimension and runtime tensor dimension must match for "
                          f"tolist() (got {dim} and {self.ndim})")
    want = {0: "iu", 1: "f", 2: "b"}.get(elem_type, "")
    if self.dtype.kind not in want:
        names = {0: "int", 1: "float", 2: "bool"}
        raise KernelError(f"Output annotation element type and runtime tensor element type must match for "
                          f"tolist(): {names.get(elem_type, elem_type)} vs {self.dtype}")
    return self.tolist()


def str_list(t):
    """``aten::list(str t)``: the characters of a string."""
    return list(t)


def str_(elem):
    """``aten::str``: TorchScript's ``str(x)`` of an int, float, bool or str (``"h" + str(i)`` dict
    keys). torch's own op, which the fallback called, takes no int: 'Expected a value of type 't'."""
    return format("{}", elem)


def str_slice(string, start=None, end=None, step=1):
    """``aten::slice.str``: ``string[start:end:step]``."""
    return string[start:end:step]

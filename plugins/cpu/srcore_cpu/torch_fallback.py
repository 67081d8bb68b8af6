"""The torch fallback: any ``aten::`` op without a numpy kernel runs through ``torch.ops.aten`` (slowly).

Static Runtime falls back to the JIT for ops it has no kernel for, TRTorch to
Torch; srcore-cpu falls back to torch's own kernel. One generic ``fallback``
kernel (``"aten::*"``) is registered when torch is importable (``pip install
'srcore-cpu[torch]'``); dispatch tries it after every out and native kernel of
every listed backend, and its matcher binds the node's overload at load:
``torch.ops.aten.<name>.<overload>``, with one converter per argument chosen
from the schema (numpy arrays <-> tensors sharing memory, ScalarType codes
<-> torch dtypes, ...). It declines ops torch does not have. torch is
imported only when a model needs the fallback (or its shape rule).

The shape rule (:func:`meta_rule`, for ``"aten::*"``, used only for ops
without a rule of their own) runs the overload on torch's ``meta`` tensors:
exact types when every input's dtype and shape is known, the dtype and rank
otherwise, the node's declared types when torch cannot tell.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from srcore.plugin import QDTYPES, SCALAR_TYPE_CODES, KernelError

#: torch's MemoryFormat and Layout codes, as TorchScript graphs carry them
_MEMORY_FORMATS = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")
_LAYOUTS = {0: "strided", 1: "sparse_coo", 2: "sparse_csr"}


@functools.lru_cache(maxsize=1)
def _torch():
    import torch

    return torch


def _overload(schema):
    """``torch.ops.aten.<name>.<overload>`` for ``schema``, or None if torch has no such overload."""
    if schema is None or schema.namespace != "aten":
        return None
    torch = _torch()
    try:
        packet = getattr(torch.ops.aten, schema.base_name)
        op = getattr(packet, schema.overload_name or "default")
    except (AttributeError, RuntimeError):
        return None
    if len(op._schema.arguments) != len(schema.arguments):  # a different signature: do not guess
        return None
    return op


# -- argument conversion -----------------------------------------------------------------------------
def _type_name(t) -> tuple[str, str]:
    """(container kind, element name) of a schema type: ("", "Tensor"), ("list", "int"), ("opt", ...)."""
    kind = type(t).__name__
    if kind == "OptionalType":
        inner_kind, name = _type_name(t.elem)
        return ("opt_" + inner_kind if inner_kind else "opt"), name
    if kind == "ListType":
        return "list", _type_name(t.elem)[1]
    return "", getattr(t, "name", kind)


def _to_tensor(a):
    torch = _torch()
    if getattr(a, "qparams", None) is not None:   # a QuantizedArray: as a plain tensor it would lose its scale
        raise KernelError(f"the torch fallback does not take quantized tensors (a {a.qdtype} argument); "
                          f"put quantized_cpu in the backend list")
    if isinstance(a, np.ndarray):
        if not a.flags.writeable or any(s < 0 for s in a.strides):  # mapped parameters, reversed views
            a = np.array(a)
        if a.dtype.name == "bfloat16":   # ml_dtypes' bfloat16, which torch.from_numpy does not know: its bits
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)
    if isinstance(a, np.generic):
        return torch.from_numpy(np.asarray(a))
    return a


def _to_dtype(code):
    if code is None:
        return None
    name = SCALAR_TYPE_CODES.get(code, code) if isinstance(code, int) else code
    return getattr(_torch(), name)


def _element_converter(name: str) -> Callable[[Any], Any] | None:
    torch = _torch()
    if name == "Tensor":
        return _to_tensor
    if name == "ScalarType":
        return _to_dtype
    if name == "MemoryFormat":
        return lambda c: getattr(torch, _MEMORY_FORMATS[c]) if isinstance(c, int) else c
    if name == "Layout":
        return lambda c: getattr(torch, _LAYOUTS[c]) if isinstance(c, int) else c
    if name == "Device":
        return lambda d: torch.device(d) if isinstance(d, str) else d
    if name in ("Scalar", "int", "float", "bool", "complex", "number", "SymInt"):
        return lambda x: x.item() if isinstance(x, np.generic) else (_to_tensor(x) if isinstance(x, np.ndarray)
                                                                       else x)
    return None


def _converter(t) -> Callable[[Any], Any] | None:
    kind, name = _type_name(t)
    elem = _element_converter(name)
    if elem is None:
        return None
    if kind.endswith("list"):  # int[1] may come as one int (torch repeats it as the schema does)
        return lambda xs: xs if xs is None or not isinstance(xs, (list, tuple)) else \
            [None if x is None else elem(x) for x in xs]
    if kind.startswith("opt"):
        return lambda x: None if x is None else elem(x)
    return elem


def _from_torch(x):
    torch = _torch()
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:   # as ml_dtypes' bfloat16, the type srcore holds it in
            import ml_dtypes

            return x.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return x.detach().numpy() if not x.is_conj() else x.resolve_conj().detach().numpy()
    if isinstance(x, tuple):
        return tuple(_from_torch(e) for e in x)
    if isinstance(x, list):
        return [_from_torch(e) for e in x]
    if isinstance(x, torch.dtype):
        return next((c for c, n in SCALAR_TYPE_CODES.items() if getattr(torch, n, None) == x), x)
    return x


def _is_quantized(t) -> bool:
    if getattr(t, "dtype", None) in QDTYPES:
        return True
    return any(_is_quantized(e) for e in (getattr(t, "elems", None) or (getattr(t, "elem", None),)) if e is not None)


def match(node):
    """The fallback for one node: ``torch.ops.aten.<op>`` with its arguments converted, or None to decline."""
    op = _overload(node.schema)
    from srcore.plugin import TensorType

    types = (*(a.type for a in node.args), *node.output_types)
    if op is None or any(_is_quantized(t) for t in types):
        return None   # quantized values need their parameters: the quantized_cpu kernels, not torch's
    if any(isinstance(t, TensorType) and t.dtype in _TORCH_STORAGE_ONLY for t in types):
        return None   # torch has these types but computes little on them: a clear "no kernel" at load

    converters = []
    for a in node.schema.arguments:
        conv = _converter(a.type)
        converters.append((a.name if a.kwarg_only else None, conv))

    n_pos = sum(1 for kw, _ in converters if kw is None)
    pos = [c for kw, c in converters if kw is None]
    kw_conv = {kw: c for kw, c in converters if kw is not None}

    def fallback(*args, **kwargs):
        targs = [c(a) if c is not None else a for c, a in zip(pos, args)] + list(args[n_pos:])
        tkwargs = {k: (kw_conv[k](v) if kw_conv.get(k) is not None else v) for k, v in kwargs.items()}
        with _torch().inference_mode():
            return _from_torch(op(*targs, **tkwargs))

    fallback.__name__ = f"torch_fallback_{node.schema.base_name}"
    fallback.__qualname__ = f"torch.ops.aten.{node.schema.qualified_name.split('::', 1)[1]}"
    return fallback


def fallback_impl(*args, **kwargs):
    """The unspecialised kernel (never called: the matcher always answers or declines)."""
    raise KernelError("the torch fallback kernel runs only through its matcher")


# -- shape rule ---------------------------------------------------------------------------------------
def meta_rule(ctx):
    """Output types of an aten op from torch's meta kernels (the declared types when torch cannot tell)."""
    declared = [o.type for o in ctx.node.outputs]
    try:
        op = _overload(ctx.node.schema)
    except ImportError:
        return declared
    if op is None:
        return declared
    try:
        return _meta_types(ctx, op) or declared
    except Exception:  # torch has no meta kernel for it, or arguments we do not know: keep what we have
        return declared


def _meta_types(ctx, op):
    from srcore.plugin import TensorType

    torch = _torch()
    schema = ctx.node.schema
    exact = True
    args, kwargs = [], {}
    for i, a in enumerate(schema.arguments):
        arg = ctx.arg(i, a.name)
        if arg is None:
            if a.default is None:
                return None
            value = a.default.value
        elif isinstance(arg.type, TensorType):
            t = arg.type
            if t.dtype is None or t.shape is None or t.dtype not in _TORCH_DTYPES:
                return None
            dims = [d if isinstance(d, int) else 3 for d in t.shape]
            exact = exact and all(isinstance(d, int) for d in t.shape)
            value = torch.empty(dims, dtype=getattr(torch, t.dtype), device="meta")
        else:
            value = arg.known
            if value is _unknown():
                return None
            conv = _converter(a.type)
            value = conv(value) if conv is not None and value is not None else value
        if a.kwarg_only:
            kwargs[a.name] = value
        else:
            args.append(value)
    with torch.inference_mode():
        out = op(*args, **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(ctx.node.outputs) or not all(isinstance(o, torch.Tensor) for o in outs):
        return None
    types = []
    for o in outs:
        dtype = str(o.dtype).removeprefix("torch.")
        types.append(TensorType(dtype, tuple(o.shape) if exact else tuple(None for _ in o.shape)))
    return types


#: dtypes torch stores but whose arithmetic it mostly lacks ("add_stub not implemented for UInt16")
_TORCH_STORAGE_ONLY = frozenset({"uint16", "uint32", "uint64", "int4", "uint4", "float8_e5m2", "float8_e4m3fn",
                                 "float8_e5m2fnuz", "float8_e4m3fnuz"})
_TORCH_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
                           "uint8", "bool", "complex64", "complex128"})


@functools.lru_cache(maxsize=1)
def _unknown():
    from srcore.plugin import UNKNOWN

    return UNKNOWN

"""Turning an OpInfo sample (a Python-level call) into a call of one aten overload, for srcore and torch.

OpInfo samples call the public Python function (``F.batch_norm(x, mean, var)``,
``torch.einsum(eq, *ts)``, ``F.max_pool2d(x, 2, return_indices=False)``); the
cpu plugin's kernels implement aten overloads. :func:`bind` maps a sample
onto an overload's schema (defaults filled in) or raises :class:`Skip` when it
cannot be expressed in srcore's calling convention.
"""
from __future__ import annotations

import inspect

import torch

_TORCH_TO_CODE = {torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
                  torch.float16: 5, torch.float32: 6, torch.float64: 7, torch.bool: 11}
# c10::MemoryFormat codes; channels_last layouts have no numpy counterpart
_MEMORY_FORMAT = {torch.contiguous_format: 0, torch.preserve_format: 1}

#: kwargs of the Python function whose given value is what the aten overload does anyway
NOOP_KWARGS = {"return_indices": False, "as_tuple": False, "requires_grad": False}
#: arguments of private overloads (``_softmax``) the public function does not take, with the value it implies
EXTRA_DEFAULTS = {"half_to_float": False}


class Skip(Exception):
    """This sample cannot be expressed in srcore's calling convention (or torch rejects it)."""


def to_srcore(v):
    """A torch argument as a srcore kernel receives it (numpy array, dtype code, list, scalar)."""
    if isinstance(v, torch.Tensor):
        if v.is_quantized or v.is_sparse or v.dtype not in _TORCH_TO_CODE:
            raise Skip(f"tensor {v.dtype}")
        return v.detach().clone().numpy()
    if isinstance(v, torch.dtype):
        if v not in _TORCH_TO_CODE:
            raise Skip(f"dtype {v}")
        return _TORCH_TO_CODE[v]
    if isinstance(v, torch.device):
        return str(v)
    if isinstance(v, torch.memory_format):
        if v not in _MEMORY_FORMAT:
            raise Skip(f"memory format {v}")
        return _MEMORY_FORMAT[v]
    if isinstance(v, torch.layout):
        raise Skip("layout argument")
    if isinstance(v, (list, tuple)):
        return [to_srcore(x) for x in v]
    return v


def _functional(fn, order, extra):
    """An adapter binding a call of the Python function ``fn`` and listing its values in aten ``order``."""
    sig = inspect.signature(fn)

    def adapt(args, kwargs):
        try:
            b = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise Skip(f"adapter: {e}") from None
        b.apply_defaults()
        vals = dict(b.arguments) | extra
        return [vals[n] for n in order], {}
    return adapt


_CONV = ["input", "weight", "bias", "stride", "padding", "dilation", "groups"]
_CONV_DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}


def _convolution(flags):
    """``F.conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)`` -> ``aten::convolution``."""
    def adapt(args, kwargs):
        vals = dict(_CONV_DEFAULTS) | dict(zip(_CONV, args)) | kwargs
        x = vals["input"]
        if isinstance(vals["padding"], str):
            raise Skip("string padding (not an aten::convolution argument)")
        n = x.ndim - 2 if x.ndim == vals["weight"].ndim else x.ndim - 1  # unbatched input

        def lst(v):
            return list(v) if isinstance(v, (list, tuple)) else [v] * n
        pos = [x, vals["weight"], vals["bias"], lst(vals["stride"]), lst(vals["padding"]),
               lst(vals["dilation"]), False, [0] * n, vals["groups"]]
        return pos + [False] * flags, {}  # benchmark, deterministic, cudnn_enabled(, allow_tf32)
    return adapt


def _dropout(fn):
    """``F.dropout(input, p, training)`` -> ``aten::dropout(input, p, train)``; training with p > 0 is random."""
    base = _functional(fn, ["input", "p", "training"], {})

    def adapt(args, kwargs):
        pos, kw = base(args, kwargs)
        if pos[2] and pos[1] > 0:
            raise Skip("training-mode dropout (random)")
        return pos, kw
    return adapt


def _max_pool_with_indices(args, kwargs):
    """``F.adaptive_max_pool2d(x, size, return_indices)``: the aten op always returns the indices too."""
    kwargs = {k: v for k, v in kwargs.items() if k != "return_indices"}
    return args[:2], kwargs


def _bn_no_training(args, kwargs):
    """``_native_batch_norm_legit(x, w, b, mean, var, training, momentum, eps)`` without ``training``."""
    if kwargs or len(args) != 8 or args[5] or args[3] is None:
        raise Skip("training-mode batch norm")
    return [*args[:5], *args[6:]], {}


def _upsample(align_corners, vec):
    """``F.upsample_nearest/bilinear(x, size, scale_factor)`` -> ``aten::upsample_*2d[.vec]`` (4-D inputs)."""
    def adapt(args, kwargs):
        vals = dict(zip(["input", "size", "scale_factor"], args)) | kwargs
        x, size, scale = vals["input"], vals.get("size"), vals.get("scale_factor")
        if x.ndim != 4:
            raise Skip("upsample_*2d takes a 4-D input")
        size = None if size is None else [int(v) for v in size] if isinstance(size, (list, tuple)) else [size] * 2
        scale = None if scale is None else list(scale) if isinstance(scale, (list, tuple)) else [scale] * 2
        ac = [True] if align_corners else []
        if vec:
            return [x, size, *ac, scale], {}
        if size is None:
            raise Skip("upsample_*2d (not .vec) takes an output size")
        return [x, size, *ac], {}
    return adapt


def _interpolate(mode, nd, vec):
    """``F.interpolate(x, size, scale_factor, mode, align_corners)`` (or ``F.upsample_nearest(x, size,
    scale_factor)``) -> ``aten::upsample_<mode><nd>d[.vec]``, for the samples of that mode and rank."""
    linear = mode in ("linear", "bicubic", "trilinear")

    def adapt(args, kwargs):
        vals = dict(zip(["input", "size", "scale_factor", "mode", "align_corners"], args)) | kwargs
        x, size, scale = vals["input"], vals.get("size"), vals.get("scale_factor")
        if vals.get("mode", "nearest") != mode or x.ndim != nd + 2:
            raise Skip(f"another mode or rank than upsample_{mode}{nd}d's")
        if vals.get("antialias") or vals.get("recompute_scale_factor"):
            raise Skip("antialias / recompute_scale_factor (not an argument of the aten op)")
        size = None if size is None else [int(v) for v in size] if isinstance(size, (list, tuple)) else [size] * nd
        scale = None if scale is None else list(scale) if isinstance(scale, (list, tuple)) else [scale] * nd
        ac = [bool(vals.get("align_corners"))] if linear else []
        if vec:
            return [x, size, *ac, scale], {}
        if size is None:
            raise Skip(f"upsample_{mode}{nd}d (not .vec) takes an output size")
        return [x, size, *ac], {}
    return adapt


ADAPTERS = {
    "aten::batch_norm": _functional(
        torch.nn.functional.batch_norm,
        ["input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps", "cudnn_enabled"],
        {"cudnn_enabled": False}),
    "aten::instance_norm": _functional(
        torch.nn.functional.instance_norm,
        ["input", "weight", "bias", "running_mean", "running_var", "use_input_stats", "momentum", "eps",
         "cudnn_enabled"], {"cudnn_enabled": False}),
    # torch.einsum(equation, *operands): the sample's input is the operand list
    "aten::einsum": lambda args, kwargs: ([args[1], list(args[0]), *args[2:]], kwargs),
    "aten::convolution": _convolution(0),
    "aten::_convolution": _convolution(4),
    "aten::_convolution.deprecated": _convolution(3),
    "aten::dropout": _dropout(torch.nn.functional.dropout),
    "aten::alpha_dropout": _dropout(torch.nn.functional.alpha_dropout),
    "aten::feature_alpha_dropout": _dropout(torch.nn.functional.feature_alpha_dropout),
    "aten::adaptive_max_pool2d": _max_pool_with_indices,
    "aten::_native_batch_norm_legit_no_training": _bn_no_training,
    "aten::upsample_nearest2d": _upsample(False, False),
    "aten::upsample_nearest2d.vec": _upsample(False, True),
    "aten::upsample_bilinear2d": _upsample(True, False),
    "aten::upsample_bilinear2d.vec": _upsample(True, True),
    **{f"aten::upsample_{m}{n}d{ov}": _interpolate(m, n, bool(ov))
       for m, n in (("nearest", 1), ("nearest", 3), ("linear", 1), ("trilinear", 3), ("bicubic", 2))
       for ov in ("", ".vec")},
}

#: OpInfo names giving samples for an aten op of another name (after the ADAPTERS above)
INFO_ALIASES = {"convolution": ("conv1d", "conv2d", "conv3d"), "_convolution": ("conv1d", "conv2d", "conv3d"),
                "_native_batch_norm_legit_no_training": ("_native_batch_norm_legit",),
                "max_pool1d_with_indices": ("max_pool1d",), "max_pool2d_with_indices": ("max_pool2d",),
                "upsample_nearest2d": ("upsample_nearest",), "upsample_bilinear2d": ("upsample_bilinear",),
                "upsample_nearest1d": ("upsample_nearest", "interpolate"),
                "upsample_nearest3d": ("upsample_nearest", "interpolate"), "upsample_linear1d": ("interpolate",),
                "upsample_trilinear3d": ("interpolate",), "upsample_bicubic2d": ("interpolate",)}


def _is_scalar_type(t: str) -> bool:
    return t in ("number", "Optional[number]")


def bind(op, schema, args, kwargs):
    """Map a Python call onto the schema: (positional values, keyword-only values) with defaults."""
    args, kwargs = list(args), {k: v for k, v in kwargs.items() if NOOP_KWARGS.get(k, object()) is not v}
    if op in ADAPTERS:
        args, kwargs = ADAPTERS[op](args, kwargs)
    pos, kw = [], {}
    for a in schema.arguments:
        if a.kwarg_only:
            if a.name in kwargs:
                kw[a.name] = kwargs.pop(a.name)
            elif a.has_default_value():
                kw[a.name] = a.default_value
            continue
        if args:
            pos.append(args.pop(0))
        elif a.name in kwargs:
            pos.append(kwargs.pop(a.name))
        elif a.has_default_value():
            pos.append(a.default_value)
        elif a.name in EXTRA_DEFAULTS:
            pos.append(EXTRA_DEFAULTS[a.name])
        else:
            raise Skip(f"missing argument {a.name}")
    if args or kwargs:
        raise Skip(f"unmatched arguments {len(args)} positional, {sorted(kwargs)}")
    names = [a.name for a in schema.arguments if not a.kwarg_only]
    for a in schema.arguments:
        v = pos[names.index(a.name)] if a.name in names else kw.get(a.name)
        t = str(a.type)
        if isinstance(v, torch.Tensor) and "Tensor" not in t:
            # a Scalar overload (add.Scalar, clamp, pow.Tensor_Scalar) gets the sample's tensor operand as
            # a Python number (its first element), the same for torch and srcore; other non-tensor
            # arguments never come from a tensor in a srcore graph
            if not _is_scalar_type(t) or v.numel() == 0:
                raise Skip(f"tensor for non-tensor argument {a.name}")
            v = v.reshape(-1)[0].item()
        # Python accepts True for an int; TorchScript resolves ``std(x, True)`` to the bool overload
        if isinstance(v, bool) and "int" in t and "bool" not in t:
            raise Skip(f"bool for int argument {a.name}")
        if a.name in names:
            pos[names.index(a.name)] = v
        elif a.name in kw:
            kw[a.name] = v
    return pos, kw

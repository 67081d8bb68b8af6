"""torch's packed quantized weights, unpacked at conversion; the ops that take them, lowered.

A quantized linear or convolution in TorchScript takes its weight as an opaque object
(``LinearPackedParamsBase``, ``Conv2dPackedParamsBase``) in fbgemm's or oneDNN's layout. The converter
unpacks it through torch itself (``quantized::linear_unpack``, ``conv2d_unpack``, ``conv2d_stride``,
...) into a quantized weight parameter (with its scale and zero point, per channel or per tensor)
and a float bias, and each op that took the object becomes srcore's form with plain tensors
(``quantized::linear`` -> ``quantized::qlinear(X, W, B, scale, zero_point)``). Nothing is pickled.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs

from ..ir.types import INT, ListType

LINEAR = "__torch__.torch.classes.quantized.LinearPackedParamsBase"
CONV2D = "__torch__.torch.classes.quantized.Conv2dPackedParamsBase"
SUPPORTED = (LINEAR, CONV2D)


@attrs.frozen
class Packed:
    """An unpacked weight: srcore values for the weight and bias, and a convolution's settings."""

    kind: str                       # "linear" or "conv"
    weight: Any                     # srcore Value (quantized parameter)
    bias: Any                       # srcore Value (float parameter or None constant)
    stride: tuple = ()
    padding: tuple = ()
    dilation: tuple = ()
    groups: int = 1
    dims: int = 2                   # spatial dims of a convolution (1 or 2)


def class_name(obj) -> str:
    try:
        return obj._type().qualified_name()
    except Exception:  # not a TorchScript class object
        return type(obj).__name__


def unpack(torch, obj, name: str, constant: Callable[[str, Any], Any]) -> Packed:
    """``obj`` (a packed-params object) unpacked; ``constant(name, value)`` makes a srcore constant
    (a parameter for arrays). Raises ValueError naming an unsupported class."""
    cls = class_name(obj)
    if cls == LINEAR:
        w, b = torch.ops.quantized.linear_unpack(obj)
        if not w.is_quantized:
            raise ValueError(f"{cls} holds a {w.dtype} weight (fp16 dynamic linear), which srcore does not support")
        return Packed("linear", constant(f"{name}.weight", w), constant(f"{name}.bias", b))
    if cls == CONV2D:
        if torch.ops.quantized.conv2d_transpose(obj):
            raise ValueError(f"{cls}: transposed convolutions are not supported")
        w, b = torch.ops.quantized.conv2d_unpack(obj)
        dims = w.dim() - 2
        if dims not in (1, 2):
            raise ValueError(f"{cls}: a {dims}-d convolution is not supported")
        stride = tuple(torch.ops.quantized.conv2d_stride(obj))[-dims:]
        padding = tuple(torch.ops.quantized.conv2d_padding(obj))[-dims:]
        dilation = tuple(torch.ops.quantized.conv2d_dilation(obj))[-dims:]
        return Packed("conv", constant(f"{name}.weight", w), constant(f"{name}.bias", b), stride, padding,
                      dilation, int(torch.ops.quantized.conv2d_groups(obj)), dims)
    raise ValueError(f"packed parameters of type {cls} have no srcore equivalent (supported: "
                     f"{', '.join(c.rsplit('.', 1)[-1] for c in SUPPORTED)})")


#: torch op -> (srcore op, the packed input's position, kind of packed params it takes)
_LOWER = {
    "quantized::linear": ("quantized::qlinear", 1, "linear"),
    "quantized::linear_relu": ("quantized::qlinear_relu", 1, "linear"),
    "quantized::linear_dynamic": ("quantized::qlinear_dynamic", 1, "linear"),
    "quantized::linear_relu_dynamic": ("quantized::qlinear_relu_dynamic", 1, "linear"),
    "quantized::conv1d": ("quantized::qconv1d", 1, "conv"),
    "quantized::conv1d_relu": ("quantized::qconv1d_relu", 1, "conv"),
    "quantized::conv2d": ("quantized::qconv2d", 1, "conv"),
    "quantized::conv2d_relu": ("quantized::qconv2d_relu", 1, "conv"),
    "quantized::conv2d_add": ("quantized::qconv2d_add", 2, "conv"),
    "quantized::conv2d_add_relu": ("quantized::qconv2d_add_relu", 2, "conv"),
}


def lower(kind: str, inputs: list, make_const: Callable[[Any, Any], Any]) -> tuple[str, list]:
    """The srcore op and inputs for torch node ``kind`` whose inputs (srcore values, and Packed at the
    packed position) are ``inputs``; ``make_const(value, type)`` makes a constant. ValueError if the
    op takes packed parameters srcore does not handle."""
    entry = _LOWER.get(kind)
    if entry is None:
        raise ValueError(f"{kind} with packed parameters is not supported")
    op, pos, want = entry
    packed = inputs[pos]
    if not isinstance(packed, Packed) or packed.kind != want:
        raise ValueError(f"{kind} expects {want} packed parameters")
    rest = inputs[:pos] + inputs[pos + 1:]
    if want == "linear":
        # (X, packed, scale, zp) -> (X, W, B, scale, zp); dynamic: (X, packed, reduce_range) -> (X, W, B, rr)
        return op, [rest[0], packed.weight, packed.bias, *rest[1:]]
    if len(rest) != pos + 2:   # the old conv2d(qx, w, stride, padding, dilation, groups, scale, zp) form
        raise ValueError(f"{kind} with {len(inputs)} inputs (the legacy form) is not supported")
    ints = ListType(INT)
    settings = [make_const(list(packed.stride), ints), make_const(list(packed.padding), ints),
                make_const(list(packed.dilation), ints), make_const(packed.groups, INT)]
    if packed.dims == 1 and not op.startswith("quantized::qconv1d"):
        raise ValueError(f"{kind} got 1-d convolution parameters")
    return op, [*rest[:pos], packed.weight, packed.bias, *settings, *rest[pos:]]


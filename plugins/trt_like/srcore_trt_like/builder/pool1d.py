"""1-D pools (an audio net's ``MaxPool1d`` / ``AvgPool1d`` / ``AdaptiveAvgPool1d`` between its 1-D
convs) as the 2-D pool layers on the ``(N, C, 1, L)`` view, kernel ``(1, k)``: the same windows,
NaN and divisors as torch's 1-D ops, so the engine is not cut at every pool."""
from __future__ import annotations

from .nodes import Converter, NodeView


def _single(x) -> int:
    return int(x[0] if isinstance(x, (list, tuple)) else x)


def _on_view(v: NodeView, c: Converter, kind: str, **attrs) -> None:
    x = c.tensor(v.node.inputs[0])
    N, C, L = c.net.shape(x)
    out = v.out_shape()
    y = c.net.add("reshape", [x], (N, C, 1, L), v.source)
    y = c.net.add(kind, [y], (N, C, 1, out[-1]), v.source, **attrs)
    c.bind(v.node.outputs[0], c.net.add("reshape", [y], out, v.source))


def max_pool1d(v: NodeView, c: Converter) -> None:
    k, s = _single(v.const("kernel_size")), v.const("stride")
    _on_view(v, c, "max_pool2d", kernel=(1, k), stride=(1, _single(s) if s else k),
             padding=(0, _single(v.const("padding", 0))), dilation=(1, _single(v.const("dilation", 1))),
             ceil_mode=bool(v.const("ceil_mode", False)))


def avg_pool1d(v: NodeView, c: Converter) -> None:
    k, s = _single(v.const("kernel_size")), v.const("stride")
    _on_view(v, c, "avg_pool2d", kernel=(1, k), stride=(1, _single(s) if s else k),
             padding=(0, _single(v.const("padding", 0))), ceil_mode=bool(v.const("ceil_mode", False)),
             count_include_pad=bool(v.const("count_include_pad", True)), divisor_override=None)


def adaptive_avg_pool1d(v: NodeView, c: Converter) -> None:
    _on_view(v, c, "adaptive_avg_pool2d", output_size=(1, v.out_shape()[-1]))

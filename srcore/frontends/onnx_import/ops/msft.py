"""The float ``com.microsoft`` ops ONNX Runtime's graph optimizer writes into a model it saves
(``SessionOptions.optimized_model_filepath`` at the basic/extended levels, and the transformer
optimizer): ``FusedConv`` / ``FusedGemm`` (the op with its activation folded in), ``FusedMatMul``,
``Gelu``, ``BiasGelu``, ``FastGelu``, ``QuickGelu``. Each becomes the ATen ops it fused; the
activations take their parameters (FusedConv's ``activation_params``, FusedGemm's
``activation_alpha``/``_beta``) as onnxruntime's MLAS activations do (LeakyRelu: alpha; Clip: min,
max; HardSigmoid: alpha, beta). The hardware-specific level (``com.microsoft.nchwc``,
onnxruntime's own layout ops) stays unsupported: onnxruntime documents such files as not portable.
"""
from __future__ import annotations

from ..context import NodeContext, Unsupported
from ._util import table
from .nn import conv, gemm


def _activation(cx: NodeContext, y, params: list):
    """``y`` through the node's ``activation`` (absent: none) with its ``params``."""
    act = cx.attr("activation", None)
    if act is None or act == "":
        return y
    if act == "Relu":
        return cx.op("aten::relu", y)
    if act == "Tanh":
        return cx.op("aten::tanh", y)
    if act == "Sigmoid":
        return cx.op("aten::sigmoid", y)
    if act == "LeakyRelu":
        return cx.op("aten::leaky_relu", y, float(params[0]) if params else 0.01)
    if act == "Clip":
        if len(params) != 2:
            raise Unsupported(f"activation Clip with activation_params {params} (min and max expected)")
        return cx.op("aten::clamp", y, float(params[0]), float(params[1]))
    if act == "HardSigmoid":
        alpha, beta = (float(p) for p in (list(params) + [0.2, 0.5][len(params):])[:2])
        return cx.op("aten::clamp", cx.op("aten::add", cx.op("aten::mul", y, alpha), beta, 1), 0.0, 1.0)
    raise Unsupported(f"activation {act!r}")


def fused_conv(cx: NodeContext):
    y = conv(cx)
    if cx.has(3):   # Z: a sum fused before the activation (Conv + Add + Relu)
        y = cx.op("aten::add", y, cx.x(3), 1)
    return _activation(cx, y, list(cx.attr("activation_params", None) or []))


def fused_gemm(cx: NodeContext):
    """Gemm then the activation, its parameters as ``activation_alpha``/``_beta`` (those set)."""
    params = [cx.attr(k) for k in ("activation_alpha", "activation_beta") if cx.has_attr(k)]
    cx.attr("activation_gamma", None)   # no activation srcore maps takes a third
    return _activation(cx, gemm(cx), params)


def fused_matmul(cx: NodeContext):
    """``alpha * op(A) @ op(B)``, ``op`` the transpose of the last two dims where ``transA``/``transB``."""
    alpha = float(cx.attr("alpha", 1.0))
    if cx.attr("transBatchA", 0) or cx.attr("transBatchB", 0):
        raise Unsupported("transBatchA/transBatchB")
    a, b = cx.x(0), cx.x(1)
    if cx.attr("transA", 0):
        if cx.rank(0) < 2:
            raise Unsupported("transA of a 1-D input")
        a = cx.op("aten::transpose", a, -2, -1)
    if cx.attr("transB", 0):
        if cx.rank(1) < 2:
            raise Unsupported("transB of a 1-D input")
        b = cx.op("aten::transpose", b, -2, -1)
    y = cx.op("aten::matmul", a, b)
    return y if alpha == 1.0 else cx.op("aten::mul", y, alpha)


def _plus_bias(cx: NodeContext):
    return cx.op("aten::add", cx.x(0), cx.x(1), 1) if cx.has(1) else cx.x(0)


def ms_gelu(cx: NodeContext):
    return cx.op("aten::gelu", cx.x(0), "none")


def bias_gelu(cx: NodeContext):
    return cx.op("aten::gelu", _plus_bias(cx), "none")


def fast_gelu(cx: NodeContext):
    """The tanh approximation (onnxruntime's FastGelu), of ``x + bias`` when a bias is given."""
    return cx.op("aten::gelu", _plus_bias(cx), "tanh")


def quick_gelu(cx: NodeContext):
    x = cx.x(0)
    return cx.op("aten::mul", x, cx.op("aten::sigmoid", cx.op("aten::mul", x, float(cx.attr("alpha", 1.702)))))


CONVERTERS = table(FusedConv=(fused_conv, 1), FusedGemm=(fused_gemm, 1), FusedMatMul=(fused_matmul, 1),
                   Gelu=(ms_gelu, 1), BiasGelu=(bias_gelu, 1), FastGelu=(fast_gelu, 1), QuickGelu=(quick_gelu, 1))

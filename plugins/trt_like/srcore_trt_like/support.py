"""Which nodes a trt_like engine can hold: an op table, float32 tensors of known rank, and
constant values for the arguments the engine bakes in (strides, dims, weights of fused ops).

No numpy here: the partitioner asks this at every load, before any engine is built.
"""
from __future__ import annotations

from srcore.ir.types import TensorType
from srcore.plugin import NodeInfo

#: op (base name or full overload) -> the arguments that must be constants for the engine
SUPPORTED_OPS: dict[str, tuple[str, ...]] = {
    # pointwise (fused into one compiled kernel per group)
    "aten::add.Tensor": ("alpha",), "aten::add.Scalar": ("other", "alpha"),
    "aten::sub.Tensor": ("alpha",), "aten::sub.Scalar": ("other", "alpha"),
    "aten::rsub.Tensor": ("alpha",), "aten::rsub.Scalar": ("other", "alpha"),
    "aten::mul.Tensor": (), "aten::mul.Scalar": ("other",),
    "aten::div.Tensor": (), "aten::div.Scalar": ("other",),
    "aten::neg": (), "aten::abs": (), "aten::exp": (), "aten::log": (), "aten::sqrt": (), "aten::rsqrt": (),
    "aten::reciprocal": (), "aten::square": (), "aten::pow.Tensor_Scalar": ("exponent",),
    "aten::maximum": (), "aten::minimum": (),
    "aten::relu": (), "aten::relu6": (), "aten::sigmoid": (), "aten::tanh": (), "aten::silu": (),
    "aten::gelu": ("approximate",), "aten::hardtanh": ("min_val", "max_val"), "aten::clamp": ("min", "max"),
    "aten::leaky_relu": ("negative_slope",), "aten::elu": ("alpha", "scale", "input_scale"),
    "aten::hardswish": (), "aten::hardsigmoid": (), "aten::softplus": ("beta", "threshold"),
    "aten::mish": (), "srcore::add_relu": ("alpha",),
    "aten::dropout": ("p", "train"), "aten::contiguous": ("memory_format",),
    # convolution and pooling
    "aten::conv2d": ("weight", "bias", "stride", "padding", "dilation", "groups"),
    "aten::_convolution": ("weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding",
                           "groups"),
    "srcore::conv2d_relu": ("weight", "bias", "stride", "padding", "dilation", "groups"),
    "srcore::conv2d_add_relu": ("weight", "bias", "stride", "padding", "dilation", "groups"),
    "aten::max_pool2d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode"),
    "aten::avg_pool2d": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                         "divisor_override"),
    "aten::adaptive_avg_pool2d": ("output_size",),
    # matrix products (a constant weight is laid out once)
    "aten::linear": ("weight", "bias"),
    "srcore::linear_relu": ("weight", "bias"), "srcore::linear_gelu": ("weight", "bias", "approximate"),
    "srcore::linear_silu": ("weight", "bias"), "srcore::linear_tanh": ("weight", "bias"),
    "srcore::linear_sigmoid": ("weight", "bias"),
    "aten::matmul": (), "aten::mm": (), "aten::bmm": (), "aten::addmm": ("self", "mat2", "beta", "alpha"),
    # normalisation, reductions, layout
    "aten::softmax.int": ("dim", "dtype"), "aten::log_softmax.int": ("dim", "dtype"),
    "aten::layer_norm": ("normalized_shape", "weight", "bias", "eps"),
    "aten::mean.dim": ("dim", "keepdim", "dtype"),
    "aten::flatten.using_ints": ("start_dim", "end_dim"), "aten::view": ("size",), "aten::reshape": ("shape",),
    "aten::transpose.int": ("dim0", "dim1"), "aten::permute": ("dims",),
    "aten::select.int": ("dim", "index"), "aten::slice.Tensor": ("dim", "start", "end", "step"),
    "aten::_transformer_encoder_layer_fwd": (
        "embed_dim", "num_heads", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "use_gelu",
        "norm_first", "eps", "norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2", "ffn_weight_1",
        "ffn_bias_1", "ffn_weight_2", "ffn_bias_2", "mask", "mask_type"),
}

#: dtypes an engine computes in
ENGINE_DTYPES = ("float32",)


def supports(node: NodeInfo) -> bool:
    """True if ``node`` may go into a trt_like engine."""
    consts = SUPPORTED_OPS.get(node.op)
    if consts is None:
        return False
    if not _tensors_ok(node):
        return False
    for a in node.args:
        if a.name in consts and not a.is_constant:
            return False
    return _op_specific(node)


def _tensors_ok(node: NodeInfo) -> bool:
    types = [a.type for a in node.args] + list(node.output_types)
    tensors = [t for t in types if isinstance(t, TensorType)]
    if not node.output_types or not isinstance(node.output_types[0], TensorType):
        return False
    return all(t.dtype in ENGINE_DTYPES and t.shape is not None for t in tensors)


def _rank(node: NodeInfo, i: int) -> int:
    return len(node.args[i].type.shape)   # a tensor of known rank (checked by _tensors_ok)


def _op_specific(node: NodeInfo) -> bool:
    op = node.op
    if op in ("aten::dropout",):
        return node.const("train", True) is False
    if op == "aten::_convolution":
        return node.const("transposed") is False and len(node.const("stride")) == 2
    if op in ("aten::softmax.int", "aten::log_softmax.int", "aten::mean.dim"):
        return node.const("dtype", None) is None
    if op == "aten::_transformer_encoder_layer_fwd":
        return node.const("mask", None) is None and node.args[0].type.shape is not None \
            and len(node.args[0].type.shape) == 3
    if op in ("aten::conv2d", "srcore::conv2d_relu", "srcore::conv2d_add_relu", "aten::max_pool2d",
              "aten::avg_pool2d", "aten::adaptive_avg_pool2d"):
        # the conv and pool layers are NCHW; an unbatched (C, H, W) input runs on cpu
        return len(node.args[0].type.shape) == 4
    if op in ("aten::matmul", "aten::mm", "aten::bmm"):
        # the converter's forms: x @ constant 2-D weight (a GEMM layer), or two computed operands
        # of rank >= 2; matrix-vector products and a constant left operand run outside engines
        if node.args[0].is_constant:
            return False
        if node.args[1].is_constant:
            return _rank(node, 1) == 2 and _rank(node, 0) >= 1
        return _rank(node, 0) >= 2 and _rank(node, 1) >= 2
    if op in ("aten::gelu", "srcore::linear_gelu"):
        # another approximation is an error torch raises: the cpu kernel raises it (the engine computed erf's)
        return node.const("approximate", "none") in ("none", "tanh")
    if op == "aten::addmm":
        # a linear layer: constant 2-D mat2 (self and mat2 constant: SUPPORTED_OPS); alpha == 0:
        # torch does not read mat1 @ mat2 (its NaNs and infinities do not reach the result)
        return node.const("alpha", 1) != 0 and _rank(node, 2) == 2
    return True

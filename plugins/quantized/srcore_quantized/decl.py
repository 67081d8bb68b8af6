"""The kernels of backend ``quantized_cpu``, as records (``"module:attr"``: nothing imported here).

Out variants write their stored integers into the planned arena; natives return views or values.
Dtypes: a kernel lists the quantized dtypes it takes and the float32 of its float operands (biases,
norm parameters, the float side of quantize/dequantize), so that a node with a quantized value
dispatches here and a float node never does. Another plugin's ``"*"`` kernel (cpu's views, flip,
repeat, ...) never gets a quantized dtype (docs/static-dispatch.md): an op on quantized tensors
runs on a kernel here, or the load fails naming it; ops that never read elements (lists, sizes) are
cpu's, listed ``("*", "quantized")``.
"""
from __future__ import annotations

from srcore.plugin import Kernel

BACKEND = "quantized_cpu"
Q = ("quint8", "qint8", "qint32")
Q8 = ("quint8", "qint8")
F = ("float32",)
FLOATS = ("float32", "float64")

_K = "srcore_quantized.kernels."


def _k(op: str, ref: str, dtypes, kind: str = "out") -> Kernel:
    return Kernel(op, BACKEND, kind, dtypes, _K + ref)


KERNELS: list[Kernel] = [
    # float <-> quantized
    _k("aten::quantize_per_tensor", "convert:quantize_per_tensor_out", FLOATS + Q),
    _k("aten::quantize_per_tensor.tensor_qparams", "convert:quantize_per_tensor_out", FLOATS + Q + ("int64", "int32")),
    _k("aten::quantize_per_channel", "convert:quantize_per_channel_out", FLOATS + Q + ("int64", "int32")),
    _k("aten::quantize_per_tensor_dynamic", "convert:quantize_per_tensor_dynamic_out", FLOATS + Q),
    _k("aten::dequantize.self", "convert:dequantize_out", F + Q),
    _k("aten::dequantize.tensors", "convert:dequantize_list", F + Q, "native"),
    _k("aten::dequantize.list", "convert:dequantize_list", F + Q, "native"),
    _k("aten::int_repr", "convert:int_repr_out", Q + ("uint8", "int8", "int32")),
    _k("aten::q_scale", "convert:q_scale", Q, "native"),
    _k("aten::q_zero_point", "convert:q_zero_point", Q, "native"),
    _k("aten::_make_per_tensor_quantized_tensor", "convert:make_per_tensor_quantized_tensor",
       Q + ("uint8", "int8", "int32"), "native"),
    # quantized:: arithmetic
    _k("quantized::add", "binary:add_out", Q),
    _k("quantized::add_relu", "binary:add_relu_out", Q),
    _k("quantized::add_channels_last", "binary:add_channels_last_out", Q),
    _k("quantized::add_relu_channels_last", "binary:add_relu_channels_last_out", Q),
    _k("quantized::add_mixed_layout", "binary:add_mixed_layout_out", Q),
    _k("quantized::add_relu_mixed_layout", "binary:add_relu_mixed_layout_out", Q),
    _k("quantized::mul", "binary:mul_out", Q),
    _k("quantized::mul_relu", "binary:mul_relu_out", Q),
    *[_k(f"quantized::{op}", "binary:add_scalar_out", Q + F)
      for op in ("add.Scalar", "add_scalar", "add_scalar.Tensor")],
    *[_k(f"quantized::{op}", "binary:add_scalar_relu_out", Q + F)
      for op in ("add_relu.Scalar", "add_scalar_relu", "add_scalar_relu.Tensor")],
    *[_k(f"quantized::{op}", "binary:mul_scalar_out", Q + F)
      for op in ("mul.Scalar", "mul_scalar", "mul_scalar.Tensor")],
    *[_k(f"quantized::{op}", "binary:mul_scalar_relu_out", Q + F)
      for op in ("mul_relu.Scalar", "mul_scalar_relu", "mul_scalar_relu.Tensor")],
    _k("quantized::cat", "binary:cat_out", Q),
    _k("quantized::cat_relu", "binary:cat_relu_out", Q),
    _k("aten::cat", "binary:aten_cat_out", Q),
    # quantized:: activations and norms (output parameters given)
    _k("quantized::hardswish", "activation:hardswish_out", Q8),
    _k("quantized::elu", "activation:elu_out", Q8),
    _k("quantized::sigmoid", "activation:quantized_sigmoid_out", Q8),
    _k("quantized::leaky_relu", "activation:quantized_leaky_relu", Q8, "native"),
    _k("quantized::relu6", "activation:quantized_relu6", Q, "native"),
    _k("quantized::batch_norm", "norm:batch_norm_out", Q8 + F),
    _k("quantized::batch_norm1d", "norm:batch_norm1d_out", Q8 + F),
    _k("quantized::batch_norm1d_relu", "norm:batch_norm1d_relu_out", Q8 + F),
    _k("quantized::batch_norm2d", "norm:batch_norm2d_out", Q8 + F),
    _k("quantized::batch_norm2d_relu", "norm:batch_norm2d_relu_out", Q8 + F),
    _k("quantized::layer_norm", "norm:layer_norm_out", Q8 + F),
    # linear / conv with unpacked weights
    _k("quantized::qlinear", "linear:qlinear_out", Q8 + F),
    _k("quantized::qlinear_relu", "linear:qlinear_relu_out", Q8 + F),
    _k("quantized::qlinear_dynamic", "linear:qlinear_dynamic_out", ("qint8",) + F),
    _k("quantized::lstm_dynamic", "recurrent:lstm_dynamic_out", ("qint8",) + F),
    _k("quantized::gru_dynamic", "recurrent:gru_dynamic_out", ("qint8",) + F),
    _k("quantized::qlinear_relu_dynamic", "linear:qlinear_relu_dynamic_out", ("qint8",) + F),
    *[_k(f"quantized::qconv{d}", "conv:qconv_out", Q8 + F) for d in ("1d", "2d")],
    *[_k(f"quantized::qconv{d}_relu", "conv:qconv_relu_out", Q8 + F) for d in ("1d", "2d")],
    _k("quantized::qconv2d_add", "conv:qconv_add_out", Q8 + F),
    _k("quantized::qconv2d_add_relu", "conv:qconv_add_relu_out", Q8 + F),
    _k("quantized::qconv2d_then_add", "conv:qconv_then_add_out", Q8 + F),
    _k("quantized::qconv_transpose2d", "conv:qconv_transpose_out", Q8 + F),
    # aten ops on quantized tensors (the output keeps the input's parameters, or torch's fixed ones)
    _k("aten::relu", "activation:relu_out", Q),
    _k("aten::relu_", "activation:relu_", Q, "native"),
    _k("aten::relu6", "activation:relu6_out", Q),
    _k("aten::hardtanh", "activation:hardtanh_out", Q),
    _k("aten::clamp", "activation:clamp_out", Q),
    _k("aten::leaky_relu", "activation:leaky_relu_out", Q8),
    _k("aten::sigmoid", "activation:sigmoid_out", Q8),
    _k("aten::hardsigmoid", "activation:hardsigmoid_out", Q8),
    _k("aten::tanh", "activation:tanh_out", Q8),
    _k("aten::max_pool2d", "pool:max_pool2d_out", Q),
    _k("aten::quantized_max_pool2d", "pool:max_pool2d_out", Q),
    _k("aten::avg_pool2d", "pool:avg_pool2d_out", Q),
    _k("aten::adaptive_avg_pool2d", "pool:adaptive_avg_pool2d_out", Q),
    _k("aten::_adaptive_avg_pool2d", "pool:adaptive_avg_pool2d_out", Q),
    _k("quantized::adaptive_avg_pool2d_channels_last", "pool:adaptive_avg_pool2d_channels_last_out", Q),
    _k("aten::mean.dim", "pool:mean_out", Q),
    _k("quantized::mean_channels_last", "channels_last:mean_channels_last_out", Q),
    _k("quantized::avg_pool2d_channels_last", "channels_last:avg_pool2d_channels_last_out", Q),
    _k("aten::upsample_nearest2d", "shape:upsample_nearest2d_out", Q),
    _k("aten::upsample_nearest2d.vec", "shape:upsample_nearest2d_vec", Q, "native"),
    _k("aten::clone", "shape:clone_out", Q),
    *[_k(op, "shape:" + fn, Q, "native") for op, fn in (
        ("aten::flatten.using_ints", "flatten"), ("aten::reshape", "reshape"), ("aten::view", "reshape"),
        ("aten::permute", "permute"), ("aten::transpose.int", "transpose"), ("aten::contiguous", "contiguous"),
        ("aten::squeeze", "squeeze"), ("aten::squeeze.dim", "squeeze"), ("aten::squeeze.dims", "squeeze"),
        ("aten::unsqueeze", "unsqueeze"), ("aten::slice.Tensor", "slice_"), ("aten::select.int", "select"),
        ("aten::dropout", "identity"), ("aten::detach", "identity"),
        ("aten::pixel_shuffle", "pixel_shuffle"), ("aten::pixel_unshuffle", "pixel_unshuffle"), ("aten::repeat", "repeat"),
        ("aten::chunk", "chunk"), ("aten::split.Tensor", "split"), ("aten::split.sizes", "split"),
        ("aten::split", "split"), ("aten::split_with_sizes", "split"), ("aten::unbind.int", "unbind"),
        ("aten::narrow", "narrow"), ("aten::expand", "expand"), ("aten::t", "t"),
        ("aten::view_as", "view_as"), ("aten::reshape_as", "view_as"), ("aten::expand_as", "expand_as"),
        ("aten::movedim.int", "movedim"), ("aten::movedim.intlist", "movedim"), ("aten::unflatten.int", "unflatten"))],
    _k("aten::flip", "shape:flip_out", Q),
    _k("aten::index_select", "shape:index_select_out", Q + ("int64", "int32")),
    _k("aten::stack", "shape:stack_out", Q),
]

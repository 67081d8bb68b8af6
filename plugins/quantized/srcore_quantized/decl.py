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
INDEX = ("int64", "int32")

_K = "srcore_quantized.kernels."


def _k(op: str, ref: str, dtypes, kind: str = "out", matcher: str | None = None) -> Kernel:
    return Kernel(op, BACKEND, kind, dtypes, _K + ref, matcher=None if matcher is None else _K + matcher)


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
    _k("quantized::add_qnnpack", "qnnpack:add_out", Q),
    _k("quantized::lut_qnnpack", "qnnpack:lut_out", Q8),
    _k("quantized::add_relu_qnnpack", "qnnpack:add_relu_out", Q),
    _k("quantized::avg_pool2d_qnnpack", "qnnpack:avg_pool2d_out", Q),
    _k("quantized::adaptive_avg_pool2d_qnnpack", "qnnpack:adaptive_avg_pool2d_out", Q),
    _k("quantized::mean_qnnpack", "qnnpack:mean_out", Q),
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
    _k("quantized::group_norm", "norm:group_norm_out", Q8 + F),
    _k("quantized::instance_norm", "norm:instance_norm_out", Q8 + F),
    _k("quantized::celu", "activation:celu_out", Q8),
    _k("quantized::softmax", "through_float:softmax_out", Q8),
    _k("quantized::matmul", "through_float:matmul_out", Q8),
    _k("quantized::prelu", "binary:prelu_out", Q8),
    _k("quantized::threshold", "activation:threshold_out", Q8),
    _k("quantized::clamp", "activation:quantized_clamp_out", Q),
    _k("quantized::dropout", "activation:quantized_dropout", Q, "native"),
    _k("quantized::batch_norm3d", "norm:batch_norm3d_out", Q8 + F),
    _k("aten::quantized_batch_norm", "norm:quantized_batch_norm_out", Q8 + F),
    _k("quantized::batch_norm3d_relu", "norm:batch_norm3d_relu_out", Q8 + F),
    _k("quantized::batch_norm_relu", "norm:batch_norm_relu_out", Q8 + F),
    _k("quantized::max_pool1d", "pool:max_pool1d_out", Q),
    _k("quantized::max_pool2d", "pool:max_pool2d_out", Q),
    # linear / conv with unpacked weights
    _k("quantized::qlinear", "linear:qlinear_out", Q8 + F),
    _k("quantized::qlinear_relu", "linear:qlinear_relu_out", Q8 + F),
    _k("quantized::qlinear_dynamic", "linear:qlinear_dynamic_out", ("qint8",) + F),
    _k("quantized::lstm_dynamic", "recurrent:lstm_dynamic_out", ("qint8",) + F),
    _k("quantized::gru_dynamic", "recurrent:gru_dynamic_out", ("qint8",) + F),
    _k("quantized::qlinear_relu_dynamic", "linear:qlinear_relu_dynamic_out", ("qint8",) + F),
    *[_k(f"quantized::qconv{d}", "conv:qconv_out", Q8 + F) for d in ("1d", "2d", "3d")],
    *[_k(f"quantized::qconv{d}_relu", "conv:qconv_relu_out", Q8 + F) for d in ("1d", "2d", "3d")],
    _k("quantized::qconv2d_add", "conv:qconv_add_out", Q8 + F),
    _k("quantized::qconv2d_add_relu", "conv:qconv_add_relu_out", Q8 + F),
    _k("quantized::qconv2d_then_add", "conv:qconv_then_add_out", Q8 + F),
    *[_k(f"quantized::qconv_transpose{d}", "conv:qconv_transpose_out", Q8 + F) for d in ("1d", "2d", "3d")],
    # row-wise quantized embeddings: fused uint8 rows, integer indices, float32 weights and results
    *[_k(f"quantized::{op}", f"embedding:{op}_out", ("uint8",) + INDEX + F) for op in (
        "embedding_bag_byte_rowwise_offsets", "embedding_bag_4bit_rowwise_offsets",
        "embedding_bag_2bit_rowwise_offsets", "qembedding_byte", "qembedding_4bit")],
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
    _k("aten::gelu", "activation:gelu_out", Q8),
    _k("aten::gelu_", "activation:gelu_", Q8, "native"),
    _k("aten::threshold", "activation:threshold_out", Q8),
    _k("aten::prelu", "binary:aten_prelu_out", Q8),
    # comparisons: a bool result; the matcher leaves bool and integer comparisons to cpu
    *[_k(f"aten::{c}.{o}", f"compare:{c}_out", Q + ("bool",) + FLOATS, matcher=f"match:{c}")
      for c in ("eq", "ne", "lt", "le", "gt", "ge") for o in ("Scalar", "Tensor")],
    _k("aten::max_pool2d", "pool:max_pool2d_out", Q),
    _k("aten::quantized_max_pool2d", "pool:max_pool2d_out", Q),
    _k("aten::avg_pool2d", "pool:avg_pool2d_out", Q),
    _k("aten::adaptive_avg_pool2d", "pool:adaptive_avg_pool2d_out", Q),
    _k("aten::_adaptive_avg_pool2d", "pool:adaptive_avg_pool2d_out", Q),
    _k("quantized::adaptive_avg_pool2d_channels_last", "pool:adaptive_avg_pool2d_channels_last_out", Q),
    _k("aten::mean.dim", "pool:mean_out", Q),
    _k("quantized::mean_channels_last", "channels_last:mean_channels_last_out", Q),
    _k("quantized::avg_pool2d_channels_last", "channels_last:avg_pool2d_channels_last_out", Q),
    _k("aten::max_pool1d", "pool:max_pool1d_out", Q),
    _k("aten::max_pool3d", "pool:max_pool3d_out", Q),
    _k("aten::avg_pool3d", "channels_last:avg_pool3d_out", Q),
    _k("aten::adaptive_avg_pool3d", "pool:adaptive_avg_pool3d_out", Q),
    _k("aten::avg_pool1d", "pool:avg_pool1d_out", Q),
    _k("aten::adaptive_avg_pool1d", "pool:adaptive_avg_pool1d_out", Q),
    _k("aten::mean", "pool:mean_out", Q),
    *[_k(f"aten::{op}", f"upsample:{fn}_out", Q) for op, fn in (
        ("upsample_nearest2d", "upsample_nearest2d"), ("upsample_nearest3d", "upsample_nearest3d"),
        ("_upsample_nearest_exact2d", "upsample_nearest_exact2d"),
        ("_upsample_nearest_exact3d", "upsample_nearest_exact3d"))],
    *[_k(f"aten::{op}.vec", f"upsample:{fn}_vec", Q, "native") for op, fn in (
        ("upsample_nearest2d", "upsample_nearest2d"), ("upsample_nearest3d", "upsample_nearest3d"),
        ("_upsample_nearest_exact2d", "upsample_nearest_exact2d"),
        ("_upsample_nearest_exact3d", "upsample_nearest_exact3d"))],
    _k("aten::upsample_bilinear2d", "upsample:upsample_bilinear2d_out", Q8),
    _k("aten::upsample_bilinear2d.vec", "upsample:upsample_bilinear2d_vec", Q8, "native"),
    _k("aten::equal", "compare:equal", Q + FLOATS, "native", matcher="match:equal"),
    *[_k(f"aten::{op}", "grid_sample:grid_sampler_2d_out", ("quint8", "float32"), matcher="match:grid_sampler")
      for op in ("grid_sampler", "grid_sampler_2d")],
    _k("aten::max", "reduce:max_out", Q),
    _k("aten::std", "reduce:std_out", Q),
    _k("aten::std.dim", "reduce:std_dim_out", Q),
    _k("aten::std.correction", "reduce:std_correction_out", Q),
    _k("quantized::std_channels_last", "reduce:std_channels_last_out", Q),
    _k("aten::min", "reduce:min_out", Q),
    _k("aten::amax", "reduce:amax_out", Q),
    _k("aten::amin", "reduce:amin_out", Q),
    _k("aten::max.dim", "reduce:max_dim", Q + ("int64",), "native", matcher="match:max_dim"),
    _k("aten::min.dim", "reduce:min_dim", Q + ("int64",), "native", matcher="match:min_dim"),
    _k("aten::sort.stable", "reduce:sort_stable", Q + ("int64",), "native", matcher="match:sort_stable"),
    _k("aten::sort", "reduce:sort_unstable", Q + ("int64",), "native", matcher="match:sort_unstable"),
    _k("aten::topk", "reduce:topk", Q + ("int64",), "native", matcher="match:topk"),
    _k("aten::argsort", "reduce:argsort", Q + ("int64",), "native", matcher="match:argsort"),
    _k("aten::argsort.stable", "reduce:argsort_stable", Q + ("int64",), "native", matcher="match:argsort_stable"),
    _k("aten::msort", "reduce:msort", Q, "native"),
    _k("aten::pad", "pad:pad_out", Q),
    _k("aten::constant_pad_nd", "pad:constant_pad_nd_out", Q),
    _k("aten::reflection_pad1d", "pad:reflection_pad_out", Q),
    _k("aten::reflection_pad2d", "pad:reflection_pad_out", Q),
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
    _k("aten::channel_shuffle", "shape:channel_shuffle_out", Q),
    _k("aten::stack", "shape:stack_out", Q),
    _k("aten::diagonal", "shape:diagonal", Q, "native"),
    _k("aten::unfold", "shape:unfold", Q, "native"),
    *[_k(f"aten::tensor_split.{o}", "shape:tensor_split", Q + INDEX, "native")
      for o in ("sections", "indices", "tensor_indices_or_sections")],
    # an index / mask / count dtype beside the quantized ones: the matcher leaves a node whose ``self`` is
    # not quantized (all int64, all bool) to cpu
    _k("aten::index_select", "shape:index_select_out", Q + INDEX, matcher="match:index_select"),
    *[_k(f"aten::index.{o}", "shape:index", Q + INDEX + ("bool", "uint8"), "native", matcher="match:index")
      for o in ("Tensor", "Tensor_hacked_twin")],
    *[_k(f"aten::repeat_interleave.{o}", "shape:repeat_interleave", Q + INDEX, "native",
         matcher="match:repeat_interleave") for o in ("self_int", "self_Tensor")],
    *[_k(f"aten::fill_.{o}", "shape:fill_", Q + FLOATS, "native", matcher="match:fill_") for o in ("Scalar", "Tensor")],
    _k("aten::index_put_", "shape:index_put_", Q + INDEX + ("bool", "uint8") + FLOATS, "native", matcher="match:index_put_"),
    _k("aten::index_put", "shape:index_put_out", Q + INDEX + ("bool", "uint8") + FLOATS, matcher="match:index_put"),
    *[_k(f"aten::masked_fill.{o}", "shape:masked_fill_out", Q + ("bool",) + FLOATS + INDEX, matcher="match:masked_fill")
      for o in ("Scalar", "Tensor")],
]

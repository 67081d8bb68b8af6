"""Kernel declarations of the attention family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.attention:"
FLOATS = ("float32", "float64")
WITH_MASKS = FLOATS + ("bool",)   # bool masks are a dispatch dtype of the node

KERNELS: list[Kernel] = [
    Kernel("aten::scaled_dot_product_attention", "cpu", "out", WITH_MASKS, _M + "scaled_dot_product_attention",
           matcher=_M + "scaled_dot_product_attention_matcher"),
    # natives: fresh results, the second output of MHA may be an empty placeholder
    Kernel("aten::_native_multi_head_attention", "cpu", "native", WITH_MASKS, _M + "native_multi_head_attention",
           matcher=_M + "native_multi_head_attention_matcher"),
    Kernel("aten::_transformer_encoder_layer_fwd", "cpu", "native", WITH_MASKS,
           _M + "transformer_encoder_layer_fwd", matcher=_M + "transformer_encoder_layer_matcher"),
]

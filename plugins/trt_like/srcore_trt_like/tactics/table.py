"""THE tactic table: every implementation of every layer kind, as frozen records.

For each layer kind the rows are in the order the builder offers them, the usual winner first
(with ``timing=False`` the builder takes the first candidate): families of compiled tactics,
then the single compiled kernel, then numpy (always applicable, and the reference the compiled
tactics are tested against).
"""
from __future__ import annotations

from ..builder.network import Layer, Network
from . import (attention, blas_team, block_fuse, conv, conv1d, conv3d, conv_pool, data, int8, mkl, native, nn,
               numpy_layers, pointwise, segment, sgemm, squeeze_excite, transposed)
from .records import Candidate, Tactic, simple

TACTICS: tuple[Tactic, ...] = (
    Tactic("conv", "conv", conv.conv_candidates, threaded=conv.conv_threaded),
    Tactic("conv", "conv1d_simd", conv1d.candidates),
    Tactic("conv1d", "conv1d_simd", conv1d.candidates),
    Tactic("conv", "numpy", simple("numpy", numpy_layers.conv, blas="openblas")),
    Tactic("conv3d", "vol2col_gemm", simple("vol2col_gemm", conv3d.vol2col_gemm, blas="openblas")),
    Tactic("conv3d", "numpy", simple("numpy", conv3d.numpy_conv3d, blas="openblas")),
    Tactic("conv_transpose", "numba", simple("numba", transposed.gemm_col2im, blas="openblas")),
    Tactic("conv_transpose", "numba_fused", simple("numba_fused", transposed.fused)),
    Tactic("conv_transpose", "numba_direct", simple("numba_direct", transposed.direct)),
    Tactic("conv_transpose", "numba_phase", simple("numba_phase", transposed.phase)),
    Tactic("conv_transpose", "numpy", simple("numpy", numpy_layers.conv_transpose, blas="openblas")),
    Tactic("conv_transpose", "phase_conv", transposed.phase_candidates, threaded=transposed.phase_threaded),
    Tactic("conv_max_pool", "conv_max_pool", conv_pool.candidates, threaded=conv_pool.threaded),
    Tactic("max_pool2d", "numba", conv.max_pool2d, threaded=conv.max_pool_threaded),
    Tactic("max_pool2d", "numpy", simple("numpy", numpy_layers.max_pool2d)),
    Tactic("avg_pool2d", "numba", simple("numba", conv.avg_pool2d)),
    Tactic("avg_pool2d", "gather", simple("gather", conv.avg_pool2d_gather)),
    Tactic("avg_pool2d", "numpy", simple("numpy", numpy_layers.avg_pool2d)),
    Tactic("adaptive_avg_pool2d", "numba", simple("numba", conv.adaptive_avg_pool2d)),
    Tactic("adaptive_avg_pool2d", "numpy", simple("numpy", numpy_layers.adaptive_avg_pool2d)),
    Tactic("gemm", "mkl_packed", mkl.gemm_candidates),
    Tactic("gemm", "numpy", simple("numpy", numpy_layers.gemm, blas="openblas")),
    Tactic("gemm", "numpy_split", blas_team.gemm_candidates),
    Tactic("gemm", "packed_sgemm", sgemm.gemm_candidates, threaded=sgemm.threaded),
    Tactic("gemm", "native", native.gemm_candidates),
    Tactic("attention", "mkl", mkl.attention_candidates),
    Tactic("attention", "numba", simple("numba", nn.attention, blas="openblas")),
    Tactic("attention", "numpy", simple("numpy", numpy_layers.attention, blas="openblas")),
    Tactic("attention", "numba_heads", simple("numba_heads", attention.packed_numba)),
    Tactic("attention_heads", "mkl", attention.heads_mkl),
    Tactic("attention_heads", "numpy", simple("numpy", attention.heads_numpy, blas="openblas")),
    Tactic("attention_heads", "numba", simple("numba", attention.heads_numba)),
    Tactic("squeeze_excite", "numba", simple("numba", squeeze_excite.squeeze_excite)),
    Tactic(block_fuse.KIND, block_fuse.NAME, block_fuse.candidates),
    Tactic("fused_pointwise", "numba", pointwise.candidates),
    Tactic("fused_pointwise", "numpy", simple("numpy", numpy_layers.fused_pointwise)),
    Tactic("softmax", "numba", simple("numba", nn.softmax)),
    Tactic("softmax", "numba_split", nn.rows_split, threaded=nn.split_rows),
    Tactic("softmax", "numpy", simple("numpy", numpy_layers.softmax)),
    Tactic("log_softmax", "numba", simple("numba", nn.softmax)),
    Tactic("log_softmax", "numpy", simple("numpy", numpy_layers.softmax)),
    Tactic("layer_norm", "numba", simple("numba", nn.layer_norm)),
    Tactic("layer_norm", "numba_split", nn.rows_split, threaded=nn.split_rows),
    Tactic("layer_norm", "numpy", simple("numpy", numpy_layers.layer_norm)),
    Tactic("channel_norm", "numba", simple("numba", nn.channel_norm)),
    Tactic("channel_norm", "numpy", simple("numpy", numpy_layers.channel_norm)),
    Tactic("rms_norm", "numba", simple("numba", nn.rms_norm)),
    Tactic("rms_norm", "numpy", simple("numpy", numpy_layers.rms_norm)),
    Tactic("group_norm", "numba", simple("numba", nn.group_norm)),
    Tactic("group_norm", "numba_split", nn.group_norm_split_candidates, threaded=nn.split_groups),
    Tactic("group_norm", "numpy", simple("numpy", numpy_layers.group_norm)),
    Tactic("matmul", "numpy", simple("numpy", numpy_layers.matmul, blas="openblas")),
    Tactic("permute", "transpose_tiles", simple("transpose_tiles", data.permute_tiles)),
    Tactic("permute", "numpy", simple("numpy", numpy_layers.permute)),
    Tactic("strided", "numpy", simple("numpy", numpy_layers.strided)),
    Tactic("roll", "numpy", simple("numpy", numpy_layers.roll)),
    Tactic("mean", "numba", simple("numba", conv.global_mean)),
    Tactic("mean", "numpy", simple("numpy", numpy_layers.mean)),
    # data movement (tactics/data.py)
    Tactic("cat", "numpy", simple("numpy", data.cat)),
    Tactic("expand", "numpy", simple("numpy", data.expand)),
    Tactic("cast", "numpy", simple("numpy", data.cast)),
    Tactic("int_scalar", "numpy", simple("numpy", data.int_scalar)),
    Tactic("int_binary", "numpy", simple("numpy", data.int_binary)),
    Tactic("one_hot", "numpy", simple("numpy", data.one_hot)),
    Tactic("flip", "numpy", simple("numpy", data.flip)),
    Tactic("channel_gather", "numba", simple("numba", data.channel_gather)),
    Tactic("pad", "numba", simple("numba", data.pad_compiled)),
    Tactic("pad", "numpy", simple("numpy", data.pad)),
    Tactic("resize_pad", "numba", simple("numba", data.resize_pad_compiled)),
    Tactic("resize_pad", "numpy", simple("numpy", data.resize_pad)),
    Tactic("resize_add", "numba", simple("numba", data.resize_add_compiled)),
    Tactic("resize_add", "numpy", simple("numpy", data.resize_add)),
    Tactic("resize", "numba", simple("numba", data.resize_compiled)),
    Tactic("resize", "numba_split", data.resize_split, threaded=data.split_resize),
    Tactic("grid_sample", "numba", simple("numba", data.grid_sample)),
    Tactic("resize", "numpy", simple("numpy", data.resize)),
    Tactic("index_select", "numpy", simple("numpy", data.index_select)),
    Tactic("gather", "numpy", simple("numpy", data.gather)),
    Tactic("index_tensor", "numpy", simple("numpy", data.index_tensor)),
    Tactic("where", "numpy", simple("numpy", data.where)),
    Tactic("cumsum", "numpy", simple("numpy", data.cumsum)),
    Tactic("sort", "numpy", simple("numpy", data.sort)),
    Tactic("topk", "numpy", simple("numpy", data.topk)),
    Tactic("argmax", "numpy", simple("numpy", data.argmax)),
    Tactic("reduce", "numpy", simple("numpy", data.reduce)),
    Tactic("logical_not", "numpy", simple("numpy", data.logical_not)),
    Tactic("scatter", "numpy", simple("numpy", data.scatter)),
    Tactic("scatter_reduce", "numba", simple("numba", data.scatter_reduce_compiled)),
    Tactic("scatter_reduce", "numpy", simple("numpy", data.scatter_reduce)),
    Tactic("compare", "numpy", simple("numpy", data.compare)),
    Tactic("searchsorted", "numba", simple("numba", data.searchsorted_compiled)),
    Tactic("searchsorted", "numpy", simple("numpy", data.searchsorted)),
    # a small static network compiled whole (tactics/segment.py; chosen by timing the plan)
    Tactic("segment", "numba", simple("numba", segment.compiled)),
    # int8 layers (quantized segments)
    Tactic("qconv", "int8_gemm", int8.qconv_candidates, threaded=conv.conv_threaded, precision=int8.INT8),
    Tactic("qgemm", "int8_gemm", int8.qgemm_candidates, precision=int8.INT8),
    Tactic("quantize", "numpy", int8.quantize, precision=int8.INT8),
    Tactic("dequantize", "numpy", int8.dequantize, precision=int8.INT8),
    Tactic("qrelu", "numpy", int8.qrelu, precision=int8.INT8),
    Tactic("qadd", "numpy", int8.qadd, precision=int8.INT8),
    Tactic("qmax_pool2d", "numpy", int8.qmax_pool, precision=int8.INT8),
    Tactic("qmean", "numpy", int8.qmean, precision=int8.INT8),
)


def for_kind(kind: str) -> tuple[Tactic, ...]:
    """The table's rows for layers of ``kind``, in order."""
    return _BY_KIND.get(kind, ())


def candidates(layer: Layer, net: Network) -> list[Candidate]:
    """Every implementation that applies to ``layer``, best guess first."""
    return [c for t in for_kind(layer.kind) for c in t.candidates(layer, net)]


def threaded(layer: Layer, net: Network) -> bool:
    """Whether ``layer`` has candidates on numba's OpenMP pool at more than one intra-op thread."""
    return any(t.threaded is not None and t.threaded(layer, net) for t in for_kind(layer.kind))


def _by_kind() -> dict[str, tuple[Tactic, ...]]:
    out: dict[str, list[Tactic]] = {}
    for t in TACTICS:
        out.setdefault(t.kind, []).append(t)
    return {k: tuple(v) for k, v in out.items()}


_BY_KIND = _by_kind()

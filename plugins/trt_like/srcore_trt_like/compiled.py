"""The compiled tactics (numba kernels, MKL when installed), registered with :mod:`.tactics` ahead of the
numpy ones."""
from __future__ import annotations

from . import compiled_conv, compiled_gemm, compiled_pointwise, conv_pool, nn_kernels
from .tactics import FAMILIES, OMP_KINDS, register

for _kind, _factory in nn_kernels.FACTORIES.items():
    register(_kind, "numba", _factory)
register("fused_pointwise", "numba", compiled_pointwise.fused_pointwise)
for _kind, _factory in compiled_conv.POOLS.items():
    register(_kind, "numba", _factory)
FAMILIES.setdefault("conv", []).append(compiled_conv.conv_candidates)
OMP_KINDS["conv"] = compiled_conv.conv_threaded
OMP_KINDS["max_pool2d"] = compiled_conv.max_pool_threaded
FAMILIES.setdefault("conv_max_pool", []).append(conv_pool.candidates)
OMP_KINDS["conv_max_pool"] = conv_pool.threaded
FAMILIES.setdefault("gemm", []).append(compiled_gemm.gemm_candidates)
FAMILIES.setdefault("attention", []).append(compiled_gemm.attention_candidates)

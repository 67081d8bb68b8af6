"""The plugin API: the only module a plugin imports.

A plugin is a module (or object) with ``@hookimpl`` functions named after the
hooks in :mod:`srcore.plugin.hookspecs`; each hook yields records from
:mod:`srcore.plugin.types`. See docs/writing-a-plugin.md.

Besides ``hookimpl`` and the records, this module re-exports what kernels,
shape rules and engine builders use from the rest of srcore, so that a plugin
never imports ``srcore.ir``, ``srcore.memory``, ``srcore.ops`` or
``srcore.cachedir`` (which may change): the error classes, IR tensor and
scalar types with the dtype and ``ScalarType`` codes, what a shape rule
sees (``ShapeContext``, ``AbstractValue``, ``UNKNOWN``), the memory planner
an engine plans its intermediates with, the safetensors container an engine
stores plans in, the cache root, the progress bar and the clock candidate kernels are timed on. Those load on first
use: discovery imports this module, so it stays cheap.

Internal: ``manager.py`` (discovery, isolation, blocking, reports;
``get_plugin_manager()``), ``registry.py`` (the registry and its building),
``builtin.py`` (srcore's own declarations, rules and decompositions, through
the same hooks).
"""
from .._lazy import lazy_getattr
from ..errors import (EngineBuildError, EngineOptionError, KernelError, PluginError, QuantizationError, ShapeError,
                      SrcoreError, SrcoreFormatError, SrcoreInputError)
from .types import ANY_QUANTIZED, KERNEL_KINDS, ArgInfo, Backend, Kernel, NodeInfo, PluginInfo, Specialized

from .hook_names import HookimplMarker  # noqa: E402

#: ``pluggy.HookimplMarker("srcore")``, without importing pluggy (srcore.plugin.hook_names)
hookimpl = HookimplMarker()

# what shape rules, kernels and engine builders need, imported on first use (discovery imports this
# module: it must not load the IR or numpy)
_LAZY = {
    # the records of engine backends (srcore.plugin.engine_types: classes a start without engines never builds)
    **{n: f"srcore.plugin.engine_types:{n}" for n in ("Segment", "EngineOp", "EngineData")},
    # the records of the hooks a selective start never calls (srcore.plugin.hook_types)
    **{n: f"srcore.plugin.hook_types:{n}" for n in ("OpLibrary", "DType", "Decomposition", "EngineBuilder",
                                                   "Subcommand", "ShapeRule")},
    # a value a matcher binds at load (srcore.plugin.const: built when a matcher first binds one)
    "Const": "srcore.plugin.const:Const",
    # IR types and dtype codes (kernels that look at types, shape rules, engine builders)
    **{n: f"srcore.ir.types:{n}" for n in ("TensorType", "BoolType", "FloatType", "IntType", "ListType",
                                           "SCALAR_TYPE_CODES", "DTYPE_TO_SCALAR_TYPE_CODE", "ML_DTYPES")},
    # what a shape rule sees
    "ShapeContext": "srcore.ops.shapes.base:Ctx",
    "AbstractValue": "srcore.ops.shapes.base:A",
    "UNKNOWN": "srcore.ops.shapes.base:UNKNOWN",
    # the memory planner an engine plans its intermediates with
    **{n: f"srcore.memory.planner:{n}" for n in ("Lifetime", "TensorRequest", "lower_bound", "make_planner",
                                                 "no_reuse_bytes")},
    # an engine's stored plans: safetensors files under the cache root
    **{n: f"srcore.format.safetensors_io:{n}" for n in ("Container", "encode_header", "tensor_layout",
                                                        "write_file", "drop_resident_pages")},
    "cache_root": "srcore.cachedir:cache_root",
    # one engine builder's options out of a segment's (its namespace over the top-level keys)
    "builder_options": "srcore.plugin.options:builder_options",
    # a plugin's kernel records from a cached index (its declaration modules not imported at start-up)
    "cached_kernels": "srcore.plugin.record_cache:cached_kernels",
    # a hash of source files' stamps, for caches whose content depends on the code
    "sources_fingerprint": "srcore.plugin.record_cache:sources_fingerprint",
    "progress": "srcore.progress:progress",
    # quantized values and their parameters
    "QuantizedArray": "srcore.qarray:QuantizedArray",
    "QParams": "srcore.ir.qparams:QParams",
    "QDTYPES": "srcore.ir.quant:QDTYPES",
    "add_scalar_qparams": "srcore.ir.quant:add_scalar_qparams",
    "mul_scalar_qparams": "srcore.ir.quant:mul_scalar_qparams",
    # the CPU's features, for kernels that reproduce machine-dependent arithmetic (srcore.cpu_features)
    "cpu_features": "srcore.cpu_features:cpu_features",
    "cpu_name": "srcore.cpu_features:cpu_name",
    "has_avx512_vnni": "srcore.cpu_features:has_avx512_vnni",
    "vector_bytes": "srcore.cpu_features:vector_bytes",
    "aten_capability": "srcore.cpu_features:aten_capability",
    # the exact int8 GEMM (u8 x s8 -> s32, fbgemm's requantization fused) of srcore.int8.gemm: the
    # module (numba, imported on its first call; a plugin calling it declares numba)
    "int8_gemm": "srcore.int8:gemm",
    # torch's roundings of quantized means on exact integer sums (srcore.int8.means)
    "int8_means": "srcore.int8:means",
    # oneDNN's requantization of exact int32 sums (srcore.int8.onednn)
    "int8_onednn": "srcore.int8:onednn",
    # numba intrinsics on float32 vector register values (srcore.conv.simd: vsplat, vload, vstore, vadd,
    # vmul, vfma, ...; the width from a tag array: ndim 1 -> 8 lanes, 2 -> 16); numba
    "simd_vec": "srcore.conv:simd",
    # the explicit-SIMD float32 direct conv (srcore.conv.direct: SimdDirectConv, lanes); numba
    "simd_conv": "srcore.conv:direct",
    # the explicit-SIMD float32 depthwise conv (srcore.conv.depthwise: SimdDepthwiseConv); numba
    "simd_depthwise": "srcore.conv:depthwise",
    # the channel-blocked explicit-SIMD depthwise conv (srcore.conv.depthwise_blocked: BlockedDepthwiseConv)
    "simd_depthwise_blocked": "srcore.conv:depthwise_blocked",
    # the explicit-SIMD float32 1x1 conv (srcore.conv.pointwise: SimdPointwiseConv); numba
    "simd_pointwise": "srcore.conv:pointwise",
    # the LLVM codegen helpers of numba SIMD intrinsics (srcore._vec_ir: elem_ptr, splat, declare, call, the
    # vector register types); numba
    "vec_ir": "srcore._vec_ir",
    # the NCHW16c activation layout (srcore.conv.nchwc) and the 1x1 conv that writes it
    # (srcore.conv.pointwise_blocked: BlockedPointwiseConv); numba
    "nchwc": "srcore.conv:nchwc",
    "simd_pointwise_blocked": "srcore.conv:pointwise_blocked",
    # the same 1x1 conv on 8-lane vectors, two halves a block (srcore.conv.pointwise_halves: HalvesPointwiseConv)
    "simd_pointwise_halves": "srcore.conv:pointwise_halves",
    # the dense (NCHW in) and depthwise NCHW16c convs on 8-lane vectors by halves (srcore.conv.halves)
    "simd_halves": "srcore.conv:halves",
    # the dense conv from NCHW into NCHW16c (srcore.conv.dense_blocked: BlockedDenseConv); numba
    "simd_dense_blocked": "srcore.conv:dense_blocked",
    # the dense conv with either side NCHW16c (srcore.conv.dense_nchwc: NchwcDenseConv); numba
    "simd_dense_nchwc": "srcore.conv:dense_nchwc",
    # the same on 8-lane register tiles (srcore.conv.dense_nchwc_halves: HalvesNchwcDenseConv)
    "simd_dense_nchwc_halves": "srcore.conv:dense_nchwc_halves",
    # the worker team split kernels claim their parts on (srcore.conv.team: Team, Claims, team)
    "conv_team": "srcore.conv.team",
    # the same claiming of a call's Python parts on numba's OpenMP team (srcore.conv.omp_team: OmpTeam,
    # available, team); numba
    "omp_team": "srcore.conv.omp_team",
    # a bound kernel call's arguments packed into one int64 array (srcore.conv.packed_call: packed); numba
    "packed_call": "srcore.conv.packed_call",
    # a numba kernel that other kernels call compiled once for plain argument types, not once per pattern of
    # constants its callers pass (srcore._plain_args.plain_args); numba on first use
    "plain_args": "srcore._plain_args:plain_args",
    # the transposed conv of rank 1-3 (srcore.conv.transpose: ConvTranspose, col2im3, direct3, phase3); numba
    "conv_transpose": "srcore.conv:transpose",
    # the compiled grid_sample (srcore.grid_sample: GridSampler, grid_sampler); numba
    "grid_sample": "srcore.grid_sample",
    # the k-th smallest of a float32 buffer by Hoare's selection (srcore.quickselect: kth_smallest); numba
    "quickselect": "srcore.quickselect",
    # F.affine_grid's (h, w, 3) base grid (srcore.affine_grid: base_grid); numpy
    "affine_grid": "srcore.affine_grid",
    # Intel MKL's runtime through ctypes (srcore.blas.mkl: library(), pack_b, set_threads, swap_threads)
    "mkl": "srcore.blas:mkl",
    # numpy's OpenBLAS held at one thread during a backend's regions, one hold per process for every plugin
    # (srcore.blas.openblas: controller, enter, leave, one_thread, on_caller, user_threads, held_count)
    "openblas": "srcore.blas:openblas",
    # split float32 products whose parts call numpy's OpenBLAS from compiled code without the GIL (srcore.blas.
    # native_team: team, Team, Gemm, batched_parts, sgemm_address, EPILOGUE_SIG); numba on first use
    "native_team": "srcore.blas:native_team",
    # the clock candidate kernels are timed on (srcore.clock: per_call_ns, wall_ns_waited, clock_for): the
    # calling thread's own time for one-thread candidates, wall time for threaded ones
    "clock": "srcore.clock",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "hookimpl", "Kernel", "OpLibrary", "ShapeRule", "Decomposition", "Backend", "DType", "EngineBuilder",
    "Subcommand", "NodeInfo", "ArgInfo", "Specialized", "Const", "PluginInfo", "KERNEL_KINDS", "ANY_QUANTIZED",
    "SrcoreError", "KernelError", "EngineBuildError", "EngineOptionError", "PluginError", "ShapeError",
    "SrcoreFormatError", "SrcoreInputError", "QuantizationError", *_LAZY,
]

"""The engine options of trt_like (``Options(engine_options={...})``, ``--engine-option KEY=VALUE``),
checked when an engine is built: an unknown option or tactic name is an
:class:`srcore.EngineOptionError` naming it and listing what is known."""
from __future__ import annotations

import difflib
from typing import Any

from srcore.plugin import EngineOptionError, builder_options

from .tactics.names import int8_reuses

#: option -> what it takes (docs/trt-like.md has the table)
OPTIONS = {
    "fusion": "true/false: fuse pointwise runs (and a conv with the max pool that alone reads it)",
    "timing": "true/false: time every applicable tactic per layer (false: the first, the usual winner)",
    "timing_cache": "true/false: reuse and record tactic winners in the timing cache",
    "mkl": "true/false: offer MKL's packed SGEMM when the mkl package is installed",
    "exclude_tactics": "a list of tactic names never chosen",
    "memory_tolerance": "a fraction (default 0.05): a tactic within this much of the fastest that holds fewer "
                        "weight bytes wins (0: the fastest always)",
    "engine_cache": "true/false or a directory: keep plans in an engine cache keyed by segment, signature "
                    "and machine",
    "nchwc": "true/false: force runs of conv / squeeze-excite layers into the NCHW16c layout or "
             "keep them in NCHW, false also ruling out the NCHW16c kernels on NCHW convs (unset: each run "
             "takes the faster layout, timed at build; builder/layout.py)",
    "nchwc_split": "true/false (default false): also offer the NCHW16c 1x1 and depthwise layers split over the "
                   "OpenMP team at more than one intra-op thread (they won timed alone but lost in the model's "
                   "sequence on a 2-vCPU Sapphire Rapids: docs/trt-like.md)",
    "nchwc_rows": "true/false (default false): also offer the NCHW16c 1x1 and depthwise layers split over the "
                  "OpenMP team by bands of rows (each thread reads only its band's input)",
    "thread_plan": "true/false (default true): at more than one intra-op thread, time the plan's split layers in "
                   "the engine's sequence on their team, on the calling thread and mixed, and keep the fastest "
                   "(tactics/thread_plan.py); false: every split on its team",
    "precision": "float32 (default) or int8: float layers compute in float32, a quantized segment's in int8; "
                 "int8 with 'calibration' data quantizes a float model first (srcore.quantize)",
}
PRECISIONS = ("float32", "int8")
_BOOLS = ("fusion", "timing", "timing_cache", "mkl", "nchwc", "nchwc_split", "nchwc_rows", "thread_plan")

#: every tactic name the table can offer (conv algorithms, then the other families); a test builds
#: the candidates of each family and checks every name is here (tests/test_tactic_names.py)
CONV_TACTICS = ("gemm_1x1", "im2col_gemm", "im2col_gemm_team", "packed_gemm", "winograd_f4x4", "winograd_f2x2",
                "winograd_f4x4_team", "winograd_f2x2_team", "winograd_f4x4_packed", "winograd_f2x2_packed",
                # Winograd's products on the packed-panel SGEMM's tile, one thread and split on the OpenMP team
                "winograd_f4x4_sgemm", "winograd_f2x2_sgemm", "winograd_f4x4_sgemm_omp", "winograd_f2x2_sgemm_omp",
                "depthwise_direct", "depthwise_channels_last", "depthwise_simd", "depthwise_simd8",
                "depthwise_simd_blocked", "grouped_depthwise", "patchify_gemm", "patchify_direct", "patchify_dots",
                "simd_direct", "simd_direct_rows", "simd_direct_oc", "simd_direct_8",
                "simd_direct_tiled",
                # ... split over the OpenMP team at more than one intra-op thread, any size
                "simd_direct_omp", "simd_direct_rows_omp",
                "pointwise_simd", "pointwise_simd8",
                # conv_nchw16c's kernel with NCHW on both sides (between NCHW layers)
                "conv_nchwc_planes",
                # ... on the block-diagonal dense weight of a conv of 2-4 groups
                "conv_nchwc_planes_blockdiag",
                # ... split over the OpenMP team at more than one intra-op thread, any size
                "conv_nchwc_planes_omp", "conv_nchwc_planes_rows_omp",
                # layers in the NCHW16c layout (builder/layout.py)
                "pointwise_nchw16c", "depthwise_nchw16c", "dense_nchw16c", "conv_nchw16c",
                # ... their kernels on 8-lane vectors, two a block (AVX2-sized register blocks), timed beside
                "pointwise_nchw16c_h8", "depthwise_nchw16c_h8", "dense_nchw16c_h8", "conv_nchw16c_h8",
                "conv_nchwc_planes_h8",
                # a 1x1 conv writing NCHW on the packed-panel SGEMM's tiles (conv/pointwise_sgemm.py)
                "pointwise_sgemm",
                # a dense conv from NCHW into NCHW16c on the same tile (conv/dense_tile.py)
                "dense_tile_nchw16c",
                # ... both split over the OpenMP team at more than one intra-op thread, any size (conv/tile_split.py)
                "pointwise_sgemm_omp", "dense_tile_nchw16c_omp",
                # ... split over the OpenMP team at more than one intra-op thread, any size
                "pointwise_nchw16c_omp", "depthwise_nchw16c_omp",
                # ... by bands of rows
                "pointwise_nchw16c_rows_omp", "depthwise_nchw16c_rows_omp",
                # the dense conv's splits over the OpenMP team (by block groups, by rows), always offered
                "conv_nchw16c_omp", "conv_nchw16c_rows_omp", "dense_nchw16c_omp",
                # ... the 8-lane kernels' twins of all of these (the 1x1 and depthwise ones behind the same options)
                "pointwise_nchw16c_h8_omp", "depthwise_nchw16c_h8_omp", "pointwise_nchw16c_h8_rows_omp",
                "depthwise_nchw16c_h8_rows_omp", "conv_nchw16c_h8_omp", "conv_nchw16c_h8_rows_omp",
                "dense_nchw16c_h8_omp", "conv_nchwc_planes_h8_omp", "conv_nchwc_planes_h8_rows_omp",
                # at more than one intra-op thread, large layers
                "simd_direct_split", "depthwise_simd_split")
OTHER_TACTICS = ("packed_gemm_max_pool", "mkl_packed", "mkl_split", "mkl", "numba", "numba_512", "numba_split", "numpy",
                 "numba_heads", "mkl_heads_team", "mkl_heads_omp",
                 "numpy_split", "segment",
                 # GEMMs split over the core's native team at more than one thread (tactics/native.py)
                 "native_rows", "native_cols",
                 "int8_sgemm", "int8_dgemm", "int8_simd",
                 # small stride-1 1-D convs (tactics/conv1d.py)
                 "conv1d_simd",
                 # 3-D convs not folded into 2-D ones (tactics/conv3d.py)
                 "vol2col_gemm",
                 # transposed convs of few channels a group without BLAS (tactics/transposed.py)
                 "numba_fused", "numba_direct", "numba_phase",
                 # max pools of small planes through gathers (tactics/conv.py)
                 "gather",
                 # GEMMs on the packed-panel numba SGEMM (tactics/sgemm.py)
                 "packed_sgemm", "packed_sgemm16",
                 # ... split over the OpenMP team at more than one intra-op thread (kernels/sgemm_split.py)
                 "packed_sgemm_split", "packed_sgemm16_split",
                 # permutes that are batches of matrix transposes, through 8 x 8 register blocks (tactics/data.py)
                 "transpose_tiles",
                 # a mobile net's inverted-residual blocks as one split step each (tactics/block_fuse.py)
                 "block_omp")


def tactic_names() -> list[str]:
    # (``phase_<conv tactic>``: a transposed conv as that conv and a pixel shuffle, tactics/transposed.py)
    return [*CONV_TACTICS, *(f"{c}+max_pool" for c in CONV_TACTICS), *OTHER_TACTICS,
            *(f"int8_{c}" for c in CONV_TACTICS if int8_reuses(c)), *(f"phase_{c}" for c in CONV_TACTICS)]


NAMESPACE = "trt_like"


def check_options(options: dict[str, Any]) -> dict[str, Any]:
    """trt_like's options out of a segment's builder options, checked: the top-level keys, with
    those under ``"trt_like"`` over them; other dict-valued keys are other builders' namespaces
    (``{"openvino": {...}}``) and are ignored. An unknown key or a bad value is an EngineOptionError."""
    options = builder_options(options, NAMESPACE, OPTIONS)
    for key, value in options.items():
        if key in _BOOLS and not isinstance(value, bool):
            raise EngineOptionError(f"trt_like engine option {key}={value!r}: expected true or false")
    excluded = options.get("exclude_tactics", ())
    if isinstance(excluded, str) or not all(isinstance(n, str) for n in excluded):
        raise EngineOptionError(f"trt_like engine option exclude_tactics={excluded!r}: expected a list of names")
    known = tactic_names()
    for name in excluded:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise EngineOptionError(f"exclude_tactics: unknown trt_like tactic {name!r}{hint}; "
                                    f"tactics: {', '.join(known)}")
    tol = options.get("memory_tolerance", 0.05)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol <= 1:
        raise EngineOptionError(f"trt_like engine option memory_tolerance={tol!r}: expected a fraction from 0 to 1 "
                                f"(0.05: a tactic within 5% of the fastest that holds fewer weight bytes wins)")
    precision = options.get("precision", "float32")
    if precision not in PRECISIONS:
        raise EngineOptionError(f"trt_like engine option precision={precision!r}: expected one of "
                                f"{', '.join(PRECISIONS)} (engines compute in float32, quantized segments in int8; "
                                f"docs/trt-like.md, 'INT8 engines')")
    return options

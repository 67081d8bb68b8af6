"""2-D convolution tactics of the trt_like engine: float32, NCHW, static shapes.

``conv_tactics(spec, weight, bias)`` returns every tactic that computes ``spec``; the engine
builder times them on the real shapes (:func:`srcore_trt_like.tactic_timing.time_tactics`)
and keeps the fastest. Each is called as ``tactic(x, out, residual=None)`` and writes
``relu?(conv(x) + bias (+ residual))`` into ``out``; the epilogue runs in the tactic's last pass
(the output transform or depthwise row loop; after a BLAS GEMM, one pass over the output chunk
the GEMM just wrote, while it is in cache).

=================== ========================================================================
``gemm_1x1``        1x1, unpadded, ungrouped: one GEMM on the input (stride: a gather first)
``im2col_gemm``     any kernel, stride, padding, dilation, groups: numba column gather with the
                    padding folded in, in chunks of output rows (~1 MiB of columns), one GEMM each
``packed_gemm``     any ungrouped conv: im2col straight into the operand layout of the numba
                    packed GEMM (explicit AVX-512 vectors), the weight packed once
                    (``conv_packed.py``, ``gemm_kernels.py``)
``winograd_f4x4_packed``, ``winograd_f2x2_packed``  the same on the packed GEMM with vector
                    transforms, in chunks of tile rows (``winograd_packed.py``)
``winograd_f2x2``   3x3, stride 1, undilated, ungrouped: Winograd F(2x2, 3x3) (``winograd.py``)
``winograd_f4x4``   the same shapes: Winograd F(4x4, 3x3)
``depthwise_direct`` groups == in channels: a numba direct loop per output row
=================== ========================================================================
"""
from __future__ import annotations

import numpy as np

from . import conv_kernels as _k
from .conv_spec import ConvSpec, ConvTactic
from .errors import TacticSpecError
from .scratch import SCRATCH
from .winograd import WinogradTactic, winograd_applies

__all__ = ["ConvSpec", "ConvTactic", "Gemm1x1Tactic", "Im2colGemmTactic", "WinogradTactic",
           "DepthwiseDirectTactic", "conv_tactics", "conv_tactic_builders"]

# im2col columns are built and multiplied in chunks of output rows of at most this many bytes, so the
# columns stay in L2 between the gather and the GEMM, and the epilogue finds the GEMM's rows in cache
COLS_CAP_BYTES = 1 << 20
# outputs at most this wide gather im2col columns through an index plan (see Im2colGemmTactic),
# when their columns for a whole image fit in this many bytes
PLANNED_MAX_WIDTH = 32
PLANNED_MAX_COLS_BYTES = 8 << 20


class Gemm1x1Tactic(ConvTactic):
    """1x1 kernel, no padding, groups 1: ``out[n] = W @ x[n]`` (O x C by C x H*W); a strided conv
    first gathers the sampled pixels (numba) into a per-thread buffer."""
    name = "gemm_1x1"
    uses_blas = True

    def __init__(self, spec: ConvSpec, weight, bias):
        super().__init__(spec, weight, bias)
        if spec.kernel != (1, 1) or spec.padding != (0, 0) or spec.groups != 1:
            raise TacticSpecError(f"gemm_1x1: needs a 1x1 kernel, padding 0 and groups 1; got kernel "
                                  f"{spec.kernel}, padding {spec.padding}, groups {spec.groups}")
        self.w = np.ascontiguousarray(np.asarray(weight, np.float32).reshape(spec.out_channels, -1))

    def _run(self, x, out, residual):
        s = self.spec
        N, C = s.x_shape[:2]
        _, O, Ho, Wo = self.out_shape
        P = Ho * Wo
        out3 = out.reshape(N, O, P)
        res3 = out3 if residual is None else residual.reshape(N, O, P)
        strided = s.stride != (1, 1)
        xs = SCRATCH.get("cols", (C, P)) if strided else None
        for n in range(N):
            if strided:
                _k.subsample(x, n, s.stride[0], s.stride[1], Ho, Wo, xs, 0, C)
            np.matmul(self.w, xs if strided else x[n].reshape(C, P), out=out3[n])
            _k.epilogue(out3, res3, residual is not None, self.bias, s.relu, n, 0, P, 0, O)


class Im2colGemmTactic(ConvTactic):
    """Any conv: per image (and chunk of output rows), gather the (C/g * kh * kw, rows * Wo) columns
    with zeros for the padding (numba), one GEMM per group into ``out``, then the epilogue.

    Outputs narrower than :data:`PLANNED_MAX_WIDTH` gather through an index plan built here (one
    indexed load per element, whole image at once): their rows are too short for row copies
    (resnet's 7x7 layer: 0.22 -> 0.06 ms); wider outputs copy tap rows, chunked to
    :data:`COLS_CAP_BYTES` (a 56-wide row copy beats the indexed load 0.32 vs 0.46 ms).
    """
    name = "im2col_gemm"
    uses_blas = True

    def __init__(self, spec: ConvSpec, weight, bias):
        super().__init__(spec, weight, bias)
        g, O = spec.groups, spec.out_channels
        self.w = np.ascontiguousarray(np.asarray(weight, np.float32).reshape(g, O // g, -1))
        (N, C, H, W), (kh, kw) = spec.x_shape, spec.kernel
        Ho, Wo = self.out_shape[2:]
        K = C * kh * kw
        self.plan = None
        if Wo <= PLANNED_MAX_WIDTH and 4 * K * Ho * Wo <= PLANNED_MAX_COLS_BYTES:
            self.plan = _k.gather_plan(H, W, kh, kw, *spec.stride, *spec.padding, *spec.dilation, Ho, Wo)
            self.rows = Ho
        else:
            self.rows = max(1, min(Ho, COLS_CAP_BYTES // (4 * K * Wo)))

    def _run(self, x, out, residual):
        s = self.spec
        N, C = s.x_shape[:2]
        _, O, Ho, Wo = self.out_shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw), g = s.kernel, s.stride, s.padding, s.dilation, s.groups
        out3 = out.reshape(N, O, Ho * Wo)
        res3 = out3 if residual is None else residual.reshape(N, O, Ho * Wo)
        outg = out.reshape(N, g, O // g, Ho * Wo)
        K = C * kh * kw
        for n in range(N):
            for ho0 in range(0, Ho, self.rows):
                ho1 = min(Ho, ho0 + self.rows)
                p0, p1 = ho0 * Wo, ho1 * Wo
                if self.plan is not None:
                    cols = SCRATCH.get("cols", (C, kh * kw, p1 - p0))
                    _k.im2col_planned(x, n, self.plan, cols, 0, C)
                else:
                    cols = SCRATCH.get("cols", (C, kh, kw, p1 - p0))
                    _k.im2col(x, n, kh, kw, sh, sw, ph, pw, dh, dw, ho0, ho1, Wo, cols, 0, C)
                if g == 1:
                    np.matmul(self.w[0], cols.reshape(K, p1 - p0), out=out3[n, :, p0:p1])
                else:
                    np.matmul(self.w, cols.reshape(g, K // g, p1 - p0), out=outg[n, :, :, p0:p1])
                _k.epilogue(out3, res3, residual is not None, self.bias, s.relu, n, p0, p1, 0, O)


class DepthwiseDirectTactic(ConvTactic):
    """groups == in channels (out channels a multiple of them): a direct numba loop, one
    multiply-add pass per tap over each output row, the epilogue on the row."""
    name = "depthwise_direct"

    def __init__(self, spec: ConvSpec, weight, bias):
        super().__init__(spec, weight, bias)
        if spec.groups != spec.x_shape[1]:
            raise TacticSpecError(f"depthwise_direct: needs groups == in channels ({spec.x_shape[1]}), "
                                  f"got groups {spec.groups}")
        self.w = np.ascontiguousarray(np.asarray(weight, np.float32).reshape(spec.out_channels, *spec.kernel))

    def _run(self, x, out, residual):
        s = self.spec
        res = out if residual is None else residual
        _k.depthwise(x, self.w, self.bias, res, residual is not None, s.relu, out, s.stride[0], s.stride[1],
                     s.padding[0], s.padding[1], s.dilation[0], s.dilation[1], 0, s.out_channels)


def conv_tactic_builders(spec: ConvSpec, weight: np.ndarray, bias: np.ndarray | None) -> list[tuple[str, object]]:
    """``(name, build)`` for every tactic that computes ``spec`` (im2col_gemm always; the others where
    they apply); ``build()`` lays out the weights, so a builder that already knows its winner (the
    timing cache) constructs only that one."""
    if not isinstance(spec, ConvSpec):
        raise TacticSpecError(f"conv_tactics: spec must be a ConvSpec, got {type(spec).__name__}")
    out: list[tuple[str, object]] = []
    if spec.kernel == (1, 1) and spec.padding == (0, 0) and spec.groups == 1:
        out.append((Gemm1x1Tactic.name, lambda: Gemm1x1Tactic(spec, weight, bias)))
    if winograd_applies(spec):
        from .winograd_math import F2, F4, transform_weight
        from .winograd_packed import WinogradPackedTactic    # noqa: PLC0415
        u: dict[int, np.ndarray] = {}

        def transformed(m: int) -> np.ndarray:
            # the float64 weight transform once per tile size, shared by the packed and OpenBLAS
            # tactics (resnet's 512-channel layer: ~40 ms each)
            if m not in u:
                u[m] = transform_weight(np.asarray(weight), F4 if m == 4 else F2)
            return u[m]
        for m in (4, 2):
            out.append((f"winograd_f{m}x{m}_packed",
                        lambda m=m: WinogradPackedTactic(spec, weight, bias, m=m, u=transformed(m))))
        for m in (4, 2):
            out.append((f"winograd_f{m}x{m}", lambda m=m: WinogradTactic(spec, weight, bias, m=m, u=transformed(m))))
    if spec.groups > 1 and spec.groups == spec.x_shape[1]:
        out.append((DepthwiseDirectTactic.name, lambda: DepthwiseDirectTactic(spec, weight, bias)))
    if spec.groups == 1:
        from .conv_packed import PackedGemmTactic    # noqa: PLC0415  (numba kernels compile on first use)
        out.append((PackedGemmTactic.name, lambda: PackedGemmTactic(spec, weight, bias)))
    out.append((Im2colGemmTactic.name, lambda: Im2colGemmTactic(spec, weight, bias)))
    return out


def conv_tactics(spec: ConvSpec, weight: np.ndarray, bias: np.ndarray | None) -> list[ConvTactic]:
    """Every tactic that computes ``spec``, weights laid out (see :func:`conv_tactic_builders`)."""
    return [build() for _, build in conv_tactic_builders(spec, weight, bias)]

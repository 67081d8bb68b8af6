"""The ``simd_direct`` conv tactic: srcore's explicit-SIMD float32 direct conv
(``srcore.plugin.simd_conv``, :mod:`srcore.conv.direct`): no im2col, the stride folded into a
phase-split copy of the input, 6 output channels x 2 vectors of pixels in registers, bias, residual,
relu and leaky relu fused into the stores."""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import simd_conv

from ..errors import TacticSpecError
from ..kernels import threads as _threads
from .spec import ConvSpec, ConvTactic


def simd_direct_applies(spec: ConvSpec) -> bool:
    """Dense convs: more than one input channel per group, or one group (a single-channel input:
    audio_conv1d's first conv, 1 -> 128 channels, k10 s5 on 16000 samples, ran 115-120 us here
    against im2col + GEMM's 170-270, Sapphire Rapids); depthwise has its own tactic."""
    return spec.x_shape[1] // spec.groups > 1 or spec.groups == 1


class SimdDirectTactic(ConvTactic):
    """Any dense conv (:func:`simd_direct_applies`) on the SIMD direct kernel; the weights
    packed once into its register-block layout (stored as ``wp``, ``bp``)."""
    name = "simd_direct"
    bound_run = True
    fused_activations = ("leaky_relu",)
    #: the layout of the kernel's input copy (``SimdDirectConv.rows_interleaved``)
    rows_interleaved = False
    #: output channels in the vector lanes (``SimdDirectConv.oc_lanes``), else output pixels
    oc_lanes = False
    #: the vector width (``SimdDirectConv``'s ``lanes_``): None, the CPU's widest
    lanes: int | None = None
    #: outputs of a row per task (``SimdDirectConv.row_tile``; 0: whole rows)
    row_tile = 0

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 1):
        super().__init__(spec, weight, bias, layout)
        if not simd_direct_applies(spec):
            raise TacticSpecError(f"simd_direct: needs more than one input channel per group or one group, got "
                                  f"{spec.x_shape[1]} channels in {spec.groups} groups")
        self.conv = simd_conv.SimdDirectConv(np.asarray(weight, np.float32), self.bias, spec.stride, spec.padding,
                                             spec.dilation, spec.groups, lo=0.0 if spec.relu else -math.inf,
                                             negative_slope=spec.negative_slope if spec.activation == "leaky_relu"
                                             else None, rows_interleaved=self.rows_interleaved,
                                             oc_lanes=self.oc_lanes, lanes_=self.lanes, row_tile=self.row_tile)
        self.wp = self._laid_out("wp", self.conv.wp.shape, lambda: self.conv.wp)
        self.bp = self._laid_out("bp", self.conv.bp.shape, lambda: self.conv.bp)
        # (a stored layout may come unaligned: the kernel's weight vectors want 64-byte lines)
        self.conv.wp, self.conv.bp = simd_conv.aligned(self.wp), self.bp
        self.threads = threads
        # its rows split over srcore's pool of Python threads, each row on one thread whatever the
        # count (the same bits on 1 or 2): the team per call as its own timing says, as for every
        # threaded layer (kernels/threads.py): on a 2-vCPU EPYC the resnet stem at 2 threads took
        # 1.27x its 1-thread time (pool wake-ups, the phase copy on the caller alone)
        self.governor = _threads.Governor(threads)

    def _run(self, x, out, residual):
        if self.threads <= 1:   # nothing to govern: its clock reads cost ~1 us, a small layer's tenth
            self.conv(x, out, residual)
            return
        gov = self.governor
        size = gov.team()
        t0 = gov.clock()
        self.conv(x, out, residual, threads=size)
        gov.record(size, gov.clock() - t0)


class SimdDirectRowsTactic(SimdDirectTactic):
    """:class:`SimdDirectTactic` with the input copy row-interleaved (the input rows of all channels
    one output row reads side by side): faster with many channels on large planes, slower with
    few; the same weights layout and bits, timed against it at build."""
    name = "simd_direct_rows"
    rows_interleaved = True


class SimdDirectTiledTactic(SimdDirectTactic):
    """:class:`SimdDirectTactic` with a long row in pieces of ``simd_conv.ROW_TILE`` outputs, every channel
    block of a piece in turn (its input copy in cache; a 1-D conv is one row); offered on rows longer
    than that, the same bits."""
    name = "simd_direct_tiled"
    row_tile = simd_conv.ROW_TILE


class SimdDirectOcTactic(SimdDirectTactic):
    """:class:`SimdDirectTactic` with output channels in the vector lanes (``srcore.conv.direct_oc``):
    no lanes lost on small planes (8x8, 7x7 at 16 lanes); offered at 16 lanes (at 8 its 24
    accumulators spill)."""
    name = "simd_direct_oc"
    oc_lanes = True


class SimdDirect8Tactic(SimdDirectTactic):
    """:class:`SimdDirectTactic` at 8 lanes on a 16-lane CPU: half-width vectors waste fewer lanes on
    narrow planes, and a CPU whose 512-bit units are two 256-bit halves may run them as fast."""
    name = "simd_direct_8"
    lanes = 8

"""The ``conv_transpose`` layer's compiled tactics, any rank (1-3): the shared kernel
(``srcore.plugin.conv_transpose``) in its three forms, ``numba`` (the weight's (O/g * taps, C/g)
columns times the input's pixels on BLAS, then the compiled col2im with the bias),
``numba_fused`` (the product as compiled loops, both in one call), ``numba_direct`` (no GEMM:
each input channel's rows added at the stride, scaled by the tap's weight) and ``numba_phase`` (each
stride phase of the output a direct conv with the phase's taps); the last three up to
``SMALL_MAX_CIG`` input channels a group;
``numpy`` (:func:`.numpy_layers.conv_transpose`) does the col2im in numpy; ``phase_<conv tactic>``
(:func:`phase_candidates`, 2-D): the layer as one ordinary conv and a pixel shuffle
(``conv/transpose_phase.py``), on every conv tactic that applies. The build times them all.
A fused activation (``attrs["activation"]``) runs in place after the bias (in the phase form: the
conv's epilogue, the shuffle only moving values)."""
from __future__ import annotations

import threading

import numpy as np

from ..builder.network import Layer, Network
from ..kernels import activation as _activation
from ..kernels.scratch import SCRATCH
from .records import Candidate, Kernel


def _tactic(form: str):
    def factory(layer: Layer, net: Network):
        from srcore.plugin import conv_transpose

        a = layer.attrs
        if form != "gemm" and a["weight"].shape[0] // a["groups"] > conv_transpose.SMALL_MAX_CIG:
            return None
        ct = conv_transpose.ConvTranspose(a["weight"], a["bias"], a["stride"], a["padding"], a["output_padding"],
                                          a["groups"], a["dilation"], form)
        x_shape = net.shape(layer.inputs[0])
        cs = ct.cols_shape(x_shape)
        run = ct.runner(x_shape, own_cols=False)
        act = _activation.in_place(a.get("activation", "none"), a.get("negative_slope", 0.01))
        if form not in conv_transpose.NO_COLS:
            def gemm(x, out):
                run(x, out, SCRATCH.get("convt_cols", cs))
                if act is not None:
                    act(out)
            return gemm
        if act is None:
            return run

        def direct(x, out):
            run(x, out)
            act(out)
        return direct
    return factory


gemm_col2im = _tactic("gemm")
fused = _tactic("fused")
direct = _tactic("direct")
phase = _tactic("phase")


def phase_candidates(layer: Layer, net: Network) -> list[Candidate]:
    """A 2-D transposed conv as a stride-1 conv to ``O * sh * sw`` channels then a pixel shuffle
    (``conv/transpose_phase.py``): one candidate per conv tactic that applies to that conv (as a
    ``conv`` layer's, ``tactics/conv.py``), named ``phase_<its name>``; none when the output is not a
    whole number of strides or the conv's window would be over 7 taps."""
    from ..conv.nchwc import nchwc_tactic_builders
    from ..conv.spec import ConvSpec
    from ..conv.tactics import conv_tactic_builders
    from ..conv.transpose_phase import phase_conv
    from ..kernels import threads as _threads
    from .conv import _kernel, conv_pool_of

    a = layer.attrs
    x_shape, out_shape = net.shape(layer.inputs[0]), net.shape(layer.outputs[0])
    if a["weight"].ndim != 4 or len(x_shape) != 4 or min(x_shape) < 1 or min(out_shape) < 1:
        return []
    pc = phase_conv(a["weight"], a["bias"], x_shape, out_shape, a["stride"], a["padding"], a["dilation"],
                    a["groups"])
    if pc is None:
        return []
    spec = ConvSpec(x_shape, pc.weight.shape[0], pc.weight.shape[2:], 1, pc.padding, 1, a["groups"],
                    activation=a.get("activation", "none"), negative_slope=a.get("negative_slope", 0.01))
    builders = conv_tactic_builders(spec, pc.weight, pc.bias)
    if spec.groups == 1:
        builders += nchwc_tactic_builders(spec, pc.weight, pc.bias, (False, False), _threads.for_work(spec.macs))

    def wrap(tactic) -> Kernel:
        return _shuffled(_kernel(tactic, False), pc.stride, spec.out_shape)
    return [Candidate(f"phase_{name}", lambda build=build: wrap(build()), blas=conv_pool_of(name),
                      restore=lambda layout, build=build: wrap(build(layout)))
            for name, build in builders]


def phase_threaded(layer: Layer, net: Network) -> bool:
    """Whether a phase candidate may run on numba's OpenMP pool (the ungrouped conv's packed tactics)."""
    return layer.attrs["groups"] == 1 and layer.attrs["weight"].ndim == 4


def _shuffled(conv: Kernel, stride, conv_shape) -> Kernel:
    """``conv`` (``fn(x, y)``, y of ``conv_shape``) then the pixel shuffle by ``stride`` into the
    layer's output; the conv's output a per-thread buffer, the same array every call (the conv
    kernel's bound fast path keys on its arrays)."""
    from ..kernels import shuffle

    run = conv.fn
    if stride == (1, 1):   # a stride-1 transposed conv is the conv itself
        return conv
    d2s = shuffle.entry()
    N, OS, qh, qw = conv_shape
    sh, sw = stride
    src_shape, dst_shape = (N * OS // (sh * sw), sh, sw, qh, qw), (N * OS // (sh * sw), qh * sh, qw * sw)
    tls = threading.local()

    def phase_conv(x, out):
        st = getattr(tls, "st", None)
        if st is None or st[0] is not out:
            tmp = getattr(tls, "tmp", None)
            if tmp is None:
                tmp = tls.tmp = np.empty(conv_shape, np.float32)
            st = tls.st = (out, tmp, tmp.reshape(src_shape), out.reshape(dst_shape))
        run(x, st[1])
        d2s(st[2], st[3])
    return Kernel(phase_conv, conv.weight_bytes, keep=conv.keep, layout=conv.layout)

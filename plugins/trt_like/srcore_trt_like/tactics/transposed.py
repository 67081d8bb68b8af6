"""The ``conv_transpose`` layer's compiled tactics, any rank (1-3): the shared kernel
(``srcore.plugin.conv_transpose``) in its three forms, ``numba`` (the weight's (O/g * taps, C/g)
columns times the input's pixels on BLAS, then the compiled col2im with the bias),
``numba_fused`` (the product as compiled loops, both in one call), ``numba_direct`` (no GEMM:
each input channel's rows added at the stride, scaled by the tap's weight) and ``numba_phase`` (each
stride phase of the output a direct conv with the phase's taps); the last three up to
``SMALL_MAX_CIG`` input channels a group;
``numpy`` (:func:`.numpy_layers.conv_transpose`) does the col2im in numpy. The build times them.
A fused activation (``attrs["activation"]``) runs in place after the bias."""
from __future__ import annotations

from ..builder.network import Layer, Network
from ..kernels import activation as _activation
from ..kernels.scratch import SCRATCH


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

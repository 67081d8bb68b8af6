"""The NCHWc activation layout (ONNX Runtime's NCHWc; oneDNN's ``nChw16c``): a float32 (N, C, H, W)
tensor stored as (N, ceil(C / c), H, W, c), the ``c`` channels of a block innermost, so one vector
holds ``c`` channels of a pixel. Channels past C in the last block are padding: kernels that write
this layout fill them (with the epilogue of 0: finite), kernels that read it give them zero weight.

Kernels that read and write it (:mod:`.depthwise_blocked`, :mod:`.pointwise_blocked`) let an
engine keep a run of conv layers in it and reorder only at the run's edges.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError


def blocked_shape(shape, c: int) -> tuple[int, int, int, int, int]:
    """The NCHWc shape of an (N, C, H, W) ``shape``."""
    N, C, H, W = (int(d) for d in shape)
    return (N, -(-C // c), H, W, c)


def to_blocked(x: np.ndarray, c: int) -> np.ndarray:
    """(N, C, H, W) -> (N, ceil(C / c), H, W, c), the padding channels zero."""
    N, C, H, W = x.shape
    nb = -(-C // c)
    xp = np.zeros((N, nb * c, H, W), np.float32)
    xp[:, :C] = x
    return np.ascontiguousarray(xp.reshape(N, nb, c, H, W).transpose(0, 1, 3, 4, 2))


def from_blocked(xb: np.ndarray, channels: int) -> np.ndarray:
    """(N, blocks, H, W, c) -> (N, channels, H, W), the padding channels dropped."""
    N, nb, H, W, c = xb.shape
    return np.ascontiguousarray(xb.transpose(0, 1, 4, 2, 3).reshape(N, nb * c, H, W)[:, :channels])


class LastBind:
    """A kernel's last bound call, reused when it is called again on the same arrays (the same
    objects: an engine's arena buffers): binding checks and flattens them, ~3 us a layer, a tenth of a
    small layer. One entry, read and replaced whole (calls on several threads stay correct)."""
    __slots__ = ("_last",)

    def __init__(self):
        self._last = None

    def get(self, make, x, out, residual):
        last = self._last
        if last is not None and last[0] is x and last[1] is out and last[2] is residual:
            return last[3]
        run = make(x, out, residual)
        # (a bound call holds flat views of its arrays; of a non-contiguous one, a copy made now)
        if x.flags.c_contiguous and out.flags.c_contiguous and (residual is None or residual.flags.c_contiguous):
            self._last = (x, out, residual, run)
        return run


def check_blocked(who: str, x: np.ndarray, channels: int, c: int) -> tuple[int, int, int, int]:
    """The logical (N, C, H, W) of an NCHWc ``x`` of ``channels`` channels, or a :class:`ShapeError`."""
    if x.ndim != 5 or x.shape[4] != c or x.shape[1] != -(-channels // c) or not x.flags.c_contiguous:
        raise ShapeError(f"{who}: an NCHW{c}c input of {channels} channels must be a C-contiguous "
                         f"(N, {-(-channels // c)}, H, W, {c}) array, got {x.shape}")
    return x.shape[0], channels, x.shape[2], x.shape[3]

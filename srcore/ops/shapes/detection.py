"""Rules of the ops the ONNX frontend maps detection and set ops onto (``srcore::non_max_suppression``,
``srcore::roi_align``, ``srcore::unique``): their lengths that depend on the data are ``None``."""
from __future__ import annotations

from .base import Ctx, rule, tt


@rule("srcore::non_max_suppression")
def non_max_suppression(ctx: Ctx):
    """``(boxes [B, N, 4], scores [B, C, N], ...)`` -> int64 ``(selected, 3)``."""
    boxes, scores = ctx.tensor(0), ctx.tensor(1)
    if boxes.shape is not None and (len(boxes.shape) != 3 or boxes.shape[2] not in (4, None)):
        raise ctx.fail(f"boxes must be [batch, boxes, 4], got shape {boxes.shape}")
    if scores.shape is not None and len(scores.shape) != 3:
        raise ctx.fail(f"scores must be [batch, classes, boxes], got shape {scores.shape}")
    return [tt("int64", (None, 3))]


@rule("srcore::roi_align")
def roi_align(ctx: Ctx):
    """``(input [N, C, H, W], rois [R, 4], batch_indices [R], output_height, output_width, ...)``
    -> ``(R, C, output_height, output_width)``."""
    x, rois = ctx.tensor(0), ctx.tensor(1)
    if x.shape is not None and len(x.shape) != 4:
        raise ctx.fail(f"input must be 4-D [N, C, H, W], got shape {x.shape}")
    if rois.shape is not None and (len(rois.shape) != 2 or rois.shape[1] not in (4, None)):
        raise ctx.fail(f"rois must be [num_rois, 4], got shape {rois.shape}")
    oh, ow = ctx.known(3, "output_height", 1), ctx.known(4, "output_width", 1)
    r = None if rois.shape is None else rois.shape[0]
    c = None if x.shape is None else x.shape[1]
    return [tt(x.dtype, (r, c, oh if isinstance(oh, int) else None, ow if isinstance(ow, int) else None))]


@rule("srcore::unique")
def unique(ctx: Ctx):
    """``(self, axis, sorted)`` -> values, first indices, inverse indices, counts (int64)."""
    x, axis = ctx.tensor(0), ctx.known(1, "axis", None)
    shape, n = x.shape, None
    if shape is not None and isinstance(axis, int):
        axis = ctx.norm_dim(axis, len(shape))
        n = shape[axis]
        y = tt(x.dtype, shape[:axis] + (None,) + shape[axis + 1:])
    else:
        if shape is not None and axis is None and all(isinstance(d, int) for d in shape):
            n = 1
            for d in shape:
                n *= d
        y = tt(x.dtype, (None,) if axis is None else None)
    return [y, tt("int64", (None,)), tt("int64", (n,)), tt("int64", (None,))]

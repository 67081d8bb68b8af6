"""Detection and set ops: NonMaxSuppression, RoiAlign, Unique, onto srcore's own ops of the same
semantics (``srcore::non_max_suppression``, ``srcore::roi_align``, ``srcore::unique``)."""
from __future__ import annotations

from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS
from ._util import cast, norm_axis, table


def non_max_suppression(cx: NodeContext):
    """The thresholds and the per-class limit are scalar inputs, constant or fed at run time."""
    cx.require_dtype(0, {"float32"}, "boxes")
    cx.require_dtype(1, {"float32"}, "scores")
    center = int(cx.attr("center_point_box", 0))
    if center not in (0, 1):
        raise Unsupported(f"center_point_box={center} (0 or 1)")
    for i, what, allowed in ((2, "max_output_boxes_per_class", {"int64"}), (3, "iou_threshold", {"float32"}),
                             (4, "score_threshold", {"float32"})):
        if cx.has(i):
            cx.require_dtype(i, allowed, what)
    opt = [cx.x(i) if cx.has(i) else None for i in (2, 3, 4)]
    return cx.op("srcore::non_max_suppression", cx.x(0), cx.x(1), *opt, center)


def roi_align(cx: NodeContext):
    """Opset 10 samples at output_half_pixel (no attribute); 16 and later default to half_pixel."""
    cx.require_dtype(0, FLOATS, "X")
    cx.require_dtype(2, {"int64"}, "batch_indices")
    default = "output_half_pixel" if cx.version < 16 else "half_pixel"
    ctm = cx.attr("coordinate_transformation_mode", default) if cx.version >= 16 else default
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise Unsupported(f"coordinate_transformation_mode={ctm!r}")
    mode = cx.attr("mode", "avg")
    if mode not in ("avg", "max"):
        raise Unsupported(f"mode={mode!r}")
    oh, ow, sr = (int(cx.attr(a, d)) for a, d in (("output_height", 1), ("output_width", 1), ("sampling_ratio", 0)))
    if oh < 1 or ow < 1 or sr < 0:
        raise Unsupported(f"output_height={oh}, output_width={ow}, sampling_ratio={sr}")
    cx.require_dtype(1, FLOATS, "rois")
    rois = cast(cx, cx.x(1), cx.dtype(0))
    return cx.op("srcore::roi_align", cx.x(0), rois, cx.x(2), oh, ow, sr, float(cx.attr("spatial_scale", 1.0)),
                 mode, ctm == "half_pixel")


def unique(cx: NodeContext):
    """Four outputs (values, first indices, inverse indices, counts), sorted or in first-occurrence order."""
    axis = cx.attr("axis", None)
    if axis is not None:
        axis = norm_axis(int(axis), cx.rank(0))
    return cx.op("srcore::unique", cx.x(0), axis, bool(cx.attr("sorted", 1)), n_out=4)


CONVERTERS = table(NonMaxSuppression=(non_max_suppression, 10, 11), RoiAlign=(roi_align, 10, 16, 22),
                   Unique=(unique, 11, 28))

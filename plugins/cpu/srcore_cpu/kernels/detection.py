"""Kernels of the ONNX detection and set ops: non_max_suppression, roi_align, unique (onnxruntime's
arithmetic, in the input's float dtype)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError


def _scalar(t, default, what: str):
    if t is None:
        return default
    a = np.asarray(t)
    if a.size != 1:
        raise KernelError(f"non_max_suppression: {what} must hold one value, got shape {a.shape}")
    return a.reshape(-1)[0]


def _corners(boxes: np.ndarray, center_point_box: int):
    """(x_min, y_min, x_max, y_max) columns: corners given in either order ([y1, x1, y2, x2]) or
    [x_center, y_center, width, height]."""
    if center_point_box:
        half_w, half_h = boxes[:, 2] / boxes.dtype.type(2), boxes[:, 3] / boxes.dtype.type(2)
        return (boxes[:, 0] - half_w, boxes[:, 1] - half_h, boxes[:, 0] + half_w, boxes[:, 1] + half_h)
    return (np.minimum(boxes[:, 1], boxes[:, 3]), np.minimum(boxes[:, 0], boxes[:, 2]),
            np.maximum(boxes[:, 1], boxes[:, 3]), np.maximum(boxes[:, 0], boxes[:, 2]))


def non_max_suppression(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
                        score_threshold=None, center_point_box=0):
    """``srcore::non_max_suppression``: onnxruntime's greedy selection: candidates above the score
    threshold by descending score (equal scores by box index); one is kept unless its IoU with an
    already kept box of its class is above the threshold."""
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
            or scores.shape[2] != boxes.shape[1]:
        raise KernelError(f"non_max_suppression: boxes {boxes.shape} and scores {scores.shape} must be "
                          "[batch, boxes, 4] and [batch, classes, boxes]")
    if boxes.dtype != np.float32 or scores.dtype != np.float32:
        raise KernelError(f"non_max_suppression: boxes and scores must be float32, got {boxes.dtype}, {scores.dtype}")
    if center_point_box not in (0, 1):
        raise KernelError(f"non_max_suppression: center_point_box must be 0 or 1, got {center_point_box}")
    limit = int(_scalar(max_output_boxes_per_class, 0, "max_output_boxes_per_class"))
    ft = boxes.dtype.type
    iou_thr = ft(_scalar(iou_threshold, 0.0, "iou_threshold"))
    if not 0 <= iou_thr <= 1:
        raise KernelError(f"non_max_suppression: iou_threshold must be in [0, 1], got {iou_thr}")
    score_thr = None if score_threshold is None else scores.dtype.type(_scalar(score_threshold, 0, "score_threshold"))
    rows = []
    if limit > 0:
        for b in range(boxes.shape[0]):
            x0, y0, x1, y1 = _corners(boxes[b], center_point_box)
            area = (x1 - x0) * (y1 - y0)
            for c in range(scores.shape[1]):
                s = scores[b, c]
                cand = np.flatnonzero(s > score_thr) if score_thr is not None else np.arange(s.shape[0])
                cand = cand[np.argsort(-s[cand], kind="stable")]
                kept = []
                while cand.size and len(kept) < limit:
                    i, rest = cand[0], cand[1:]
                    kept.append(i)
                    iw = np.minimum(x1[i], x1[rest]) - np.maximum(x0[i], x0[rest])
                    ih = np.minimum(y1[i], y1[rest]) - np.maximum(y0[i], y0[rest])
                    inter = iw * ih
                    union = area[rest] + area[i] - inter
                    with np.errstate(divide="ignore", invalid="ignore"):
                        suppress = (iw > 0) & (ih > 0) & (inter > 0) & (area[i] > 0) & (area[rest] > 0) \
                            & (union > 0) & (inter / union > iou_thr)
                    cand = rest[~suppress]
                rows.extend((b, c, i) for i in kept)
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def _axis_samples(start, size, pooled: int, grid: int, extent: int, ft):
    """Per-axis bilinear sampling: for each (bin, sample) position, the low/high pixel and weights
    (zero weights outside [-1, extent]), as onnxruntime's pre_calc_for_bilinear_interpolate."""
    bin_size = size / ft(pooled)
    p = np.arange(pooled, dtype=ft)[:, None]
    g = np.arange(grid, dtype=ft)[None, :]
    v = (start + p * bin_size + (g + ft(0.5)) * bin_size / ft(grid)).reshape(-1)
    valid = (v >= -1) & (v <= extent)
    v = np.maximum(v, 0)
    low = v.astype(np.int64)
    top = low >= extent - 1
    low = np.where(top, extent - 1, low)
    high = np.where(top, low, low + 1)
    v = np.where(top, low.astype(ft), v)
    frac = v - low
    lo_w, hi_w = np.where(valid, ft(1) - frac, 0).astype(ft), np.where(valid, frac, 0).astype(ft)
    return low, high, lo_w, hi_w


def roi_align(input, rois, batch_indices, output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0,
              mode="avg", half_pixel=True):
    """``srcore::roi_align``: per roi, separable bilinear sampling matrices (avg: one matmul pair per
    roi) or the max over samples of the largest of the four weighted corners (onnxruntime's max)."""
    if input.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4 or batch_indices.shape != (rois.shape[0],):
        raise KernelError(f"roi_align: input {input.shape}, rois {rois.shape}, batch_indices "
                          f"{batch_indices.shape} must be [N, C, H, W], [R, 4], [R]")
    if input.dtype.kind != "f":
        raise KernelError(f"roi_align: input must be floating, got {input.dtype}")
    if mode not in ("avg", "max"):
        raise KernelError(f"roi_align: mode must be 'avg' or 'max', got {mode!r}")
    n, c, h, w = input.shape
    ft = input.dtype.type
    out = np.zeros((rois.shape[0], c, output_height, output_width), input.dtype)
    offset = ft(0.5) if half_pixel else ft(0)
    r = rois.astype(input.dtype, copy=False)
    for k in range(rois.shape[0]):
        bi = int(batch_indices[k])
        if not 0 <= bi < n:
            raise KernelError(f"roi_align: batch index {bi} of roi {k} is outside [0, {n})")
        x0, y0, x1, y1 = (r[k, j] * ft(spatial_scale) - offset for j in range(4))
        rw, rh = x1 - x0, y1 - y0
        if not half_pixel:
            rw, rh = max(rw, ft(1)), max(rh, ft(1))
        gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / ft(output_height)))
        gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / ft(output_width)))
        if gh <= 0 or gw <= 0:
            continue   # onnxruntime divides by max(count, 1): no samples give zeros
        yl, yh, ywl, ywh = _axis_samples(y0, rh, output_height, gh, h, ft)
        xl, xh, xwl, xwh = _axis_samples(x0, rw, output_width, gw, w, ft)
        img = input[bi]
        if mode == "avg":
            ay = np.zeros((output_height, h), input.dtype)
            rows = np.repeat(np.arange(output_height), gh)
            np.add.at(ay, (rows, yl), ywl)
            np.add.at(ay, (rows, yh), ywh)
            ax = np.zeros((output_width, w), input.dtype)
            cols = np.repeat(np.arange(output_width), gw)
            np.add.at(ax, (cols, xl), xwl)
            np.add.at(ax, (cols, xh), xwh)
            out[k] = (ay @ img @ ax.T) / ft(gh * gw)
        else:
            corners = [(ywl[:, None] * xwl[None, :]) * img[:, yl[:, None], xl[None, :]],
                       (ywl[:, None] * xwh[None, :]) * img[:, yl[:, None], xh[None, :]],
                       (ywh[:, None] * xwl[None, :]) * img[:, yh[:, None], xl[None, :]],
                       (ywh[:, None] * xwh[None, :]) * img[:, yh[:, None], xh[None, :]]]
            v = np.maximum(np.maximum(np.maximum(corners[0], corners[1]), corners[2]), corners[3])
            out[k] = v.reshape(c, output_height, gh, output_width, gw).max(axis=(2, 4))
    return out


def unique(self, axis=None, sorted=True):
    """``srcore::unique``: ONNX Unique's four outputs; ``sorted=False`` keeps first-occurrence order."""
    x = np.asarray(self)
    if axis is not None:
        if not -x.ndim <= axis < x.ndim:
            raise KernelError(f"unique: axis {axis} is out of range for a {x.ndim}-d input")
        axis = axis % x.ndim
    else:
        x = x.reshape(-1)
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                          axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return (y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64))

"""Resize (opsets 11-19): every mode, coordinate transformation, nearest rounding, antialias, ``axes``.

Resize is separable and, along one axis, linear in the data: output position ``j`` is a fixed
weighted sum of input positions (plus, for ``tf_crop_and_resize``, the extrapolation value where
the source lies outside the input). So each resized axis becomes one constant matrix ``M``
(``in x out``) and offset ``c``, computed at conversion by onnx's reference implementation on the
identity (``M = Resize(I) - Resize(0)``, ``c = Resize(0)``): the converted graph computes exactly
ONNX's function, whatever the mode. ``nearest`` (one-hot columns) is ``aten::index_select`` with
the chosen indices; ``linear``/``cubic`` a ``matmul`` with ``M`` along the axis.

This needs the input's resized dims and ``scales``/``sizes``/``roi`` known at conversion (static
image sizes: what detection and segmentation models have). ``keep_aspect_ratio_policy`` other than
``stretch`` (one scale for all the resized axes): ``nearest`` resizing of a static input is a gather
map computed by the reference on the element indices; ``linear``/``cubic`` get their axis maps from
a probe with a third dim that carries the axis setting the scale (:func:`_axis_map`).
"""
from __future__ import annotations

import numpy as np

from ....ir.constants import const_or
from ....ir.graph import Value
from ....ir.types import TensorType
from ..context import NodeContext, Unsupported
from ._util import norm_axis, table

_ATTRS = {"coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75, "exclude_outside": 0,
          "extrapolation_value": 0.0, "mode": "nearest", "nearest_mode": "round_prefer_floor", "antialias": 0}


def _axis_map(cx: NodeContext, n_in: int, scale, size, roi_lo, roi_hi, policy=None):
    """(M, c) of one axis: onnx's reference Resize on a 2-D identity, resizing its last dim.

    ``policy``: ``(keep_aspect_ratio_policy, n, size)`` of the axis whose size ratio sets the one
    scale of all the resized axes: a third probe dim of length ``n`` resized to ``size`` with the
    policy makes the reference use that scale here (and round this axis' size from it); the probe
    is constant along that dim, whose weights sum to 1 (not for tf_crop_and_resize, refused)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    attrs = {k: cx.attr(k, d) for k, d in _ATTRS.items() if cx.has_attr(k)}
    if attrs.get("coordinate_transformation_mode") == "tf_half_pixel_for_nn":
        return _tf_half_pixel_for_nn(cx, n_in, scale, size, roi_lo, roi_hi, policy)
    extra = [] if policy is None else [policy[1]]
    if policy is not None:
        attrs.update(keep_aspect_ratio_policy=policy[0], axes=[1, 2])
    roi_in = "" if policy is not None else "roi"
    node = helper.make_node("Resize", ["x", roi_in, "scales"] if scale is not None else ["x", roi_in, "", "sizes"],
                            ["y"], **attrs)
    inputs = [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [n_in, n_in, *extra])]
    feeds = {}
    roi = np.array([0.0, roi_lo, 1.0, roi_hi], np.float32)
    inits = [] if policy is not None else [helper.make_tensor("roi", TensorProto.FLOAT, roi.shape, roi)]
    if scale is not None:
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [2], np.array([1.0, scale], np.float32)))
    elif policy is not None:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [2], np.array([size, policy[2]], np.int64)))
    else:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [2], np.array([n_in, size], np.int64)))
    g = helper.make_graph([node], "r", inputs, [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19 if cx.version >= 19 else 18)])
    ev = ReferenceEvaluator(model)
    ones = np.ones(extra)
    feeds["x"] = np.multiply.outer(np.eye(n_in), ones)
    ident = np.asarray(ev.run(None, feeds)[0], np.float64)
    feeds["x"] = np.zeros((n_in, n_in, *extra))
    zero = np.asarray(ev.run(None, feeds)[0], np.float64)
    if policy is not None:
        if not np.allclose(ident - zero, (ident - zero)[..., :1]):
            raise Unsupported("keep_aspect_ratio_policy: the probe dim is not resized to a constant")
        ident, zero = ident[..., 0], zero[..., 0]
    return ident - zero, zero[0]


def _tf_half_pixel_for_nn(cx: NodeContext, n_in: int, scale, size, roi_lo, roi_hi, policy):
    """(M, c) of one axis for Resize-11's ``tf_half_pixel_for_nn`` (TF 1's nearest resize, which
    tf2onnx writes; onnx dropped it at opset 13 and its reference has none, onnxruntime still runs
    it): ``x_in = (x_out + 0.5) / scale``, rounded by ``nearest_mode`` and clamped to the input, as
    onnxruntime's upsample does (``scale`` is ``size / n_in`` when sizes are given)."""
    if cx.attr("mode", "nearest") != "nearest":
        raise Unsupported("coordinate_transformation_mode='tf_half_pixel_for_nn' with mode other than nearest")
    if policy is not None or (roi_lo, roi_hi) != (0.0, 1.0):
        raise Unsupported("coordinate_transformation_mode='tf_half_pixel_for_nn' with keep_aspect_ratio_policy")
    if scale is not None:
        scale = np.float32(scale)
        n_out = int(np.floor(n_in * scale))
    else:
        n_out, scale = size, np.float32(size) / np.float32(n_in)
    x = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) / scale
    rounding = cx.attr("nearest_mode", "round_prefer_floor")
    half = x - np.floor(x) == 0.5
    if rounding == "round_prefer_floor":
        idx = np.where(half, np.floor(x), np.round(x))
    elif rounding == "round_prefer_ceil":
        idx = np.where(half, np.ceil(x), np.round(x))
    elif rounding == "floor":
        idx = np.floor(x)
    elif rounding == "ceil":
        idx = np.ceil(x)
    else:
        raise Unsupported(f"nearest_mode={rounding!r}")
    idx = np.clip(idx, 0, n_in - 1).astype(np.int64)
    m = np.zeros((n_in, n_out))
    m[idx, np.arange(n_out)] = 1.0
    return m, np.zeros(n_out)


def _per_axis(cx: NodeContext, r: int, keep_aspect: bool = False):
    """[(axis, scale or None, size or None, roi_lo, roi_hi)] of the axes the node resizes."""
    axes = cx.attr("axes", None) if cx.version >= 18 else None
    axes = list(range(r)) if axes is None else [norm_axis(a, r, "axes") for a in axes]
    if len(set(axes)) != len(axes):
        raise Unsupported(f"repeated axes {axes}")
    policy = cx.attr("keep_aspect_ratio_policy", "stretch") if cx.version >= 18 else "stretch"

    def known(i, what):
        if not cx.has(i):
            return None
        c = cx.const(i)
        if c is None:
            raise Unsupported(f"{what} must be known at conversion")
        return None if c.size == 0 else np.asarray(c).reshape(-1)

    roi, scales = known(1, "roi"), known(2, "scales")
    own = cx.val(3).ints if scales is None and _own_sizes(cx) else None
    sizes = None if own is not None else known(3, "sizes")
    if own is None and (scales is None) == (sizes is None):
        raise Unsupported("exactly one of scales and sizes must be given")
    given = own if own is not None else scales if scales is not None else sizes
    if len(given) != len(axes) or (roi is not None and len(roi) != 2 * len(axes)):
        raise Unsupported(f"{len(given)} scales/sizes for {len(axes)} axes")
    if scales is None and policy != "stretch" and not keep_aspect:
        raise Unsupported(f"keep_aspect_ratio_policy={policy!r}")
    out = []
    for i, a in enumerate(axes):
        lo, hi = (float(roi[i]), float(roi[len(axes) + i])) if roi is not None else (0.0, 1.0)
        if own is not None:  # x's own size along this axis: the identity (scale 1)
            scale, size = (1.0, None) if isinstance(own[i], Value) else (None, int(own[i]))
        else:
            scale = float(scales[i]) if scales is not None else None
            size = int(sizes[i]) if sizes is not None else None
        out.append((a, scale, size, lo, hi))
    return out


def _own_sizes(cx: NodeContext) -> bool:
    """Whether ``sizes`` is not known at conversion but each of its items is a known int or
    ``x``'s own size along that axis (``F.interpolate(y, size=z.shape[-2:])`` of an input with a
    dynamic batch: ``Concat(Shape(y)[:2], ...)``), which leaves that axis as it is."""
    if not cx.has(3) or cx.const(3) is not None:
        return False
    items = cx.val(3).ints
    if items is None or (cx.attr("axes", None) if cx.version >= 18 else None) is not None:
        return False
    x = cx.x(0)
    for a, it in enumerate(items):
        if isinstance(it, Value) and not (it.node.kind == "aten::size" and len(it.node.inputs) == 2
                                          and it.node.inputs[0] is x
                                          and const_or(it.node.inputs[1], None) in (a, a - len(items))):
            return False
    return True


def resize(cx: NodeContext):
    mode = cx.attr("mode", "nearest")
    ctm = cx.attr("coordinate_transformation_mode", "half_pixel")
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"mode={mode!r}")
    for k in ("cubic_coeff_a", "exclude_outside", "extrapolation_value", "nearest_mode", "antialias"):
        cx.attr(k, None)
    dt = cx.dtype(0)
    if dt is None or (mode != "nearest" and dt not in ("float32", "float64")):
        raise Unsupported(f"{mode} resizing of {dt} data")
    r = cx.rank(0)
    shape = cx.shape(0)
    policy = cx.attr("keep_aspect_ratio_policy", "stretch") if cx.version >= 18 else "stretch"
    kept = policy != "stretch" and cx.has(3) and cx.const(3) is not None and cx.const(3).size
    if kept and (mode == "nearest" or ctm == "tf_crop_and_resize"):
        return _nearest_by_probe(cx, mode, ctm, shape)
    y = cx.x(0)
    resized = _per_axis(cx, r, keep_aspect=bool(kept))
    common = _common_ratio_axis(policy, resized, shape) if kept else None
    for a, scale, size, lo, hi in resized:
        n_in = shape[a]
        trivial_roi = ctm != "tf_crop_and_resize" or (lo, hi) == (0.0, 1.0)
        if trivial_roi and (scale == 1.0 or size == n_in) and common is None:
            continue   # the identity along this axis (the reference skips it too), of any size
        if not isinstance(n_in, int):
            raise Unsupported(f"resizing dim {a}, which is not known at conversion")
        if n_in == 0:
            raise Unsupported(f"resizing the empty dim {a}")
        if ctm == "align_corners" and scale is not None:
            # x_in = x_out * (n_in - 1) / (n_out - 1) with n_out the output's (integer) length, as the
            # spec, onnxruntime and torch have it; onnx's reference takes the unrounded n_in * scale
            scale, size = None, int(np.floor(n_in * np.float32(scale)))
        keep = None if common is None else (policy, *common)
        if keep is not None and ctm == "align_corners":   # depends on the output length only (as above)
            keep, size = None, int(common[1] / common[0] * n_in + 0.5)
        m, c = _axis_map(cx, n_in, scale, size, lo, hi, keep)
        if common is not None and m.shape[1] == n_in and np.array_equal(m, np.eye(n_in)) and not np.any(c):
            continue
        y = _apply(cx, y, a, r, m, c, dt, mode)
    return y


def _common_ratio_axis(policy: str, resized, shape) -> tuple[int, int]:
    """(input length, requested size) of the axis whose size ratio ``keep_aspect_ratio_policy``
    makes the one scale of every resized axis (the smallest ratio for not_larger, the largest for
    not_smaller)."""
    dims = []
    for a, _scale, size, _lo, _hi in resized:
        if not isinstance(shape[a], int) or shape[a] == 0:
            raise Unsupported(f"keep_aspect_ratio_policy needs dim {a} known and non-empty at conversion")
        dims.append((size / shape[a], shape[a], size))
    pick = min if policy == "not_larger" else max
    _, n, size = pick(dims, key=lambda d: d[0])
    return n, size


#: the largest input (elements) whose nearest-resize gather map is computed at conversion
PROBE_LIMIT = 1 << 22


def upsample(cx: NodeContext):
    """Upsample (deprecated since opset 10, still in older files) is the Resize ONNX's version
    converter makes of it: ``asymmetric`` coordinates, ``floor`` for nearest, ``linear`` as is."""
    from onnx import helper

    from ..context import NodeContext as Context

    mode = cx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise Unsupported(f"mode={mode!r}")
    node = helper.make_node("Resize", [cx.node.input[0], "", cx.node.input[1]], list(cx.node.output),
                            name=cx.node.name, mode="nearest" if mode == "nearest" else "linear",
                            coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    rcx = Context(cx.conv, node, 13, [cx.vals[0], None, cx.vals[1]], cx.out_types, cx.source)
    rcx.scope = getattr(cx, "scope", None)
    out = resize(rcx)
    cx.unknown_inputs.extend(n for n in rcx.unknown_inputs if n not in cx.unknown_inputs)
    return out


def _nearest_by_probe(cx: NodeContext, mode: str, ctm: str, shape):
    """``keep_aspect_ratio_policy`` not_larger/not_smaller (one scale for every resized axis, sizes
    rounded from it): for ``nearest`` resizing of a fully static input, onnx's reference Resize run
    at conversion on the element indices gives, per output element, the input element it copies;
    the graph gathers those (a flat ``index_select``)."""
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    if mode != "nearest" or ctm == "tf_crop_and_resize":
        raise Unsupported(f"keep_aspect_ratio_policy with mode={mode!r}, coordinate_transformation_mode={ctm!r}"
                          " (srcore has it for nearest resizing)")
    if shape is None or any(not isinstance(d, int) for d in shape):
        raise Unsupported("keep_aspect_ratio_policy needs the input's shape known at conversion")
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0 or n > PROBE_LIMIT:
        raise Unsupported(f"keep_aspect_ratio_policy on an input of {n} elements")
    attrs = {k: cx.attr(k, d) for k, d in _ATTRS.items() if cx.has_attr(k)}
    for k in ("keep_aspect_ratio_policy", "axes"):
        if cx.has_attr(k):
            attrs[k] = cx.attr(k)
    inits = [numpy_helper.from_array(np.asarray(cx.const(3), np.int64), "sizes")]
    names = ["x", "", "", "sizes"]
    if cx.has(1) and cx.const(1) is not None and cx.const(1).size:
        inits.append(numpy_helper.from_array(np.asarray(cx.const(1), np.float32), "roi"))
        names[1] = "roi"
    node = helper.make_node("Resize", names, ["y"], **attrs)
    g = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", 11, list(shape))],
                          [helper.make_tensor_value_info("y", 11, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19 if cx.version >= 19 else 18)])
    probe = np.arange(n, dtype=np.float64).reshape(shape)
    src = np.asarray(ReferenceEvaluator(model).run(None, {"x": probe})[0])
    if not np.array_equal(src, np.floor(src)) or src.min(initial=0) < 0 or src.max(initial=0) >= n:
        raise Unsupported("the nearest resize does not copy input elements")
    flat = cx.op("aten::reshape", cx.x(0), [-1])
    out = cx.op("aten::index_select", flat, 0, _const(cx, src.astype(np.int64).reshape(-1), "resize_index"))
    return cx.op("aten::reshape", out, [int(d) for d in src.shape])


def _apply(cx: NodeContext, y, a: int, r: int, m: np.ndarray, c: np.ndarray, dt: str, mode: str):
    n_out = m.shape[1]
    one_hot = np.isin(m, (0.0, 1.0)).all() and (m.sum(0) <= 1).all()
    bshape = [1] * r
    bshape[a] = n_out
    if mode == "nearest" and one_hot:
        idx = m.argmax(0).astype(np.int64)
        out = cx.op("aten::index_select", y, a, _const(cx, idx, "resize_index"))
        outside = m.sum(0) == 0   # tf_crop_and_resize: the extrapolation value, not data
        if outside.any():
            keep = _const(cx, (~outside).reshape(bshape), "resize_inside")
            out = cx.op("aten::where", keep, out, _const(cx, c.astype(dt).reshape(bshape), "resize_extrapolated"))
        return out
    w = _const(cx, m.astype(dt), "resize_weights")
    if a == r - 1:
        out = cx.op("aten::matmul", y, w)
    else:  # the axis last, the product, and back
        perm = [d for d in range(r) if d != a] + [a]
        back = [perm.index(d) for d in range(r)]
        out = cx.op("aten::permute", cx.op("aten::matmul", cx.op("aten::permute", y, perm), w), back)
    if np.any(c != 0):
        out = cx.op("aten::add", out, _const(cx, c.astype(dt).reshape(bshape), "resize_extrapolated"))
    return out


def _const(cx: NodeContext, arr: np.ndarray, name: str):
    return cx.conv.param(name, np.ascontiguousarray(arr), TensorType(str(arr.dtype), arr.shape))


CONVERTERS = table(Resize=(resize, 11, 13, 18, 19), Upsample=(upsample, 10))

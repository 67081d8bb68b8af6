"""NonMaxSuppression, RoiAlign and Unique (ops/detection.py onto srcore's own ops, cpu-plugin natives)
against onnxruntime beyond the ONNX node tests: random boxes with tied scores, run-time thresholds,
both RoiAlign coordinate modes and both pooling modes, Unique's four outputs, a detector's tail
(scores -> NMS -> Gather of the kept boxes), and refusals naming the node."""
from __future__ import annotations

import numpy as np

import pytest
from onnx import TensorProto, helper

import srcore

ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.one_pass

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, opset):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(o[0], o[1], o[2] if len(o) > 2 else None) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _both(m, feeds):
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = srcore.StaticModule(srcore.from_onnx(m))(*feeds.values())
    return (list(got) if isinstance(got, (tuple, list)) else [got]), want


def _boxes(rng, b, n):
    """Boxes clustered so that many overlap; half given with flipped corners."""
    c = rng.uniform(0, 10, (b, n, 2)).round(1)
    wh = rng.uniform(1, 4, (b, n, 2)).round(1)
    lo, hi = c - wh / 2, c + wh / 2
    boxes = np.concatenate([lo, hi], -1)
    boxes[:, ::2] = np.concatenate([hi, lo], -1)[:, ::2]
    return boxes.astype(np.float32)


@pytest.mark.parametrize("center", [0, 1])
def test_nms_with_tied_scores_and_run_time_thresholds_matches_onnxruntime(center):
    rng = np.random.default_rng(center)
    b, c, n = 2, 3, 40
    boxes = _boxes(rng, b, n)
    if center:  # [x_center, y_center, width, height]
        boxes = np.abs(boxes)
    scores = rng.choice(np.float32([0.1, 0.3, 0.5, 0.7, 0.9]), (b, c, n)).astype(np.float32)  # many ties
    m = _model([helper.make_node("NonMaxSuppression", ["b", "s", "k", "iou", "st"], ["y"], center_point_box=center)],
               [("b", F, [b, n, 4]), ("s", F, [b, c, n]), ("k", I64, [1]), ("iou", F, [1]), ("st", F, [1])],
               [("y", I64)], 11)
    for k, iou, st in ((5, 0.3, 0.2), (100, 0.5, 0.0), (3, 0.0, 0.6)):
        feeds = {"b": boxes, "s": scores, "k": np.array([k], np.int64), "iou": np.float32([iou]),
                 "st": np.float32([st])}
        (got,), (want,) = _both(m, feeds)
        assert got.dtype == np.int64 and want.shape[0] > 0
        np.testing.assert_array_equal(got, want)


def test_detector_tail_scores_nms_gather_boxes_matches_onnxruntime():
    """A detector's post-processing: sigmoid scores -> NMS (constant limit and thresholds, no score
    threshold input) -> the kept box indices -> Gather of the boxes."""
    rng = np.random.default_rng(3)
    n, c = 50, 2
    consts = [helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", I64, [1], [4])),
              helper.make_node("Constant", [], ["iou"], value=helper.make_tensor("iou", F, [], [0.4])),
              helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", I64, [], [2]))]
    nodes = consts + [helper.make_node("Sigmoid", ["logits"], ["s"]),
                      helper.make_node("NonMaxSuppression", ["b", "s", "k", "iou"], ["sel"]),
                      helper.make_node("Gather", ["sel", "two"], ["idx"], axis=1),
                      helper.make_node("Squeeze", ["b"], ["b2"], axes=[0]),
                      helper.make_node("Gather", ["b2", "idx"], ["kept"], axis=0)]
    m = _model(nodes, [("b", F, [1, n, 4]), ("logits", F, [1, c, n])], [("kept", F), ("sel", I64)], 11)
    feeds = {"b": _boxes(rng, 1, n), "logits": rng.standard_normal((1, c, n)).astype(np.float32)}
    got, want = _both(m, feeds)
    assert want[0].shape == (8, 4)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("opset, ctm, mode, ratio", [(16, "half_pixel", "avg", 0), (16, "output_half_pixel", "max", 2),
                                                      (10, None, "avg", 2), (16, "half_pixel", "max", 0)])
def test_roi_align_matches_onnxruntime(opset, ctm, mode, ratio):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 12, 10)).astype(np.float32)
    xy = rng.uniform(-2, 16, (7, 2))
    rois = np.concatenate([xy, xy + rng.uniform(0.3, 9, (7, 2))], 1).astype(np.float32)  # some past the edge
    idx = rng.integers(0, 2, 7).astype(np.int64)
    attrs = dict(output_height=3, output_width=4, sampling_ratio=ratio, spatial_scale=0.8, mode=mode)
    if ctm:
        attrs["coordinate_transformation_mode"] = ctm
    m = _model([helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], **attrs)],
               [("x", F, [2, 3, 12, 10]), ("r", F, [7, 4]), ("i", I64, [7])], [("y", F, [7, 3, 3, 4])], opset)
    (got,), (want,) = _both(m, {"x": x, "r": rois, "i": idx})
    assert got.shape == (7, 3, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("sorted_", [0, 1])
def test_unique_four_outputs_match_onnxruntime(axis, sorted_):
    x = np.random.default_rng(2).integers(0, 3, (6, 4)).astype(np.float32)
    x[3] = x[1]
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    m = _model([helper.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"], **attrs)],
               [("x", F, [6, 4])], [("y", F), ("first", I64), ("inverse", I64), ("counts", I64)], 11)
    got, want = _both(m, {"x": x})
    for g_, w in zip(got, want):
        np.testing.assert_array_equal(g_, w)


def test_unique_first_output_only_and_bad_nms_input_is_refused_naming_the_node():
    m = _model([helper.make_node("Unique", ["x"], ["y"], sorted=0)], [("x", I64, [5])], [("y", I64)], 11)
    (got,), (want,) = _both(m, {"x": np.array([3, 1, 3, 2, 1], np.int64)})
    np.testing.assert_array_equal(got, want)
    bad = _model([helper.make_node("NonMaxSuppression", ["b", "s"], ["y"], name="nms", center_point_box=2)],
                 [("b", F, [1, 3, 4]), ("s", F, [1, 1, 3])], [("y", I64)], 11)
    with pytest.raises(srcore.SrcoreError, match=r"NonMaxSuppression node 'nms'.*center_point_box=2"):
        srcore.from_onnx(bad)

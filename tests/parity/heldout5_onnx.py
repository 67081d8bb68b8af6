"""Hand-built ONNX files for the fifth held-out zoo (test_heldout5_zoo.py): what torch.onnx's
TorchScript exporter never writes: sequence ops (SplitToSequence, SequenceAt, ConcatFromSequence,
SequenceInsert/Erase/Length), Optional, DFT and STFT, Resize in every coordinate transformation
mode (linear, cubic, nearest with its rounding modes, antialias, keep_aspect_ratio_policy, axes),
block-quantized DequantizeLinear (opset 21), float16 graphs, old-opset files (Upsample at opsets 7
and 9, initializers also listed as graph inputs), GridSample modes, Col2Im, CenterCropPad,
AffineGrid, Gelu, Mish, bitwise ops and ScatterElements/ScatterND reductions; onnxruntime is the
reference.

``CASES``: name -> (ModelProto, feeds). Built at import (small).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h

from heldout4_onnx import c, model, vi

F, F16 = T.FLOAT, T.FLOAT16
CASES = {}
rng = np.random.default_rng(5)


def _r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


x345 = _r(3, 4, 5)
img = _r(1, 2, 4, 5)

# --- sequences and Optional -------------------------------------------------------------------
for keep in (0, 1):
    CASES[f"split_to_sequence_keep{keep}"] = (model([
        h.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=keep),
        h.make_node("SequenceAt", ["s", "i"], ["a"]),
        h.make_node("SequenceLength", ["s"], ["n"]),
        h.make_node("ConcatFromSequence", ["s"], ["y"], axis=-1, new_axis=1)],
        [vi("x", F, [3, 4, 5])], [vi("a", F, None), vi("n", T.INT64, None), vi("y", F, None)],
        [c("i", np.array(-1, np.int64))]), {"x": x345})
CASES["split_to_sequence_sizes"] = (model([
    h.make_node("SplitToSequence", ["x", "sp"], ["s"], axis=2),
    h.make_node("SequenceAt", ["s", "i"], ["a"]),
    h.make_node("ConcatFromSequence", ["s"], ["y"], axis=-1)],
    [vi("x", F, [3, 4, 5])], [vi("a", F, None), vi("y", F, None)],
    [c("sp", np.array([2, 3], np.int64)), c("i", np.array(1, np.int64))]), {"x": x345})
CASES["split_to_sequence_scalar_split"] = (model([
    h.make_node("SplitToSequence", ["x", "sp"], ["s"], axis=2),
    h.make_node("SequenceAt", ["s", "i"], ["a"]),
    h.make_node("ConcatFromSequence", ["s"], ["y"], axis=2)],
    [vi("x", F, [3, 4, 5])], [vi("a", F, None), vi("y", F, None)],
    [c("sp", np.array(2, np.int64)), c("i", np.array(2, np.int64))]), {"x": x345})
CASES["sequence_construct_insert_erase"] = (model([
    h.make_node("SequenceConstruct", ["a", "b"], ["s"]),
    h.make_node("SequenceInsert", ["s", "c", "p"], ["s2"]),
    h.make_node("SequenceErase", ["s2"], ["s3"]),
    h.make_node("SequenceLength", ["s3"], ["n"]),
    h.make_node("ConcatFromSequence", ["s3"], ["y"], axis=0, new_axis=1),
    h.make_node("SequenceEmpty", [], ["e"], dtype=F),
    h.make_node("SequenceInsert", ["e", "a"], ["e1"]),
    h.make_node("SequenceAt", ["e1", "z"], ["w"])],
    [vi("a", F, [2, 3]), vi("b", F, [2, 3]), vi("c", F, [2, 3])], [vi("n", T.INT64, None), vi("y", F, None),
                                                                     vi("w", F, [2, 3])],
    [c("p", np.array(0, np.int64)), c("z", np.array(0, np.int64))]),
    {"a": _r(2, 3), "b": _r(2, 3), "c": _r(2, 3)})
CASES["optional_has_get"] = (model([
    h.make_node("Optional", ["x"], ["o"]),
    h.make_node("OptionalHasElement", ["o"], ["has"]),
    h.make_node("OptionalGetElement", ["o"], ["g"]),
    h.make_node("Relu", ["g"], ["y"])],
    [vi("x", F, [3, 4])], [vi("has", T.BOOL, None), vi("y", F, None)]), {"x": _r(3, 4)})
CASES["optional_empty_and_sequence"] = (model([
    h.make_node("Optional", [], ["e"], type=h.make_tensor_type_proto(F, [2])),
    h.make_node("OptionalHasElement", ["e"], ["has_e"]),
    h.make_node("SplitToSequence", ["x"], ["s"], axis=0),
    h.make_node("Optional", ["s"], ["os"]),
    h.make_node("OptionalHasElement", ["os"], ["has_s"]),
    h.make_node("OptionalGetElement", ["os"], ["s2"]),
    h.make_node("ConcatFromSequence", ["s2"], ["y"], axis=1)],
    [vi("x", F, [3, 4])], [vi("has_e", T.BOOL, []), vi("has_s", T.BOOL, []), vi("y", F, [1, 12])]),
    {"x": _r(3, 4)})

# --- DFT / STFT ---------------------------------------------------------------------------------
sig = _r(2, 16, 1)
for onesided in (0, 1):
    for inverse in (0, 1):
        if onesided and inverse:
            continue
        CASES[f"dft17_one{onesided}_inv{inverse}"] = (model([
            h.make_node("DFT", ["x"], ["y"], axis=1, onesided=onesided, inverse=inverse)],
            [vi("x", F, [2, 16, 1])], [vi("y", F, None)], opset=17), {"x": sig})
CASES["dft17_len_complex_in"] = (model([h.make_node("DFT", ["x", "n"], ["y"], axis=1)],
    [vi("x", F, [2, 8, 2])], [vi("y", F, None)], [c("n", np.array(12, np.int64))], opset=17), {"x": _r(2, 8, 2)})
CASES["dft20_axis_input"] = (model([h.make_node("DFT", ["x", "", "ax"], ["y"], onesided=1)],
    [vi("x", F, [3, 10, 1])], [vi("y", F, None)], [c("ax", np.array(-2, np.int64))], opset=20), {"x": _r(3, 10, 1)})
win = np.hanning(8).astype(np.float32)
CASES["stft_window_onesided"] = (model([h.make_node("STFT", ["x", "st", "w"], ["y"], onesided=1)],
    [vi("x", F, [2, 32, 1])], [vi("y", F, None)], [c("st", np.array(4, np.int64)), c("w", win)], opset=17),
    {"x": _r(2, 32, 1)})
CASES["stft_length_twosided"] = (model([h.make_node("STFT", ["x", "st", "", "l"], ["y"], onesided=0)],
    [vi("x", F, [1, 20, 1])], [vi("y", F, None)], [c("st", np.array(3, np.int64)), c("l", np.array(6, np.int64))],
    opset=17), {"x": _r(1, 20, 1)})

# --- Resize ----------------------------------------------------------------------------------------
MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric")
for mode in ("linear", "cubic"):
    for ct in MODES:
        for up in (True, False):
            scales = np.array([1, 1, 1.75, 2.5] if up else [1, 1, 0.6, 0.5], np.float32)
            kw = {"cubic_coeff_a": -0.5, "exclude_outside": 1} if (mode == "cubic" and ct == "asymmetric") else {}
            CASES[f"resize_{mode}_{ct}_{'up' if up else 'down'}"] = (model([
                h.make_node("Resize", ["x", "", "s"], ["y"], mode=mode, coordinate_transformation_mode=ct, **kw)],
                [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("s", scales)], opset=19), {"x": img})
for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
    for ct in ("half_pixel", "asymmetric", "align_corners"):
        CASES[f"resize_nearest_{nm}_{ct}"] = (model([
            h.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="nearest", nearest_mode=nm,
                        coordinate_transformation_mode=ct)],
            [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("sz", np.array([1, 2, 7, 3], np.int64))], opset=19),
            {"x": img})
CASES["resize_tf_crop_and_resize"] = (model([
    h.make_node("Resize", ["x", "roi", "", "sz"], ["y"], mode="linear",
                coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0)],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)],
    [c("roi", np.array([0, 0, -0.2, 0.1, 1, 1, 0.8, 1.3], np.float32)), c("sz", np.array([1, 2, 5, 6], np.int64))],
    opset=19), {"x": img})
for mode in ("linear", "cubic"):
    CASES[f"resize_{mode}_antialias_down"] = (model([
        h.make_node("Resize", ["x", "", "s"], ["y"], mode=mode, antialias=1)],
        [vi("x", F, [1, 2, 8, 9])], [vi("y", F, None)], [c("s", np.array([1, 1, 0.5, 0.4], np.float32))],
        opset=18), {"x": _r(1, 2, 8, 9)})
for pol in ("not_larger", "not_smaller"):
    CASES[f"resize_keep_aspect_{pol}_axes"] = (model([
        h.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="linear", keep_aspect_ratio_policy=pol,
                    axes=[2, 3])],
        [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("sz", np.array([6, 9], np.int64))], opset=18),
        {"x": img})
for pol in ("not_larger", "not_smaller"):
    CASES[f"resize_keep_aspect_cubic_{pol}"] = (model([
        h.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="cubic", keep_aspect_ratio_policy=pol, axes=[3, 2],
                    coordinate_transformation_mode="pytorch_half_pixel")],
        [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("sz", np.array([7, 7], np.int64))], opset=19), {"x": img})
CASES["resize_keep_aspect_linear_align_corners"] = (model([
    h.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="linear", keep_aspect_ratio_policy="not_smaller",
                coordinate_transformation_mode="align_corners", axes=[2, 3])],
    [vi("x", F, [1, 3, 4, 5])], [vi("y", F, None)], [c("sz", np.array([3, 2], np.int64))], opset=19),
    {"x": _r(1, 3, 4, 5)})
CASES["resize_linear_3d_sizes"] = (model([
    h.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
    [vi("x", F, [1, 1, 3, 4, 5])], [vi("y", F, None)], [c("sz", np.array([1, 1, 5, 3, 7], np.int64))], opset=19),
    {"x": _r(1, 1, 3, 4, 5)})
CASES["resize_cubic_axes_neg"] = (model([
    h.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic", axes=[-1, -2])],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("s", np.array([1.5, 1.25], np.float32))], opset=19),
    {"x": img})

# --- old opsets --------------------------------------------------------------------------------------
CASES["upsample9_nearest"] = (model([h.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("s", np.array([1, 1, 2, 3], np.float32))], opset=9),
    {"x": img})
CASES["upsample9_linear"] = (model([h.make_node("Upsample", ["x", "s"], ["y"], mode="linear")],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("s", np.array([1, 1, 2, 2], np.float32))], opset=9),
    {"x": img})
CASES["upsample7_attr"] = (model([h.make_node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0])],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], opset=7), {"x": img})
CASES["resize10_nearest"] = (model([h.make_node("Resize", ["x", "s"], ["y"], mode="nearest")],
    [vi("x", F, [1, 2, 4, 5])], [vi("y", F, None)], [c("s", np.array([1, 1, 1.5, 2], np.float32))], opset=10),
    {"x": img})
# initializers listed as graph inputs too (what opset <= 8 exporters wrote): their values are defaults
w9, b9 = _r(3, 2, 3, 3), _r(3)
_m = model([h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            h.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["y"], epsilon=1e-3)],
           [vi("x", F, [1, 2, 4, 5]), vi("w", F, [3, 2, 3, 3]), vi("b", F, [3]), vi("g", F, [3]), vi("be", F, [3]),
            vi("mu", F, [3]), vi("var", F, [3])], [vi("y", F, None)],
           [c("w", w9), c("b", b9), c("g", _r(3)), c("be", _r(3)), c("mu", _r(3)), c("var", np.abs(_r(3)) + 0.5)],
           opset=9)
CASES["initializers_as_inputs9"] = (_m, {"x": img})

# --- quantization (opset 21 blocks), float16 graphs ------------------------------------------------
wq = rng.integers(-8, 8, (4, 6), dtype=np.int8)
CASES["dequantize_block21"] = (model([
    h.make_node("DequantizeLinear", ["w", "s", "z"], ["wd"], axis=1, block_size=3),
    h.make_node("MatMul", ["x", "wd"], ["y"])],
    [vi("x", F, [2, 4])], [vi("y", F, None)],
    [c("w", wq), c("s", (np.abs(_r(4, 2)) * 0.1 + 0.01).astype(np.float32)),
     c("z", rng.integers(-2, 3, (4, 2), dtype=np.int8))], opset=21), {"x": _r(2, 4)})
CASES["dequantize_block21_axis0_uint8"] = (model([
    h.make_node("DequantizeLinear", ["w", "s"], ["y"], axis=0, block_size=2)],
    [vi("w", T.UINT8, [5, 3])], [vi("y", F, None)], [c("s", (np.abs(_r(3, 3)) + 0.1).astype(np.float32))],
    opset=21), {"w": rng.integers(0, 256, (5, 3), dtype=np.uint8)})
CASES["quantize_block21"] = (model([
    h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=2),
    h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=2)],
    [vi("x", F, [3, 4])], [vi("q", T.INT8, None), vi("y", F, None)],
    [c("s", np.array([[0.02, 0.05], [0.1, 0.03], [0.04, 0.06]], np.float32)),
     c("z", np.array([[1, -2], [0, 3], [-1, 0]], np.int8))], opset=21), {"x": _r(3, 4)})
CASES["float16_conv_gemm_softmax"] = (model([
    h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
    h.make_node("GlobalAveragePool", ["r"], ["p"]), h.make_node("Flatten", ["p"], ["f"]),
    h.make_node("Gemm", ["f", "wg", "bg"], ["g"], transB=1), h.make_node("Mul", ["g", "half"], ["m"]),
    h.make_node("Softmax", ["m"], ["y"], axis=-1), h.make_node("Cast", ["y"], ["y32"], to=F)],
    [vi("x", F16, [2, 2, 4, 5])], [vi("y", F16, None), vi("y32", F, None)],
    [c("w", _r(3, 2, 3, 3, dtype=np.float16)), c("b", _r(3, dtype=np.float16)), c("wg", _r(4, 3, dtype=np.float16)),
     c("bg", _r(4, dtype=np.float16)), c("half", np.array(0.3, np.float16))]),
    {"x": _r(2, 2, 4, 5, dtype=np.float16)})
CASES["float16_layernorm_matmul"] = (model([
    h.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
    h.make_node("MatMul", ["n", "w"], ["m"]), h.make_node("Gelu", ["m"], ["y"])],
    [vi("x", F16, [2, 3, 8])], [vi("y", F16, None)],
    [c("g", _r(8, dtype=np.float16)), c("b", _r(8, dtype=np.float16)), c("w", _r(8, 4, dtype=np.float16))], opset=20),
    {"x": _r(2, 3, 8, dtype=np.float16)})

# --- newer ops ---------------------------------------------------------------------------------------
for mode in ("bilinear", "nearest", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        for ac in (0, 1):
            CASES[f"gridsample_{mode}_{pad}_ac{ac}"] = (model([
                h.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=pad, align_corners=ac)],
                [vi("x", F, [1, 2, 4, 5]), vi("g", F, [1, 3, 4, 2])], [vi("y", F, None)], opset=16),
                {"x": img, "g": (rng.random((1, 3, 4, 2)) * 2.6 - 1.3).astype(np.float32)})
CASES["gridsample20_linear_3d"] = (model([
    h.make_node("GridSample", ["x", "g"], ["y"], mode="linear", padding_mode="border")],
    [vi("x", F, [1, 2, 3, 4, 5]), vi("g", F, [1, 2, 3, 2, 3])], [vi("y", F, None)], opset=20),
    {"x": _r(1, 2, 3, 4, 5), "g": (rng.random((1, 2, 3, 2, 3)) * 2.2 - 1.1).astype(np.float32)})
CASES["col2im"] = (model([h.make_node("Col2Im", ["x", "isz", "bsz"], ["y"], strides=[1, 2], pads=[1, 0, 1, 1])],
    [vi("x", F, [1, 8, 18])], [vi("y", F, None)],
    [c("isz", np.array([5, 6], np.int64)), c("bsz", np.array([2, 2], np.int64))], opset=18), {"x": _r(1, 8, 18)})
CASES["center_crop_pad"] = (model([h.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[1, 2])],
    [vi("x", F, [3, 4, 5])], [vi("y", F, None)], [c("s", np.array([7, 2], np.int64))], opset=18), {"x": x345})
CASES["affine_grid"] = (model([h.make_node("AffineGrid", ["t", "sz"], ["y"], align_corners=0)],
    [vi("t", F, [2, 2, 3])], [vi("y", F, None)], [c("sz", np.array([2, 3, 4, 5], np.int64))], opset=20),
    {"t": _r(2, 2, 3)})
CASES["gelu_tanh_mish"] = (model([h.make_node("Gelu", ["x"], ["a"], approximate="tanh"),
                                  h.make_node("Mish", ["x"], ["b"])],
    [vi("x", F, [3, 4, 5])], [vi("a", F, None), vi("b", F, None)], opset=20), {"x": x345})
ai = rng.integers(0, 256, (3, 4), dtype=np.uint8)
CASES["bitwise_uint8"] = (model([h.make_node("BitwiseAnd", ["a", "b"], ["x"]), h.make_node("BitwiseOr", ["a", "b"], ["o"]),
                                 h.make_node("BitwiseXor", ["a", "b"], ["e"]), h.make_node("BitwiseNot", ["a"], ["n"]),
                                 h.make_node("BitShift", ["a", "k"], ["s"], direction="RIGHT")],
    [vi("a", T.UINT8, [3, 4]), vi("b", T.UINT8, [3, 4])],
    [vi("x", T.UINT8, None), vi("o", T.UINT8, None), vi("e", T.UINT8, None), vi("n", T.UINT8, None),
     vi("s", T.UINT8, None)], [c("k", np.array([1, 2, 3, 7], np.uint8))], opset=18),
    {"a": ai, "b": rng.integers(0, 256, (3, 4), dtype=np.uint8)})
for red in ("add", "mul", "max", "min"):
    CASES[f"scatter_elements_{red}"] = (model([
        h.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=red)],
        [vi("x", F, [3, 5]), vi("u", F, [3, 4])], [vi("y", F, None)],
        [c("i", np.array([[0, 1, 0, 4], [2, 2, 2, 2], [-1, 3, 1, -1]], np.int64))], opset=18),
        {"x": _r(3, 5), "u": _r(3, 4)})
    CASES[f"scatter_nd_{red}"] = (model([h.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=red)],
        [vi("x", F, [4, 3]), vi("u", F, [3, 3])], [vi("y", F, None)],
        [c("i", np.array([[1], [3], [1]], np.int64))], opset=18), {"x": _r(4, 3), "u": _r(3, 3)})
CASES["group_norm21"] = (model([h.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-3)],
    [vi("x", F, [2, 4, 3, 2])], [vi("y", F, [2, 4, 3, 2])], [c("s", _r(4)), c("b", _r(4))], opset=21), {"x": _r(2, 4, 3, 2)})

"""Less common ONNX ops older and signal-processing files carry: the Hann/Hamming/Blackman windows,
ReverseSequence, CenterCropPad, Compress, MaxUnpool, Col2Im, DFT, STFT, Det (LpPool and
MeanVarianceNormalization are in :mod:`.nn`).

Each follows ONNX's definition (its function body or reference implementation); a window is a
constant computed here from its (constant) size.
"""
from __future__ import annotations

import numpy as np

from ....ir.types import TensorType
from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS, dtype_of, scalar_type
from ..values import Val
from ._util import cast, dim_item, norm_axis, table


def _window(kind: str):
    def convert(cx: NodeContext):
        size = int(cx.scalar(0, "size"))
        periodic = int(cx.attr("periodic", 1))
        out = dtype_of(int(cx.attr("output_datatype", 1)))
        if size < 0:
            raise Unsupported(f"size {size}")
        n = np.arange(size, dtype=np.float64)
        den = size if periodic else size - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            if kind == "hann":
                w = np.sin(n * np.pi / den) ** 2
            elif kind == "hamming":
                alpha = 25.0 / 46.0
                w = alpha - np.cos(n * np.pi * 2 / den) * (1 - alpha)
            else:
                w = np.cos((n * (np.pi * 2)) / den) * -0.5 + np.cos((n * (np.pi * 4)) / den) * 0.08 + 0.42
        return Val("", TensorType(out, (size,)), const=w.astype(out))
    convert.__name__ = f"{kind}_window"
    return convert


def reverse_sequence(cx: NodeContext):
    """``y[t, b] = x[lens[b] - 1 - t, b]`` for ``t < lens[b]``, else ``x[t, b]``: one gather along time."""
    r = cx.rank(0)
    if r < 2:
        raise Unsupported(f"input of rank {r} (2 or more expected)")
    bax, tax = norm_axis(int(cx.attr("batch_axis", 1)), r), norm_axis(int(cx.attr("time_axis", 0)), r)
    if {bax, tax} != {0, 1}:
        raise Unsupported(f"batch_axis={bax}, time_axis={tax} (0 and 1 expected)")
    x = cx.x(0)
    t = cx.op("aten::arange", dim_item(cx, 0, x, tax), scalar_type("int64"), None, None, None)
    lens = cast(cx, cx.x(1), "int64")
    shape = [1] * r
    shape[tax] = -1
    t = cx.op("aten::reshape", t, shape)
    shape = [1] * r
    shape[bax] = -1
    lens = cx.op("aten::reshape", lens, shape)
    rev = cx.op("aten::sub", cx.op("aten::sub", lens, 1, 1), t)
    idx = cx.op("aten::where", cx.op("aten::lt", t, lens), rev, t)
    return cx.op("aten::gather", x, tax, cx.op("aten::expand_as", idx, x), False)


def center_crop_pad(cx: NodeContext):
    r = cx.rank(0)
    target = cx.ints(1, "shape")
    axes = [norm_axis(a, r) for a in cx.attr("axes", list(range(r)))]
    if len(axes) != len(target):
        raise Unsupported(f"shape {target} for axes {axes}")
    shape = cx.shape(0)
    x = cx.x(0)
    for a, want in zip(axes, target):
        dim = shape[a] if shape is not None else None
        if not isinstance(dim, int):
            raise Unsupported(f"CenterCropPad needs dim {a} known at conversion")
        if want < dim:
            x = cx.op("aten::slice", x, a, (dim - want) // 2, (dim - want) // 2 + want, 1)
        elif want > dim:
            d = want - dim
            pad = [0, 0] * (r - 1 - a) + [d // 2, d - d // 2]
            x = cx.op("aten::constant_pad_nd", x, pad, 0)
    return x


def compress(cx: NodeContext):
    """``x`` at the positions where the 1-D ``condition`` is true (it may be shorter than the axis),
    along ``axis`` or of the flattened ``x``: an ``index_select`` of a constant index when the
    condition is known at conversion, else of its ``nonzero`` positions."""
    cx.require_dtype(1, {"bool"}, "condition")
    if cx.rank(1) != 1:
        raise Unsupported("condition must be 1-D")
    axis = cx.attr("axis", None)
    x = cx.x(0)
    if axis is None:
        x = cx.op("aten::reshape", x, [-1])
        axis = 0
    else:
        axis = norm_axis(int(axis), cx.rank(0))
    c = cx.const(1)
    if c is not None:   # the kept positions are known: a constant index (a condition longer than the dim is cut)
        n = dim_item(cx, 0, cx.x(0), axis) if cx.attr("axis", None) is not None else None
        keep = np.flatnonzero(c.reshape(-1))
        if isinstance(n, int):
            keep = keep[keep < n]
        elif n is None and cx.shape(0) is not None and all(isinstance(d, int) for d in cx.shape(0)):
            keep = keep[keep < int(np.prod(cx.shape(0)))]
        idx = cx.conv.tensor_of(Val(f"{cx.node.name or 'compress'}.index", const=keep.astype(np.int64)))
    else:
        idx = cx.op("aten::reshape", cx.op("aten::nonzero", cx.x(1)), [-1])
    return cx.op("aten::index_select", x, axis, idx)


def max_unpool(cx: NodeContext):
    """``Y.flat[I.flat] = X.flat`` in zeros of the inferred shape (I holds MaxPool's flat indices),
    padded at the end to ``output_shape`` when given (as onnx's reference and backend test have it;
    onnxruntime places the indices in the output_shape's layout instead). The batch may be dynamic
    (then without output_shape)."""
    cx.require_dtype(0, FLOATS, "X")
    shape = cx.shape(0)
    if shape is None or not all(isinstance(d, int) for d in shape[1:]):
        raise Unsupported("MaxUnpool needs X's channels and spatial dims known at conversion")
    n = len(shape) - 2
    kernel = list(cx.attr("kernel_shape"))
    strides = list(cx.attr("strides", [1] * n))
    pads = list(cx.attr("pads", [0] * (2 * n)))
    if len(kernel) != n or len(strides) != n or len(pads) != 2 * n:
        raise Unsupported(f"kernel_shape {kernel}, strides {strides}, pads {pads} for {n} spatial dims")
    inferred = list(shape[:2]) + [(shape[2 + d] - 1) * strides[d] - (pads[d] + pads[n + d]) + kernel[d]
                                  for d in range(n)]
    per_sample = int(np.prod(inferred[1:]))
    if isinstance(shape[0], int):
        size = [shape[0] * per_sample]
    else:   # a dynamic batch (the indices are flat over the whole tensor, the batch included)
        size = cx.list_value([cx.int_op("aten::mul", dim_item(cx, 0, cx.x(0), 0), per_sample)])
        inferred[0] = -1
    flat = cx.op("aten::zeros", size, scalar_type(cx.dtype(0)), None, None, None)
    idx = cx.op("aten::reshape", cast(cx, cx.x(1), "int64"), [-1])
    y = cx.op("aten::reshape", cx.op("aten::scatter", flat, 0, idx, cx.op("aten::reshape", cx.x(0), [-1])), inferred)
    if cx.has(2):
        if inferred[0] == -1:   # its batch would have to equal the input's, unknown here
            raise Unsupported("output_shape with a dynamic batch")
        want = cx.ints(2, "output_shape")
        if len(want) != len(inferred) or any(w < i for w, i in zip(want, inferred)):
            raise Unsupported(f"output_shape {want} for an unpooled shape {inferred}")
        pad = []
        for w, i in zip(reversed(want), reversed(inferred)):
            pad += [0, w - i]
        if any(pad):
            y = cx.op("aten::constant_pad_nd", y, pad, 0.0)
    return y


def col2im(cx: NodeContext):
    """``aten::col2im`` (torch's ``F.fold``, 2-D) onto the padded image, then the padding cut off
    (ONNX's pads may differ at the two ends; torch's are symmetric)."""
    cx.require_dtype(0, FLOATS, "input")
    image, block = cx.ints(1, "image_shape"), cx.ints(2, "block_shape")
    n = len(image)
    if n != 2 or len(block) != 2:
        raise Unsupported(f"{n}-D image (srcore's col2im is 2-D)")
    dil = list(cx.attr("dilations", [1] * n))
    pads = list(cx.attr("pads", [0] * (2 * n)))
    strides = list(cx.attr("strides", [1] * n))
    size = [image[d] + pads[d] + pads[n + d] for d in range(n)]
    y = cx.op("aten::col2im", cx.x(0), size, block, dil, [0] * n, strides)
    for d in range(n):
        if pads[d] or pads[n + d]:
            y = cx.op("aten::slice", y, 2 + d, pads[d], pads[d] + image[d], 1)
    return y


def _transform(cx: NodeContext, re, im, used: int, n: int, inverse: int, onesided: int) -> list:
    """The length-``n`` DFT along the last dim (``used`` samples of it) of ``re + i im`` (float64):
    ``[real, imaginary]``, or ``[real]`` for the one-sided inverse."""
    k_out = n // 2 + 1 if onesided and not inverse else n
    rows = np.arange(used)[:, None]
    cols = np.arange(k_out)[None, :]
    theta = 2 * np.pi * ((rows * cols) % n) / n

    def mat(a, what):
        return cx.conv.tensor_of(Val(f"{cx.node.name or cx.op_type}.{what}", const=a.astype(np.float64)))

    if inverse and onesided:   # irfft: real output from the half spectrum
        w = np.where((np.arange(used) == 0) | ((n % 2 == 0) & (np.arange(used) == n // 2)), 1.0, 2.0)[:, None]
        y = cx.op("aten::matmul", re, mat(w * np.cos(theta) / n, "cos"))
        if im is not None:
            y = cx.op("aten::sub", y, cx.op("aten::matmul", im, mat(w * np.sin(theta) / n, "sin")))
        return [y]
    sign, scale = (1.0, 1.0 / n) if inverse else (-1.0, 1.0)
    c, sn = mat(np.cos(theta) * scale, "cos"), mat(sign * np.sin(theta) * scale, "sin")
    # (re + i im)(c + i sn): re c - im sn, re sn + im c
    y_re, y_im = cx.op("aten::matmul", re, c), cx.op("aten::matmul", re, sn)
    if im is not None:
        y_re = cx.op("aten::sub", y_re, cx.op("aten::matmul", im, sn))
        y_im = cx.op("aten::add", y_im, cx.op("aten::matmul", im, c))
    return [y_re, y_im]


def stft(cx: NodeContext):
    """Frames (``aten::unfold``) times the window, then the DFT of each frame (see ``dft``)."""
    dt = cx.require_dtype(0, FLOATS - {"bfloat16"}, "signal")
    onesided = int(cx.attr("onesided", 1))
    shape = cx.shape(0)
    if shape is None or len(shape) != 3 or shape[-1] not in (1, 2):
        raise Unsupported(f"signal of shape {shape} ([batch, length, 1 or 2] expected)")
    step = int(cx.scalar(1, "frame_step"))
    wshape = cx.shape(2) if cx.has(2) else None
    if cx.has(3):
        length = int(cx.scalar(3, "frame_length"))
    elif wshape is not None and isinstance(wshape[0], int):
        length = wshape[0]
    elif isinstance(shape[1], int) and not cx.has(2):
        length = shape[1]
    else:
        raise Unsupported("the frame length must be known at conversion")
    if wshape is not None and wshape[0] != length:
        raise Unsupported(f"a window of {wshape[0]} samples for frames of {length}")
    if step <= 0 or length <= 0:
        raise Unsupported(f"frame_step {step}, frame_length {length}")
    x = cast(cx, cx.x(0), "float64")
    frames = cx.op("aten::unfold", x, 1, length, step)          # [B, frames, 1 or 2, length]
    if cx.has(2):
        frames = cx.op("aten::mul", frames, cast(cx, cx.x(2), "float64"))
    parts = [cx.op("aten::select", frames, 2, i) for i in range(shape[-1])]
    outs = _transform(cx, parts[0], parts[1] if len(parts) > 1 else None, length, length, 0, onesided)
    return cast(cx, cx.op("aten::stack", outs, -1), dt)


def dft(cx: NodeContext):
    """DFT as float64 matrix products with constant cosine and sine matrices: forward, inverse
    (``1/N``), one-sided forward and one-sided inverse
    (numpy's ``irfft``: the half spectrum weighted 1 at DC and Nyquist, 2 elsewhere)."""
    dt = cx.require_dtype(0, FLOATS - {"bfloat16"}, "input")
    r = cx.rank(0)
    inverse, onesided = int(cx.attr("inverse", 0)), int(cx.attr("onesided", 0))
    if cx.version >= 20:
        axis = cx.scalar(2, "axis") if cx.has(2) else -2
    else:
        axis = cx.attr("axis", 1)
    axis = norm_axis(int(axis), r)
    shape = cx.shape(0)
    if axis == r - 1 or shape is None or not isinstance(shape[axis], int) or shape[-1] not in (1, 2):
        raise Unsupported(f"axis {axis} of an input of shape {shape} (the signal axis must be known and not the "
                          f"last, the last dim 1 or 2)")
    length = shape[axis]
    n = int(cx.scalar(1, "dft_length")) if cx.has(1) else (2 * (length - 1) if inverse and onesided else length)
    if n <= 0:
        raise Unsupported(f"dft_length {n}")
    x = cast(cx, cx.x(0), "float64")   # float64 products: an exact zero of the transform stays ~1e-16
    parts = [cx.op("aten::select", x, -1, i) for i in range(shape[-1])]
    if axis != r - 2:
        parts = [cx.op("aten::transpose", p, axis, r - 2) for p in parts]
    used = min(length, n if not (inverse and onesided) else n // 2 + 1)
    if used < length:
        parts = [cx.op("aten::narrow", p, -1, 0, used) for p in parts]
    outs = _transform(cx, parts[0], parts[1] if len(parts) > 1 else None, used, n, inverse, onesided)
    if axis != r - 2:
        outs = [cx.op("aten::transpose", o, axis, r - 2) for o in outs]
    return cast(cx, cx.op("aten::stack", outs, -1), dt)


def det(cx: NodeContext):
    cx.require_dtype(0, FLOATS - {"bfloat16"}, "X")
    return cx.op("aten::linalg_det", cx.x(0))


CONVERTERS = table(HannWindow=(_window("hann"), 17), HammingWindow=(_window("hamming"), 17),
                   BlackmanWindow=(_window("blackman"), 17), ReverseSequence=(reverse_sequence, 10, 28),
                   CenterCropPad=(center_crop_pad, 18), Compress=(compress, 11, 28), Det=(det, 11, 22),
                   MaxUnpool=(max_unpool, 11, 22), Col2Im=(col2im, 18), DFT=(dft, 17, 20),
                   STFT=(stft, 17))

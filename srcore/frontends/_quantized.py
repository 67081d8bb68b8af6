"""torch's packed quantized weights, unpacked at conversion; the ops that take them, lowered.

A quantized linear or convolution in TorchScript takes its weight as an opaque object
(``LinearPackedParamsBase``, ``Conv2dPackedParamsBase``) in fbgemm's or oneDNN's layout. The converter
unpacks it through torch itself (``quantized::linear_unpack``, ``conv2d_unpack``, ``conv2d_stride``,
...) into a quantized weight parameter (with its scale and zero point, per channel or per tensor)
and a float bias, and each op that took the object becomes srcore's form with plain tensors
(``quantized::linear`` -> ``quantized::qlinear(X, W, B, scale, zero_point, arith)``). Nothing is pickled.

``arith`` records whose requantization torch runs for the packed weight, which depends on the engine
and on the machine that packed it: :func:`packed_arith` is torch's own rule (``qconv_prepack.cpp``,
``should_use_onednn_quant`` in ``OnednnUtils.h``; ``qlinear_prepack.cpp``), evaluated on the machine
that imports, where the model was packed or (a saved TorchScript file) re-packed at load.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import attrs

from .. import cpu_features
from ..ir.types import BOOL, INT, STR, ListType

LINEAR = "__torch__.torch.classes.quantized.LinearPackedParamsBase"
CONV2D = "__torch__.torch.classes.quantized.Conv2dPackedParamsBase"
CONV3D = "__torch__.torch.classes.quantized.Conv3dPackedParamsBase"
EMBEDDING = "__torch__.torch.classes.quantized.EmbeddingPackedParamsBase"
CELL = "__torch__.torch.classes.rnn.CellParamsBase"
SUPPORTED = (LINEAR, CONV2D, CONV3D, EMBEDDING, CELL)
#: a packed convolution's class -> the ``quantized::conv{2,3}d_*`` accessors that read it
_CONV_ACCESSORS = {CONV2D: "conv2d", CONV3D: "conv3d"}


@attrs.frozen
class Packed:
    """An unpacked weight: srcore values for the weight and bias, and a convolution's settings."""

    kind: str                       # "linear", "conv", "conv_transpose", "embedding_byte", "embedding_4bit"
    weight: Any                     # srcore Value (quantized parameter)
    bias: Any                       # srcore Value (float parameter or None constant)
    stride: tuple = ()
    padding: tuple = ()
    dilation: tuple = ()
    groups: int = 1
    dims: int = 2                   # spatial dims of a convolution (1, 2 or 3)
    arith: str = "fbgemm"           # whose requantization torch runs for these weights (packed_arith)
    #: makes the (C_out, C_in, 1, K) weight a (C_out, C_in, K) parameter when called: torch packs an
    #: nn.quantized.Conv1d so (its ``quantized::conv1d`` reads the 2-d params as a 1 x K convolution), and
    #: an nn.quantized.ConvTranspose1d's (C_in, C_out / groups, 1, K) one alike
    weight_1d: Callable[[], Any] | None = attrs.field(default=None, eq=False)
    output_padding: tuple = ()      # a transposed convolution's (kind "conv_transpose")


@attrs.frozen
class Cell:
    """One layer and direction of a dynamic-quantized LSTM or GRU (``CellParamsBase`` of kind
    ``quantized_dynamic``, what ``quantize_dynamic`` makes of an ``nn.LSTM``/``nn.GRU``; or
    ``quantized_fp16`` with ``dtype=torch.float16``): the input and hidden weights (quantized
    parameters, or float ones holding float16 values, each with its float bias), and whether torch
    quantizes the float operands with a reduced range (fbgemm's/x86's 7-bit)."""

    w_ih: Any
    b_ih: Any
    w_hh: Any
    b_hh: Any
    reduce_range: bool
    fp16: bool = False              # ``quantized_fp16`` cells: float weights rounded to float16


def class_name(obj) -> str:
    try:
        return obj._type().qualified_name()
    except Exception:  # not a TorchScript class object
        return type(obj).__name__


def symmetric(w) -> bool:
    """torch's ``is_weight_symmetric_quant``: every zero point of the (quantized) weight is 0."""
    import torch

    if w.qscheme() in (torch.per_tensor_affine,):
        return w.q_zero_point() == 0
    if w.qscheme() in (torch.per_channel_affine,):
        return bool((w.q_per_channel_zero_points() == 0).all())
    return False


def packed_arith(engine: str, kind: str, w, groups: int = 1, output_padding=()) -> str:
    """Which library's arithmetic torch packs a quantized ``kind`` ("linear" or "conv") weight ``w`` for
    with quantized engine ``engine``: "onednn" with engine onednn; with engine x86, "onednn" for a conv
    on a CPU with AVX512-VNNI whose weights are symmetric, with groups <= 100 and no output padding
    (torch checks the OS too: Linux only), fbgemm's otherwise; "fbgemm" for fbgemm; "qnnpack" for qnnpack
    (QNNPACK's int32 bias and float requantization)."""
    if engine in ("onednn", "qnnpack"):
        return engine
    if engine == "x86" and kind == "conv" and sys.platform.startswith("linux") and cpu_features.has_avx512_vnni() \
            and groups <= 100 and symmetric(w) and not any(output_padding):
        return "onednn"
    return "fbgemm"


def unpack(torch, obj, name: str, constant: Callable[[str, Any], Any]) -> Packed:
    """``obj`` (a packed-params object) unpacked; ``constant(name, value)`` makes a srcore constant
    (a parameter for arrays). Raises ValueError naming an unsupported class."""
    cls = class_name(obj)
    if cls == CELL:
        return _cell(torch, obj, name, constant)
    if cls == EMBEDDING:
        return _embedding(torch, obj, name, constant)
    if cls == LINEAR:
        w, b = torch.ops.quantized.linear_unpack(obj)
        if not w.is_quantized:   # quantize_dynamic(dtype=float16): float16 weights, float activations
            return Packed("linear_fp16", constant(f"{name}.weight", _fp16(torch, w)), constant(f"{name}.bias", b))
        return Packed("linear", constant(f"{name}.weight", w), constant(f"{name}.bias", b),
                      arith=packed_arith(torch.backends.quantized.engine, "linear", w))
    if cls in _CONV_ACCESSORS:
        acc = _conv_accessors(torch, cls)
        w, b = acc("unpack")(obj)
        dims = w.dim() - 2
        if acc("transpose")(obj):
            return _conv_transpose(torch, obj, name, constant, w, b, acc)
        if dims not in (1, 2, 3):
            raise ValueError(f"{cls}: a {dims}-d convolution is not supported")
        stride = tuple(acc("stride")(obj))[-dims:]
        padding = tuple(acc("padding")(obj))[-dims:]
        dilation = tuple(acc("dilation")(obj))[-dims:]
        groups = int(acc("groups")(obj))
        return Packed("conv", constant(f"{name}.weight", w), constant(f"{name}.bias", b), stride, padding,
                      dilation, groups, dims, packed_arith(torch.backends.quantized.engine, "conv", w, groups,
                                                           tuple(acc("output_padding")(obj))),
                      _as_1d(w, stride, padding, dilation, name, constant))
    raise ValueError(f"packed parameters of type {cls} have no srcore equivalent (supported: "
                     f"{', '.join(c.rsplit('.', 1)[-1] for c in SUPPORTED)})")


def _conv_accessors(torch, cls: str) -> Callable[[str], Callable]:
    """``acc("stride")`` -> ``torch.ops.quantized.conv2d_stride`` (or ``conv3d_stride``) for class ``cls``."""
    prefix = _CONV_ACCESSORS[cls]
    return lambda what: getattr(torch.ops.quantized, f"{prefix}_{what}")


def _as_1d(w, stride, padding, dilation, name: str, constant: Callable[[str, Any], Any],
           output_padding=(0, 0)) -> Callable[[], Any] | None:
    """:attr:`Packed.weight_1d` for a 2-d packed weight of height 1 whose first spatial settings are the
    identity (how torch packs a 1-d convolution), else None."""
    if w.dim() != 4 or w.shape[2] != 1 or (stride[0], padding[0], dilation[0], output_padding[0]) != (1, 0, 1, 0):
        return None

    def w1(w=w):
        return constant(f"{name}.weight_1d", w.squeeze(2))
    return w1


def _conv_transpose(torch, obj, name: str, constant: Callable[[str, Any], Any], w, b, acc) -> Packed:
    """A transposed convolution's packed weight (torch's layout: Cin, Cout / groups, *k): 2-d (also the
    1-d one, packed as 1 x K) or 3-d, per tensor."""
    cls = class_name(obj)
    if w.qscheme() != torch.per_tensor_affine:
        raise ValueError(f"{cls}: a transposed convolution with a per-channel weight is not supported (torch's "
                         "qconfigs quantize nn.ConvTranspose weights per tensor)")
    output_padding = tuple(acc("output_padding")(obj))
    groups = int(acc("groups")(obj))
    arith = packed_arith(torch.backends.quantized.engine, "conv", w, groups, output_padding)
    if arith == "onednn":
        # torch 2.13's oneDNN deconvolution is tens of quantization steps off conv_transpose2d of its own
        # unpacked weight (fbgemm's is exact): nothing srcore could reproduce bit for bit
        raise ValueError(f"{cls}: a transposed convolution packed for oneDNN (quantized engine "
                         f"{torch.backends.quantized.engine!r}; x86 packs for oneDNN on an AVX512-VNNI CPU when the "
                         "weight is symmetric and output_padding is 0) is not supported: torch's oneDNN result "
                         "differs from the convolution's arithmetic; quantize with the fbgemm engine")
    stride, padding, dilation = (tuple(acc(what)(obj)) for what in ("stride", "padding", "dilation"))
    return Packed("conv_transpose", constant(f"{name}.weight", w), constant(f"{name}.bias", b), stride, padding,
                  dilation, groups, w.dim() - 2, arith, _as_1d(w, stride, padding, dilation, name, constant,
                                                               output_padding), output_padding)


def _embedding(torch, obj, name: str, constant: Callable[[str, Any], Any]) -> Packed:
    """An ``nn.quantized.Embedding(Bag)``'s packed weight as torch packs it for fbgemm
    (``PackedEmbeddingBagWeight::prepack``): a uint8 matrix of fused rows, each its values (8-bit, or
    4-bit two a byte) followed by its scale and bias (``-zero_point * scale`` in float32; float16 for
    4-bit), a srcore uint8 parameter."""
    import numpy as np

    w = torch.ops.quantized.embedding_bag_unpack(obj)
    if w.qscheme() != torch.per_channel_affine_float_qparams or w.dtype not in (torch.quint8, torch.quint4x2):
        raise ValueError(f"{EMBEDDING}: a {w.dtype} weight quantized {w.qscheme()} is not supported (torch packs "
                         "quint8 and quint4x2 per_channel_affine_float_qparams ones)")
    rows = w.shape[0]
    scales = w.q_per_channel_scales().to(torch.float32).numpy()
    bias = -(w.q_per_channel_zero_points().to(torch.float32).numpy() * scales)   # float32, as torch rounds it
    values = w.int_repr().numpy().reshape(rows, -1)
    if w.dtype == torch.quint8:
        tail, kind = np.stack([scales, bias], axis=1).astype(np.float32), "embedding_byte"
    else:
        tail, kind = np.stack([scales, bias], axis=1).astype(np.float16), "embedding_4bit"
    fused = np.concatenate([values.astype(np.uint8), tail.view(np.uint8).reshape(rows, -1)], axis=1)
    return Packed(kind, constant(f"{name}.weight", torch.from_numpy(np.ascontiguousarray(fused))), None)


def _fp16(torch, w):
    """A float weight rounded to float16 and back: what torch's fp16 dynamic GEMM multiplies by."""
    return w.to(torch.float16).to(torch.float32)


def _cell(torch, obj, name: str, constant: Callable[[str, Any], Any]) -> Cell:
    # torch's QuantizedCellParamsDynamic::__getstate__: (kind, [b_ih, b_hh], [], [reduce_range],
    # [packed w_ih, packed w_hh]); the biases are packed with the weights as well (those are applied).
    # QuantizedCellParamsFP16: ("quantized_fp16", [], [], [], [packed w_ih, packed w_hh])
    kind, _biases, _doubles, longs, packed = obj.__getstate__()[0]
    if kind not in ("quantized_dynamic", "quantized_fp16"):
        raise ValueError(f"{CELL} of kind {kind!r} is not supported (only 'quantized_dynamic' and "
                         "'quantized_fp16': quantize_dynamic's qint8 and float16 LSTM and GRU)")
    (w_ih, b_ih), (w_hh, b_hh) = (torch.ops.quantized.linear_unpack(p) for p in packed)
    if b_ih is None or b_hh is None:
        raise ValueError(f"{CELL} without biases is not supported")
    fp16 = kind == "quantized_fp16"
    if not fp16 and torch.backends.quantized.engine == "qnnpack":
        raise ValueError(f"{CELL}: torch's qnnpack engine runs a dynamic LSTM / GRU on QNNPACK's dynamic linear, "
                         "which srcore does not reproduce in its recurrent kernels; import with the x86 or fbgemm "
                         "quantized engine")
    if fp16:
        w_ih, w_hh = _fp16(torch, w_ih), _fp16(torch, w_hh)
    return Cell(constant(f"{name}.weight_ih", w_ih), constant(f"{name}.bias_ih", b_ih),
                constant(f"{name}.weight_hh", w_hh), constant(f"{name}.bias_hh", b_hh),
                bool(longs[0]) if longs else False, fp16)


#: torch's recurrent ops on cells -> (the srcore op for qint8 cells, the float op for float16 ones)
_CELL_OPS = {"aten::quantized_lstm": ("quantized::lstm_dynamic", "aten::lstm"),
             "aten::quantized_lstm.input": ("quantized::lstm_dynamic", "aten::lstm"),
             "aten::quantized_gru": ("quantized::gru_dynamic", "aten::gru"),
             "aten::quantized_gru.input": ("quantized::gru_dynamic", "aten::gru")}


def lower_cells(kind: str, inputs: list, make_const: Callable[[Any, Any], Any],
                make_list: Callable[[list], Any]) -> tuple[str, list]:
    """``aten::quantized_lstm.input(input, hx, cells, has_biases, num_layers, dropout, train, bidirectional,
    batch_first, *, dtype, use_dynamic)`` (or ``aten::quantized_gru.input``, without the last two) with
    its cells unpacked (:class:`Cell`) as ``quantized::lstm_dynamic`` / ``quantized::gru_dynamic``:
    ``aten::lstm.input``'s arguments (params ``[w_ih, w_hh, b_ih, b_hh]`` per layer and direction), then
    ``reduce_range``; float16 cells as ``aten::lstm`` / ``aten::gru`` with their float16-valued weights.
    ValueError for other recurrent ops."""
    ops = _CELL_OPS.get(kind)
    if ops is None or len(inputs) < 9:
        raise ValueError(f"{kind} with dynamic-quantized cells (CellParamsBase) is not supported (only "
                         "quantize_dynamic's LSTM and GRU on a padded input)")
    cells = inputs[2]
    if not isinstance(cells, list) or not cells or not all(isinstance(c, Cell) for c in cells):
        raise ValueError(f"{kind} expects a list of dynamic-quantized cells")
    if len({(c.reduce_range, c.fp16) for c in cells}) != 1:
        raise ValueError(f"{kind}: cells with different reduce_range or dtype settings")
    params = make_list([v for c in cells for v in (c.w_ih, c.w_hh, c.b_ih, c.b_hh)])
    if cells[0].fp16:
        return ops[1], [*inputs[:2], params, *inputs[3:9]]
    return ops[0], [*inputs[:2], params, *inputs[3:9], make_const(cells[0].reduce_range, BOOL)]


#: torch op -> (srcore op, the packed input's position, kind of packed params it takes)
_LOWER = {
    "quantized::linear": ("quantized::qlinear", 1, "linear"),
    "quantized::linear_relu": ("quantized::qlinear_relu", 1, "linear"),
    "quantized::linear_dynamic": ("quantized::qlinear_dynamic", 1, "linear"),
    "quantized::linear_relu_dynamic": ("quantized::qlinear_relu_dynamic", 1, "linear"),
    # float16 dynamic: float activations times float16-valued weights (fbgemm's fp16 GEMM, fp32 accumulation)
    "quantized::linear_dynamic_fp16": ("aten::linear", 1, "linear_fp16"),
    "quantized::linear_relu_dynamic_fp16": ("srcore::linear_relu", 1, "linear_fp16"),
    "quantized::conv1d": ("quantized::qconv1d", 1, "conv"),
    "quantized::conv1d_relu": ("quantized::qconv1d_relu", 1, "conv"),
    "quantized::conv2d": ("quantized::qconv2d", 1, "conv"),
    "quantized::conv2d_relu": ("quantized::qconv2d_relu", 1, "conv"),
    "quantized::conv2d_add": ("quantized::qconv2d_add", 2, "conv"),
    "quantized::conv2d_add_relu": ("quantized::qconv2d_add_relu", 2, "conv"),
    "quantized::embedding_bag_byte": ("quantized::embedding_bag_byte_rowwise_offsets", 0, "embedding_byte"),
    "quantized::embedding_bag_4bit": ("quantized::embedding_bag_4bit_rowwise_offsets", 0, "embedding_4bit"),
    "quantized::embedding_byte": ("quantized::qembedding_byte", 0, "embedding_byte"),
    "quantized::embedding_4bit": ("quantized::qembedding_4bit", 0, "embedding_4bit"),
    "quantized::conv3d": ("quantized::qconv3d", 1, "conv"),
    "quantized::conv3d_relu": ("quantized::qconv3d_relu", 1, "conv"),
    "quantized::conv_transpose1d": ("quantized::qconv_transpose1d", 1, "conv_transpose"),
    "quantized::conv_transpose2d": ("quantized::qconv_transpose2d", 1, "conv_transpose"),
    "quantized::conv_transpose3d": ("quantized::qconv_transpose3d", 1, "conv_transpose"),
}


def lower(kind: str, inputs: list, make_const: Callable[[Any, Any], Any]) -> tuple[str, list]:
    """The srcore op and inputs for torch node ``kind`` whose inputs (srcore values, and Packed at the
    packed position) are ``inputs``; ``make_const(value, type)`` makes a constant. ValueError if the
    op takes packed parameters srcore does not handle."""
    entry = _LOWER.get(kind)
    if entry is None:
        raise ValueError(f"{kind} with packed parameters is not supported")
    op, pos, want = entry
    packed = inputs[pos]
    if not isinstance(packed, Packed) or packed.kind != want:
        got = f", got {packed.kind} ones" if isinstance(packed, Packed) else ""
        raise ValueError(f"{kind} expects {want} packed parameters{got}")
    rest = inputs[:pos] + inputs[pos + 1:]
    if want.startswith("embedding"):   # (packed, indices, ...) -> (fused rows, indices, ...)
        return op, [packed.weight, *rest]
    if want == "linear_fp16":   # (X, packed) -> (X, W, B)
        return op, [rest[0], packed.weight, packed.bias]
    if want == "linear":
        # (X, packed, scale, zp) -> (X, W, B, scale, zp, arith); dynamic: (X, packed, reduce_range) -> (X, W, B, rr)
        if op.endswith("_dynamic"):  # fbgemm's arithmetic, or QNNPACK's (engine qnnpack); never oneDNN's
            arith = "qnnpack" if packed.arith == "qnnpack" else "fbgemm"
            return op, [rest[0], packed.weight, packed.bias, *rest[1:2], make_const(arith, STR)]
        return op, [rest[0], packed.weight, packed.bias, *rest[1:], make_const(packed.arith, STR)]
    ints = ListType(INT)
    packed = _with_dims(kind, op, packed)
    if want == "conv_transpose":   # (X, packed, scale, zp) -> (X, W, B, stride, padding, output_padding, ...)
        settings = [make_const(list(v), ints) for v in (packed.stride, packed.padding, packed.output_padding,
                                                         packed.dilation)]
        return op, [rest[0], packed.weight, packed.bias, *settings, make_const(packed.groups, INT), *rest[1:],
                    make_const(packed.arith, STR)]
    if len(rest) != pos + 2:   # the old conv2d(qx, w, stride, padding, dilation, groups, scale, zp) form
        raise ValueError(f"{kind} with {len(inputs)} inputs (the legacy form) is not supported")
    settings = [make_const(list(packed.stride), ints), make_const(list(packed.padding), ints),
                make_const(list(packed.dilation), ints), make_const(packed.groups, INT)]
    arith = [] if "_add" in op else [make_const(packed.arith, STR)]   # conv2d_add exists in oneDNN only
    return op, [*rest[:pos], packed.weight, packed.bias, *settings, *rest[pos:], *arith]



def _with_dims(kind: str, op: str, packed: Packed) -> Packed:
    """``packed`` with the spatial dims of ``op`` (``quantized::qconv{1,2,3}d...``, ``qconv_transpose{1,2,3}d``):
    2-d parameters of a 1 x K convolution as 1-d ones for the 1-d ops; ValueError where they do not fit."""
    want = next(d for d in (1, 2, 3) if f"{d}d" in op)
    if want == 1 and packed.dims == 2:
        if packed.weight_1d is None:
            raise ValueError(f"{kind} got 2-d convolution parameters that are no 1 x K convolution")
        return attrs.evolve(packed, weight=packed.weight_1d(), stride=packed.stride[1:], padding=packed.padding[1:],
                            dilation=packed.dilation[1:], output_padding=packed.output_padding[1:], dims=1)
    if packed.dims != want:
        raise ValueError(f"{kind} got {packed.dims}-d convolution parameters")
    return packed


# -- the layout torch holds a quantized conv's output in ------------------------------------------
#: torch's 2-d quantized convolutions (srcore's forms), whose outputs torch holds channels-last
_CONV2D = frozenset({"quantized::qconv2d", "quantized::qconv2d_relu", "quantized::qconv2d_add",
                     "quantized::qconv2d_add_relu"})
#: srcore's forms of torch's quantized add by the layouts torch holds its inputs in: (op, both inputs
#: channels-last) -> the add whose scalar tail runs in memory (NHWC) order; (op, one of them) -> the add
#: torch computes on its scalar path throughout (its vectorized loop needs one layout)
_ADD_LAYOUTS = {("quantized::add", True): "quantized::add_channels_last",
                ("quantized::add_relu", True): "quantized::add_relu_channels_last",
                ("quantized::add", False): "quantized::add_mixed_layout",
                ("quantized::add_relu", False): "quantized::add_relu_mixed_layout"}
#: ops whose output torch lays out as their (first) input
_KEEPS_LAYOUT = frozenset({"aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_", "aten::clamp",
                           "aten::clamp_", "aten::relu6", "aten::dropout", "aten::dropout_",
                           "quantized::add", "quantized::add_relu", *_ADD_LAYOUTS.values(), "quantized::hardswish",
                           "aten::max_pool2d",
                           "aten::quantized_max_pool2d", "aten::adaptive_avg_pool2d",
                           "quantized::avg_pool2d_channels_last", "quantized::adaptive_avg_pool2d_channels_last",
                           "quantized::add_qnnpack", "quantized::add_relu_qnnpack", "quantized::avg_pool2d_qnnpack",
                           "quantized::adaptive_avg_pool2d_qnnpack", "quantized::lut_qnnpack"})


#: quantized cats: torch's output is channels-last when every input is (any dim), else NCHW
_CATS = frozenset({"quantized::cat", "quantized::cat_relu", "aten::cat", "aten::concat"})


def _cat_channels_last(node) -> bool:
    items = node.inputs[0].node if node.inputs else None
    if items is None or items.kind != "prim::ListConstruct" or not items.inputs:
        return False
    return all(channels_last_in_torch(v) for v in items.inputs)


#: pools whose rounding follows the layout torch holds their input in -> the op for a channels-last one
_POOLS_CL = {"aten::mean": "quantized::mean_channels_last", "aten::avg_pool2d": "quantized::avg_pool2d_channels_last",
             "aten::adaptive_avg_pool2d": "quantized::adaptive_avg_pool2d_channels_last"}


def channels_last_in_torch(value) -> bool:
    """Whether torch holds ``value`` channels-last: a quantized 2-d conv's output, through ops that keep
    their input's layout (``aten::contiguous`` does not: it copies to NCHW), and a quantized cat of
    such values only."""
    for _ in range(256):
        node = getattr(value, "node", None)
        if node is None:
            return False
        if node.kind in _CONV2D:
            return True
        if node.kind in _CATS:
            return _cat_channels_last(node)
        if node.kind.split(".")[0] not in _KEEPS_LAYOUT or not node.inputs:
            return False
        value = node.inputs[0]
    return False


#: torch ops that run QNNPACK's kernels when torch's quantized engine is qnnpack -> srcore's forms for them
#: (each falls back to torch's own kernel where torch's condition for QNNPACK does not hold at run time)
_QNNPACK_FORMS = {"quantized::add": "quantized::add_qnnpack", "quantized::add_relu": "quantized::add_relu_qnnpack",
                  "quantized::add_channels_last": "quantized::add_qnnpack",
                  "quantized::add_relu_channels_last": "quantized::add_relu_qnnpack",
                  "quantized::add_mixed_layout": "quantized::add_qnnpack",
                  "quantized::add_relu_mixed_layout": "quantized::add_relu_qnnpack",
                  "aten::avg_pool2d": "quantized::avg_pool2d_qnnpack",
                  "quantized::avg_pool2d_channels_last": "quantized::avg_pool2d_qnnpack",
                  "aten::adaptive_avg_pool2d": "quantized::adaptive_avg_pool2d_qnnpack",
                  "quantized::adaptive_avg_pool2d_channels_last": "quantized::adaptive_avg_pool2d_qnnpack"}


#: ops whose output is quantized when their first input is (what :func:`quantized_in_torch` walks through)
_KEEPS_QUANTIZED = frozenset({"aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_", "aten::clamp",
                              "aten::clamp_", "aten::relu6", "aten::dropout", "aten::dropout_", "aten::max_pool2d",
                              "aten::quantized_max_pool2d", "aten::avg_pool2d", "aten::adaptive_avg_pool2d",
                              "aten::flatten", "aten::reshape", "aten::view", "aten::contiguous", "aten::hardsigmoid",
                              "aten::sigmoid", "aten::tanh", "aten::leaky_relu", "aten::upsample_nearest2d",
                              "aten::cat", "prim::ListConstruct", "aten::mean", "aten::permute", "aten::clone"})


def quantized_in_torch(value) -> bool:
    """Whether ``value`` is a quantized tensor in torch, as far as its producers say: made by a
    ``quantized::`` op or ``quantize_per_tensor`` / ``quantize_per_channel``, directly or through ops
    that keep their first input's dtype (:data:`_KEEPS_QUANTIZED`); False where that cannot be told."""
    for _ in range(256):
        node = getattr(value, "node", None)
        if node is None:
            return False
        kind = node.kind.split(".")[0]
        if kind.startswith("quantized::") or kind in ("aten::quantize_per_tensor", "aten::quantize_per_channel"):
            return True
        if kind not in _KEEPS_QUANTIZED or not node.inputs:
            return False
        value = node.inputs[0]
    return False


#: torch's activations QNNPACK computes by a lookup table -> the table's function
_QNNPACK_TABLES = {"aten::sigmoid": "sigmoid", "aten::tanh": "tanh", "aten::hardsigmoid": "hardsigmoid",
                   "quantized::hardswish": "hardswish"}
_MEANS = ("aten::mean", "quantized::mean_channels_last")


def engine_form(kind: str, inputs: list, engine: str, make_const: Callable[[Any, Any], Any]) -> tuple[str, list]:
    """The op and inputs for torch node ``kind`` (after :func:`channels_last_kind`) under torch's quantized
    ``engine``: with ``qnnpack``, the ops torch then runs on QNNPACK's kernels (its add of two quint8
    tensors, its average pools, its mean over dims [2, 3], its table activations) take their
    ``*_qnnpack`` forms; unchanged otherwise. ``make_const(value, type)`` makes a constant."""
    if engine != "qnnpack" or kind not in _QNNPACK_FORMS and kind not in _MEANS and kind not in _QNNPACK_TABLES:
        return kind, inputs
    if not kind.startswith("quantized::") and not (inputs and quantized_in_torch(inputs[0])):
        return kind, inputs
    cl = kind.endswith("_channels_last")   # torch's NHWC path where its condition for QNNPACK fails at run time
    if kind in _MEANS:
        d = inputs[1].node if len(inputs) >= 2 else None
        dims = d.attrs.get("value") if d is not None and d.kind == "prim::Constant" else None
        if not (isinstance(dims, (list, tuple)) and list(dims) == [2, 3]) or len(inputs) != 4:
            return kind, inputs
        return "quantized::mean_qnnpack", [*inputs, make_const(cl, BOOL)]
    if kind in _QNNPACK_TABLES:
        if kind.startswith("aten::") and len(inputs) != 1:
            return kind, inputs
        return "quantized::lut_qnnpack", [inputs[0], make_const(_QNNPACK_TABLES[kind], STR), *inputs[1:3]]
    new = _QNNPACK_FORMS[kind]
    if "pool" in new:
        want = 7 if "adaptive" not in new else 2
        if len(inputs) != want:
            return kind, inputs
        return new, [*inputs, make_const(cl, BOOL)]
    return new, inputs


_SCALAR2 = frozenset({"quantized::add", "quantized::add_relu", "quantized::mul", "quantized::mul_relu"})


def scalar_first(kind: str, scalar_in_front: bool, inputs: list) -> list:
    """``quantized::add/mul(_relu).Scalar2(Scalar b, Tensor qa)`` (FX writes ``0.5 * q`` so) as the
    ``.Scalar`` overload ``(qa, b)``: torch computes both the same way."""
    if kind in _SCALAR2 and len(inputs) == 2 and scalar_in_front:
        return [inputs[1], inputs[0]]
    return inputs


def channels_last_kind(kind: str, inputs: list) -> str:
    """The op for torch node ``kind`` whose input torch holds channels-last and where that changes the
    result: ``quantized::mean_channels_last`` for an ``aten::mean`` over both spatial dims of a
    quantized 2-d conv's output, ``quantized::avg_pool2d_channels_last`` for an ``aten::avg_pool2d``
    of one, ``quantized::adaptive_avg_pool2d_channels_last`` for an ``aten::adaptive_avg_pool2d``,
    ``quantized::std_channels_last`` for an ``aten::std`` over given dims (torch's reference path); for ``quantized::add(_relu)`` of two such outputs ``quantized::add(_relu)_channels_last``,
    of one such output and an NCHW tensor ``quantized::add(_relu)_mixed_layout``; ``kind`` otherwise."""
    if kind in ("quantized::add", "quantized::add_relu") and len(inputs) >= 2:
        cl = [channels_last_in_torch(x) for x in inputs[:2]]
        return _ADD_LAYOUTS[kind, all(cl)] if any(cl) else kind
    if kind == "aten::std" and len(inputs) == 4 and channels_last_in_torch(inputs[0]):
        return "quantized::std_channels_last"   # std(self, dim, unbiased or correction, keepdim)
    if kind not in _POOLS_CL or len(inputs) < 2 or not channels_last_in_torch(inputs[0]):
        return kind
    if kind != "aten::mean":
        return _POOLS_CL[kind]
    d = inputs[1].node
    dims = d.attrs.get("value") if d.kind == "prim::Constant" else None
    if not isinstance(dims, (list, tuple)) or sorted(int(x) % 4 for x in dims) != [2, 3]:
        return kind
    return "quantized::mean_channels_last"

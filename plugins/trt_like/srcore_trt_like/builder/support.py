"""Which nodes a trt_like engine can hold: ONE op table (:data:`SUPPORT`) read by ``supports()``
(the partitioner asks it at every load, before any engine is built: no numpy here) and by the
network builder (:mod:`.convert`: each row names its converter in :mod:`.converters`).

A node is supported when its op has a row, its tensors are float32 of known rank, the arguments
the engine bakes in (strides, dims, weights of fused ops) are constants (non-tensor ones may also be
*derived*: known from the input shapes, as ``y.size(0)``; each plan folds them), and the row's own
check (shapes and values a converter cannot take) passes. ``supports()`` returns ``True`` or the
reason it refuses, naming the argument, dtype or shape at fault.
"""
from __future__ import annotations

import math

from typing import Callable

import attrs

from srcore.plugin import TensorType
from srcore.plugin import NodeInfo

#: dtypes an engine computes in
ENGINE_DTYPES = ("float32",)
#: 8- and 16-bit integers (a uint8 image): torch's wrapping arithmetic in the integer layers
SMALL_INTS = ("int16", "int8", "uint8")
#: index and mask dtypes (the engine's data layers read and make them; see builder/network.py), and
#: the small integers the integer layers compute in
DATA_DTYPES = ("int64", "int32", "bool", *SMALL_INTS)
#: half tensors an engine takes in or gives out only through a cast (it computes in float32: srcore.passes.widen_half)
HALF = ("float16", "bfloat16")
#: the dtypes an engine tensor holds in numpy arrays of that dtype (not float32, not quantized)
PLAIN_DTYPES = (*DATA_DTYPES, *HALF)
#: the quantized dtypes of the int8 layers (per-tensor parameters known at load; weights may be per channel)
INT8_DTYPES = ("quint8", "qint8")

Check = Callable[[NodeInfo], "str | None"]


@attrs.frozen
class OpSupport:
    """One op the engine takes: the arguments that must be constants, the converter (a function of
    :mod:`.converters`) and an op-specific check returning why a node is refused (None: fine),
    which ``notes`` says in words (``srcore list-ops --engine trt_like``)."""

    op: str
    converter: str
    constants: tuple[str, ...] = ()
    check: Check | None = attrs.field(default=None, eq=False)
    notes: str = ""
    #: whether the op also takes 8-bit quantized tensors (an int8 layer; else float32 only)
    int8: bool = False
    #: arguments that are not float32: ``((name, dtypes), ...)``, e.g. the indices of an embedding
    #: (engine inputs or constants; an engine never computes them)
    data_args: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: results that are not float32: ``((position, dtypes), ...)`` (sort's indices, a comparison's
    #: mask); such tensors stay inside the engine's index and mask layers or leave it as outputs
    data_results: tuple[tuple[int, tuple[str, ...]], ...] = ()
    #: the op copies its input as it is (a select or slice): index and mask tensors too
    any_data: bool = False


# -- op-specific checks (None: supported; else the reason) ------------------------------------------
_INDEX = ("int64", "int32")
#: the dtypes of the integer layers (``int_binary``, ``int_scalar``, integer compares and sums)
_INTS = (*_INDEX, *SMALL_INTS)
_LOGIC = ("bool", *_INTS)
_NUMERIC = ("float32", *_INTS)
#: operands of the arithmetic rows: a bool or integer tensor is promoted to the result's dtype first
_PROMOTED = (*_NUMERIC, "bool")
def _rank(node: NodeInfo, i: int) -> int:
    return len(node.args[i].type.shape)   # a tensor of known rank (checked by _tensors_ok)


def _shape(node: NodeInfo, i: int) -> str:
    return "(" + ", ".join(map(str, node.args[i].type.shape)) + ")"


def _dropout(node: NodeInfo):
    return None if node.const("train", True) is False else "train=True (dropout in training mode is random)"


def _convolution(node: NodeInfo):
    n = len(node.const("stride"))
    if node.const("transposed") is not False:
        return _conv_transpose(node) if n in (1, 2, 3) else f"a {n}-D transposed convolution (the engine's are 1-D to 3-D)"
    if n == 1:
        return _ncl(node)
    if n == 3:
        return _ncdhw(node)
    return None if n == 2 else f"a {n}-D convolution (the engine's conv layers are 1-D, 2-D or 3-D)"


def _conv_transpose(node: NodeInfo):
    # a 1-D one (3-D weight) runs as a 2-D layer on (N, C, 1, L) views, as a 1-D conv
    w = node.const("weight")
    nd = getattr(w, "ndim", 0)
    if nd == 3:
        why = _ncl(node)
        if why:
            return why
    elif nd == 5:
        why = _ncdhw(node)
        if why:
            return why
    elif len(node.args[0].type.shape) != 4:
        return _nchw(node)
    groups = node.const("groups")
    if (nd not in (3, 4, 5) or len(node.args[0].type.shape) != nd or not isinstance(groups, int) or groups < 1 or w.shape[0] % groups
            or node.args[0].type.shape[1] != w.shape[0]):
        return f"weight of shape {getattr(w, 'shape', None)} and groups={groups!r} do not fit the input's channels"
    return None


def _no_dtype(node: NodeInfo):
    dtype = node.const("dtype", None)
    return None if dtype is None else f"dtype={dtype!r} (a cast inside the op)"


def _encoder(node: NodeInfo):
    shape = node.args[0].type.shape
    if len(shape) != 3:
        return f"src of shape {_shape(node, 0)} is not 3-D (batch, sequence, features)"
    return _attention_mask(node)


def _attention_mask(node: NodeInfo):
    """The ``mask`` of torch's fused attention ops, read as an additive bias (converters._mha_bias)."""
    if node.const("mask", "tensor") is None:
        return None
    m = node.arg("mask").type.shape
    # (B, S) key padding, (L, S) attention mask, or one already broadcast to (B, H, L, S)
    if m is None or len(m) not in (2, 4):
        return f"a mask of shape {m} (the engine takes (batch, keys), (queries, keys) or 4-D masks)"
    return None


def _sdpa(node: NodeInfo):
    if node.const("dropout_p", None) not in (0, 0.0):
        return f"dropout_p={node.const('dropout_p', None)!r} (random)"
    causal = node.const("is_causal", None)
    if causal not in (True, False):
        return "is_causal is not a constant"
    if causal and node.const("attn_mask", "tensor") is not None:
        return "is_causal=True with attn_mask (torch refuses both)"
    if node.const("enable_gqa", False) is not False:
        return "enable_gqa=True (grouped query attention)"
    shapes = [node.args[i].type.shape for i in range(3)]
    if any(len(s) < 3 for s in shapes) or len({s[:-2] for s in shapes}) != 1:
        return f"query, key and value of shapes {', '.join(map(str, shapes))} (batch dims must be equal, rank >= 3)"
    return None


def _native_mha(node: NodeInfo):
    if node.const("need_weights", None) is not False:
        return "need_weights=True and the weights are read (the engine does not return the attention weights)"
    shapes = [node.args[i].type.shape for i in range(3)]
    if any(len(s) != 3 for s in shapes) or shapes[1] != shapes[2] or shapes[0][0] != shapes[1][0]:
        return f"query, key and value of shapes {', '.join(map(str, shapes))} (batch-first 3-D, key and value alike)"
    return _attention_mask(node)


def _ncl(node: NodeInfo):
    # a 1-D conv runs as a 2-D conv layer on an (N, C, 1, L) view; an unbatched (C, L) input runs on cpu
    if len(node.args[0].type.shape) != 3:
        return f"{node.args[0].name} of shape {_shape(node, 0)} is not 3-D (the 1-D conv layers are batched NCL)"
    if isinstance(node.const("padding"), str):
        return f"padding={node.const('padding')!r} (a string; the layers take explicit padding)"
    return None


def _ncdhw(node: NodeInfo):
    # the 3-D layers (builder/volume.py) are batched NCDHW; an unbatched (C, D, H, W) input runs on cpu
    if len(node.args[0].type.shape) != 5:
        return f"{node.args[0].name} of shape {_shape(node, 0)} is not 5-D (the 3-D layers are batched NCDHW)"
    return None


def _pool3d(node: NodeInfo):
    why = _ncdhw(node)
    if why:
        return why
    k = node.const("kernel_size")
    k = list(k) * 3 if len(k) == 1 else list(k)
    p = node.const("padding", 0)
    p = [p] * 3 if isinstance(p, int) else list(p) * 3 if len(p) == 1 else list(p)
    if any(2 * pi > ki for pi, ki in zip(p, k)):   # (torch raises)
        return f"padding={node.const('padding', 0)!r} is over half of kernel_size={node.const('kernel_size')!r}"
    if node.op == "aten::avg_pool3d" and node.const("divisor_override", None) is not None:
        return "divisor_override is given (not separable over the dims)"
    return None


def _pool1d(node: NodeInfo):
    # the 2-D pool layers on the (N, C, 1, L) view; an unbatched (C, L) input runs on cpu
    if len(node.args[0].type.shape) != 3:
        return f"{node.args[0].name} of shape {_shape(node, 0)} is not 3-D (the 1-D pools are batched NCL)"
    if node.op != "aten::adaptive_avg_pool1d":
        k, p = node.const("kernel_size"), node.const("padding", 0)
        k, p = (k[0] if isinstance(k, (list, tuple)) else k), (p[0] if isinstance(p, (list, tuple)) else p)
        if 2 * p > k:   # (torch raises)
            return f"padding={node.const('padding', 0)!r} is over half of kernel_size={node.const('kernel_size')!r}"
    return None


def _nchw(node: NodeInfo):
    # the conv and pool layers are NCHW; an unbatched (C, H, W) input runs on cpu
    if len(node.args[0].type.shape) == 4:
        return None
    return f"{node.args[0].name} of shape {_shape(node, 0)} is not 4-D (the layers are batched NCHW)"


def _matmul(node: NodeInfo):
    # the converter's forms: x @ constant 2-D weight (a GEMM layer), or two computed operands
    # of rank >= 2; matrix-vector products and a constant left operand run outside engines
    a, b = node.args[0].name, node.args[1].name
    if node.args[0].is_constant and node.args[1].is_constant:
        return f"{a} and {b} are both constants"
    if node.args[1].is_constant and not node.args[0].is_constant:
        if _rank(node, 1) == 2 and _rank(node, 0) >= 1:
            return None
        return f"constant {b} of shape {_shape(node, 1)} is not 2-D"
    if _rank(node, 0) >= 2 and _rank(node, 1) >= 2:
        return None
    return f"a matrix-vector product ({a} {_shape(node, 0)} @ {b} {_shape(node, 1)})"


def _repeat_interleave(node: NodeInfo):
    if node.const("dim", None) is None:
        return "dim is None (the flattened form)"
    return None


def _baddbmm(node: NodeInfo):
    # the product of two computed 3-D batches (nn.MultiheadAttention's masked scores, MobileViT's
    # relative bias); a constant batch would be a weight the matmul layer does not take
    if node.args[1].is_constant or node.args[2].is_constant:
        return "a constant batch1 or batch2"
    return None


def _group_norm(node: NodeInfo):
    # (N, C, *) with C divisible by num_groups; anything else is an error torch raises (the cpu kernel does)
    shape = node.args[0].type.shape
    if len(shape) < 2 or not isinstance(shape[1], int):
        return f"input of shape {_shape(node, 0)} has no known channel dim (N, C, ...)"
    groups = node.const("num_groups")
    if not isinstance(groups, int) or groups <= 0 or shape[1] % groups:
        return f"{shape[1]} channels are not divisible into num_groups={groups}"
    return None


def _gelu(node: NodeInfo):
    # another approximation is an error torch raises: the cpu kernel raises it (the engine computed erf's)
    a = node.const("approximate", "none")
    return None if a in ("none", "tanh") else f"approximate={a!r} (the engine computes 'none' and 'tanh')"


def _prelu(node: NodeInfo):
    # torch's rule (the cpu kernel raises its error otherwise): one slope, or one per channel of dim 1
    shape, w = tuple(node.args[0].type.shape), tuple(node.args[1].type.shape)
    channels = shape[1] if len(shape) >= 2 else 1
    n = math.prod(w) if len(w) == 1 else -1
    return None if n in (1, channels) else f"weight of shape {_shape(node, 1)} for self of shape {_shape(node, 0)}"


def _pow_tensor(node: NodeInfo):
    # ONNX's Pow: the exponent a constant tensor (the written-out norms' ``** 2``)
    e = node.const("exponent", None)
    return None if getattr(e, "size", 0) == 1 else "an exponent that is not one number"


def _addmm(node: NodeInfo):
    # a linear layer: constant 2-D mat2 (self and mat2 constant: the constants); alpha == 0:
    # torch does not read mat1 @ mat2 (its NaNs and infinities do not reach the result)
    if node.const("alpha", 1) == 0:
        return "alpha=0 (torch does not read mat1 @ mat2 then)"
    return None if _rank(node, 2) == 2 else f"mat2 of shape {_shape(node, 2)} is not 2-D"


def _float32_list(a, known: str):
    """Why list argument ``a`` is not a graph-built list of float32 tensors of known shape (None if it is);
    ``known`` names what the op needs of the shape in the message ("rank", "shape")."""
    if a.elements is None:
        return "argument 'tensors' is not a list built in the graph (prim::ListConstruct)"
    for i, t in enumerate(a.elements):
        if not isinstance(t, TensorType) or t.dtype != "float32" or t.shape is None:
            return f"tensors[{i}] is {t}, not a float32 tensor of known {known}"
    return None


def _cat(node: NodeInfo):
    a = node.arg("tensors")
    why = _float32_list(a, "rank")
    if why:
        return why
    ranks = {len(t.shape) for t in a.elements}
    return None if len(ranks) == 1 else f"tensors of ranks {sorted(ranks)} (torch's legacy empty 1-D case)"


def _einsum(node: NodeInfo):
    from .einsum import chain

    a = node.arg("tensors")
    why = _float32_list(a, "shape")
    if why:
        return why
    if node.const("path", None) is not None:
        return "a contraction path is given"
    why = chain(node.const("equation"), [t.shape for t in a.elements])
    return why if isinstance(why, str) else None


def _roll(node: NodeInfo):
    shifts, dims = node.const("shifts"), node.const("dims")
    if not dims or len(shifts) != len(dims):
        return "no dims (a roll of the flattened tensor) or shifts and dims of different lengths"
    return None


_RESIZE_MODES = {3: ("nearest", "linear"), 4: ("nearest", "bilinear", "bicubic"), 5: ("nearest",)}


def _resize(node: NodeInfo):
    rank = _rank(node, 0)
    if rank not in _RESIZE_MODES:
        return f"{node.args[0].name} of shape {_shape(node, 0)} is not 3-D (N, C, L), 4-D (N, C, H, W) or 5-D"
    if node.op.startswith("aten::__interpolate"):
        mode = node.const("mode", "nearest")
        if mode not in _RESIZE_MODES[rank]:
            return f"mode={mode!r} (the engine resizes a {rank}-D input by {' or '.join(map(repr, _RESIZE_MODES[rank]))})"
        if node.const("antialias", False):
            return "antialias=True"
    if node.output_types[0].shape is None or not all(isinstance(d, int) for d in node.output_types[0].shape[-2:]):
        return "its output size is known only at run time"
    return None


def _pixel_shuffle(node: NodeInfo):
    shape = node.args[0].type.shape
    up = node.op.startswith("aten::pixel_shuffle")
    r = node.const("upscale_factor" if up else "downscale_factor")
    if len(shape) < 3 or not isinstance(r, int) or r < 1:
        return f"self of shape {_shape(node, 0)} and factor {r!r}: needs rank >= 3 and a positive factor"
    if not all(isinstance(d, int) for d in shape[-3:]) or (
            shape[-3] % (r * r) if up else shape[-2] % r or shape[-1] % r):
        return f"self of shape {_shape(node, 0)} does not divide by the factor {r} (torch raises)"
    return None


def _pad(node: NodeInfo):
    pad = node.const("pad")
    if not isinstance(pad, (list, tuple)) or len(pad) % 2 or len(pad) // 2 > _rank(node, 0):
        return f"pad={pad!r} is not pairs for at most every dim"
    mode = node.const("mode", "constant") if node.op.startswith("aten::pad") else "constant"
    if mode not in _PAD_MODES:
        return f"mode={mode!r} (the engine pads with a constant, by reflection or by replication)"
    if any(isinstance(p, int) and p < 0 for p in pad):
        return f"pad={pad!r} has negative entries (a crop)"
    return None


_PAD_MODES = ("constant", "reflect", "replicate")


def _grid_sample(node: NodeInfo):
    x, grid = node.args[0].type.shape, node.args[1].type.shape
    if len(x) != 4 or len(grid) != 4 or grid[3] != 2 or x[0] != grid[0]:
        return (f"input {_shape(node, 0)} and grid {_shape(node, 1)} are not (N, C, H, W) and (N, Ho, Wo, 2) "
                "(the layer samples 2-D)")
    if 0 in x[2:]:
        return f"input {_shape(node, 0)} has an empty spatial dim"
    mode, padding = node.const("interpolation_mode"), node.const("padding_mode")
    if mode not in (0, 1) or padding not in (0, 1, 2):
        return f"interpolation_mode={mode!r}, padding_mode={padding!r} (the layer: bilinear or nearest, any padding)"
    return None


def _affine_grid(node: NodeInfo):
    size, theta = node.const("size"), node.args[0].type.shape
    if not isinstance(size, (list, tuple)) or len(size) != 4 or tuple(theta) != (size[0], 2, 3):
        return f"size={size!r} with theta {_shape(node, 0)} (the layers make 2-D grids: size (N, C, H, W), theta (N, 2, 3))"
    return None


def _embedding(node: NodeInfo):
    w = node.args[0]
    if not w.is_constant or not hasattr(w.value, "ndim") or w.value.ndim != 2:
        return "argument 'weight' is not a constant 2-D table"
    return None


def _gather(node: NodeInfo):
    if node.const("sparse_grad", False):
        return "sparse_grad=True"
    return None if _rank(node, 0) == _rank(node, 2) else \
        f"index of shape {_shape(node, 2)} has another rank than self {_shape(node, 0)}"


def _index_tensor(node: NodeInfo):
    """``x[..., i, ..., j]`` with integer index tensors (a recommender's ``z[:, li, lj]``, a graph
    net's ``x[idx]``): a graph-built list of int64 / int32 tensors of known shapes (broadcast
    together) and Nones, no longer than ``self``'s rank (no bool masks: their result's shape
    depends on the values)."""
    a = node.arg("indices")
    if a.elements is None:
        return "argument 'indices' is not a list built in the graph (prim::ListConstruct)"
    if len(a.elements) > _rank(node, 0):
        return f"{len(a.elements)} indices into a tensor of rank {_rank(node, 0)}"
    shapes = []
    for i, t in enumerate(a.elements):
        if isinstance(t, TensorType):
            if t.dtype not in _INDEX or t.shape is None or not all(isinstance(d, int) for d in t.shape):
                return f"indices[{i}] is {t}, not an int64 / int32 tensor of known shape"
            shapes.append(tuple(t.shape))
        elif type(t).__name__ != "NoneType":
            return f"indices[{i}] is {t}, not a tensor or None"
    if not shapes:
        return "no index tensor"
    return None if broadcast_shape(shapes) is not None else f"index shapes {shapes} do not broadcast"


def broadcast_shape(shapes) -> tuple[int, ...] | None:
    """numpy's broadcast of ``shapes`` (None if they do not broadcast)."""
    rank = max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        sizes = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _index_select(node: NodeInfo):
    return None if _rank(node, 2) <= 1 else f"index of shape {_shape(node, 2)} is not 0-D or 1-D"


def _batch_norm(node: NodeInfo):
    shape = node.args[0].type.shape
    if len(shape) < 2 or not isinstance(shape[1], int):
        return f"input of shape {_shape(node, 0)} has no known channel dim (N, C, ...)"
    if node.const("training"):
        return "training=True (batch statistics)"
    if node.const("running_mean") is None or node.const("running_var") is None:
        return "no running statistics"
    return None


def _instance_norm(node: NodeInfo):
    shape = node.args[0].type.shape
    if len(shape) < 3 or not isinstance(shape[1], int):
        return f"input of shape {_shape(node, 0)} has no known channel dim (N, C, ...)"
    if not node.const("use_input_stats") and (node.const("running_mean") is None or node.const("running_var") is None):
        return "use_input_stats=False without running statistics"
    return None


# -- the table -------------------------------------------------------------------------------------
def _sort(node: NodeInfo):
    return None if _rank(node, 0) >= 1 else "a 0-D tensor"


def _arg_reduce(node: NodeInfo):
    shape = node.args[0].type.shape
    if not shape:
        return "a 0-D tensor"
    dim = node.const("dim", None)
    n = math.prod(shape) if dim is None else shape[dim % len(shape)]
    return None if n else "an empty dim (torch raises)"


def _global_max_pool1d(node: NodeInfo):
    """``adaptive_max_pool1d(x, 1)`` (a point net's global max): the max over the last dim."""
    size = node.const("output_size")
    if list(size if isinstance(size, (list, tuple)) else [size]) != [1]:
        return f"output_size {size} (the engine takes 1: a global max)"
    return None if node.args[0].type.shape and node.args[0].type.shape[-1] else "an empty or 0-D input"


def _reduce(node: NodeInfo):
    shape = node.args[0].type.shape
    dims = (node.const("dim", None) if any(a.name == "dim" for a in node.args) else None) or range(len(shape))
    dims = [dims] if isinstance(dims, int) else dims
    return None if all(shape[d % len(shape)] for d in dims) or not shape else "over an empty dim (torch raises)"


def _norm(node: NodeInfo):
    name = "ord" if any(a.name == "ord" for a in node.args) else "p"
    p = node.const(name, None) if any(a.name == name for a in node.args) else None
    if p is not None and not (isinstance(p, (int, float)) and (p > 0 or p == -math.inf)):
        return f"{name}={p!r} (the engine takes p > 0 and -inf)"
    if any(a.name == "dtype" for a in node.args) and node.const("dtype", None) is not None:
        return "a dtype argument"
    if not node.args[0].type.shape:
        return "a 0-d input"
    return _reduce(node)


def _count(node: NodeInfo):
    """``sum`` of a mask (an int64 count), of integers (an exact int64 sum, torch's result dtype) or of
    float32 (numpy's pairwise sum, as the cpu plugin's; RMSNorm's ``sum(x * x, -1) / n``)."""
    if node.const("dtype", None) is not None:
        return "a dtype argument"
    x, out = node.args[0].type.dtype, node.output_types[0].dtype
    want = "float32" if x == "float32" else "int64"
    return None if out == want else f"a {x} sum made {out} (torch makes {want})"


def _clamp_tensor(node: NodeInfo):
    if all(node.const(n, "tensor") is None for n in ("min", "max")):
        return "neither min nor max (torch raises)"
    return None


def _mse_loss(node: NodeInfo):
    """Operands of one shape (TorchScript broadcasts them first: ``broadcast_tensors``, gone by the
    peephole rule when their shapes are equal), reduction 0 (none), 1 (mean) or 2 (sum)."""
    a, b = (_shape(node, i) for i in (0, 1))
    if a != b:
        return f"self {a} and target {b} of different shapes (broadcasting)"
    red = node.const("reduction", 1)
    return None if red in (0, 1, 2) else f"reduction={red!r}"


def _cumsum(node: NodeInfo):
    """No dtype argument; a mask or an integer tensor sums in int64 (torch's)."""
    why = _no_dtype(node)
    x, out = node.args[0].type.dtype, node.output_types[0].dtype
    return why or (None if out == ("float32" if x == "float32" else "int64") else f"a {x} cumsum made {out}")


def _scatter(node: NodeInfo):
    ranks = {len(a.type.shape) for a in node.args if a.name in ("self", "index", "src") and isinstance(a.type, TensorType)}
    return None if len(ranks) == 1 else f"self, index and src of ranks {sorted(ranks)} (torch needs one rank)"


def _scatter_reduce(node: NodeInfo):
    if node.const("reduce") not in ("sum", "prod", "mean", "amax", "amin"):
        return f"reduce={node.const('reduce')!r}"
    return _scatter(node)


def _index_add(node: NodeInfo):
    shapes = {a.name: a.type.shape for a in node.args if a.name in ("self", "index", "source")}
    x, i, s = shapes["self"], shapes["index"], shapes["source"]
    d = node.const("dim") % max(len(x), 1)
    if len(i) != 1 or len(x) != len(s) or not x or s[d] != i[0] \
            or any(a != b for k, (a, b) in enumerate(zip(x, s)) if k != d):
        return f"self, index and source of shapes {x}, {i}, {s} (a 1-D index, source as self but along dim)"
    return None


def _searchsorted(node: NodeInfo):
    """torch's own checks (it raises otherwise): values and boundaries of one dtype, ``bucketize``'s
    boundaries 1-D, ``searchsorted``'s 1-D or of the values' leading dims, a sorter of the
    sequence's shape, ``side`` not against ``right``."""
    shapes = {a.name: a.type for a in node.args if isinstance(a.type, TensorType)}
    bucket = node.op.startswith("aten::bucketize")
    seq, x = shapes["boundaries" if bucket else "sorted_sequence"], shapes["self"]
    if seq.dtype != x.dtype:
        return f"values of {x.dtype} and boundaries of {seq.dtype} (the engine compares in one dtype)"
    s, xs = tuple(seq.shape), tuple(x.shape)
    if bucket and len(s) != 1:
        return f"boundaries of shape {s} (torch takes 1-D ones)"
    if not s or len(s) > 1 and (len(xs) != len(s) or xs[:-1] != s[:-1]):
        return f"a sorted sequence of shape {s} for values of shape {xs} (1-D, or the values' leading dims)"
    if not bucket:
        side = node.const("side", None)
        if side not in (None, "left", "right") or side == "left" and node.const("right", False):
            return f"side={side!r} with right={node.const('right', False)!r}"
        if "sorter" in shapes and tuple(shapes["sorter"].shape) != s:
            return f"a sorter of shape {tuple(shapes['sorter'].shape)} for a sequence of shape {s}"
    return None


def _cdist(node: NodeInfo):
    """torch's checks: operands of rank >= 2 with as many columns, batch dims that broadcast, p >= 0,
    compute_mode None, 0, 1 or 2."""
    a, b = node.args[0].type.shape, node.args[1].type.shape
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-1]:
        return f"x1 of shape {tuple(a)} and x2 of shape {tuple(b)} (rank >= 2, as many columns)"
    if any(i != j and 1 not in (i, j) for i, j in zip(a[-3::-1], b[-3::-1])):
        return f"batch dims of x1 {tuple(a)} and x2 {tuple(b)} do not broadcast"
    p = node.const("p", 2.0)
    if not isinstance(p, (int, float)) or p < 0 or math.isnan(p):
        return f"p={p!r} (torch takes p >= 0)"
    mode = node.const("compute_mode", None)
    return None if mode in (None, 0, 1, 2) else f"compute_mode={mode!r}"


def _embedding_bag(node: NodeInfo):
    """What torch takes (it raises otherwise), minus what the segment reduction cannot copy: 1-D
    indices and offsets of one dtype, a 2-D weight, modes 0-2, per-sample weights of the indices'
    shape in ``sum`` mode only, constant offsets starting at 0, non-decreasing and within the
    indices; ``max`` mode on a constant weight free of NaN (torch's max skips a NaN after a bag's
    first row, the reduction would keep it)."""
    t = {a.name: a for a in node.args}
    w, i, o = (t[k].type for k in ("weight", "indices", "offsets"))
    if len(w.shape) != 2 or len(i.shape) != 1 or len(o.shape) != 1:
        return f"weight {tuple(w.shape)}, indices {tuple(i.shape)}, offsets {tuple(o.shape)} (2-D, 1-D, 1-D)"
    if i.dtype != o.dtype:
        return f"indices of {i.dtype} and offsets of {o.dtype} (torch takes one dtype)"
    mode = node.const("mode", 0)
    if mode not in (0, 1, 2):
        return f"mode={mode!r}"
    if node.const("include_last_offset", False) and o.shape[0] < 1:
        return "include_last_offset with no offsets"
    psw = t.get("per_sample_weights")
    if psw is not None and isinstance(psw.type, TensorType):
        if mode != 0:
            return "per_sample_weights outside mode 'sum' (torch raises)"
        if tuple(psw.type.shape) != tuple(i.shape) or psw.type.dtype != "float32":
            return f"per_sample_weights {psw.type} for indices of shape {tuple(i.shape)}"
    if t["offsets"].is_constant:
        off = [int(x) for x in t["offsets"].value.reshape(-1)]
        last = node.const("include_last_offset", False)
        if off and (off[0] != 0 or off[-1] > i.shape[0] or last and off[-1] != i.shape[0]
                    or any(a > b for a, b in zip(off, off[1:]))):
            return (f"offsets {off} (they start at 0, do not decrease and stay within the {i.shape[0]} indices; "
                    "the last one is their count with include_last_offset: torch's paths disagree past it)")
    if mode == 2:
        if not t["weight"].is_constant:
            return "mode 'max' on a computed weight (torch's max skips a NaN after a bag's first row)"
        wv = t["weight"].value
        if bool((wv != wv).any()):   # (NaN: no numpy import in this module)
            return "mode 'max' on a weight holding NaN (torch's max skips a NaN after a bag's first row)"
    return None


def _fold(node: NodeInfo):
    """``im2col`` of a 3-D / 4-D input, ``col2im`` of a 2-D / 3-D one (torch's ranks; the shape rule
    checks the blocks), kernel, dilation and stride >= 1, padding >= 0."""
    rank = _rank(node, 0)
    ranks = (3, 4) if node.op == "aten::im2col" else (2, 3)
    if rank not in ranks:
        return f"self of shape {_shape(node, 0)} (torch takes {ranks[0]}-D or {ranks[1]}-D)"
    for name, low in (("kernel_size", 1), ("dilation", 1), ("padding", 0), ("stride", 1)):
        v = node.const(name)
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        if len(v) not in (1, 2) or any(not isinstance(i, int) or i < low for i in v):
            return f"{name}={v!r}"
    return None if node.output_types[0].shape and all(isinstance(n, int) and n > 0 for n in
                                                      node.output_types[0].shape) else "an empty or unknown result"


def _quantile(node: NodeInfo):
    """What torch takes (it raises otherwise): a non-empty input, q within [0, 1] (0-D or 1-D, a
    float32 tensor or a number), a known interpolation."""
    shape = node.args[0].type.shape
    if not all(shape):
        return f"an empty input {tuple(shape)} (torch raises)"
    q = node.const("q")
    qa = node.arg("q")
    if isinstance(qa.type, TensorType):
        if qa.type.dtype != "float32" or len(qa.type.shape) > 1:
            return f"q of {qa.type} (torch takes a 0-D or 1-D tensor of the input's dtype)"
        qs = [float(x) for x in q.reshape(-1)]
    else:
        qs = [float(q)]
    if not all(0.0 <= x <= 1.0 for x in qs):
        return f"q={qs} (torch takes values within [0, 1])"
    mode = node.const("interpolation", "linear")
    return None if mode in ("linear", "lower", "higher", "midpoint", "nearest") else f"interpolation={mode!r}"


def _compare(node: NodeInfo):
    return _same_dtype(node, "bool", _NUMERIC)


#: the ops of the integer layer (builder/converters.py, ``int_binary``), by the dtypes they take
_INT_OPS = {"neg": _INTS, "add": _INTS, "sub": _INTS, "rsub": _INTS, "mul": _INTS, "maximum": _INTS,
            "minimum": _INTS, "max": _INTS, "min": _INTS, "floor_divide": _INTS,
            "remainder": _INTS, "bitwise_and": _LOGIC, "bitwise_or": _LOGIC, "bitwise_xor": _LOGIC,
            "logical_and": ("bool",), "logical_or": ("bool",), "logical_xor": ("bool",)}


def _arith(node: NodeInfo):
    """float32 operands (the pointwise layers), or integer / bool ones with integer numbers (the
    ``int_binary`` layer: torch's exact integer arithmetic, wrapping in the result's dtype). Tensor
    operands of other dtypes are promoted as torch does: each is cast to the result's dtype first (an
    int64 tensor times 0.5 is float32, a mask added to a float or an integer tensor takes its dtype)."""
    op = node.op.split("::", 1)[1].split(".", 1)[0]
    why = _promotes(node, _INT_OPS.get(op, ()))
    if why is None and op in _INT_ONLY and node.output_types[0].dtype == "float32":
        return f"float32 operands ({node.op} runs on the cpu plugin)"
    return why


_INT_ONLY = ("bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or",
             "logical_xor")
_OPERANDS = ("self", "other", "alpha")


def _promotes(node: NodeInfo, dtypes) -> str | None:
    """The result's dtype ``out`` is what the engine computes in (float32, or one of ``dtypes``);
    every tensor operand is cast to it, which is torch's promotion when a float result comes of
    integer or bool operands and an integer result of integers or bools (never a narrowing of a float)."""
    out = node.output_types[0].dtype
    ts = {a.type.dtype for a in node.args if a.name in _OPERANDS and isinstance(a.type, TensorType)}
    if out == "float32":
        return None
    if out not in dtypes:
        return f"{out} operands ({node.op} of {out} runs on the cpu plugin)"
    if "float32" in ts:
        return f"a float32 operand with a {out} result"
    for a in node.args:
        if a.name in _OPERANDS and not isinstance(a.type, TensorType):
            v = node.const(a.name, None)
            if not a.is_constant or not isinstance(v, bool if out == "bool" else int):
                return f"argument {a.name!r} is {v!r}: {out} operands take an integer constant"
    return None


def _same_dtype(node: NodeInfo, result: str | None, dtypes) -> str | None:
    """Tensor operands of one dtype (``float32``: the float layers; else one of ``dtypes``), numbers
    integral for integer operands, and the result ``result`` (None: the operands' dtype)."""
    ts = {a.type.dtype for a in node.args if a.name in _OPERANDS and isinstance(a.type, TensorType)}
    if len(ts) > 1:
        return f"operands of dtypes {sorted(ts)} (the engine compares in one dtype, no promotion)"
    (dt,) = ts or ("float32",)
    if dt == "float32":
        return None
    if dt not in dtypes:
        return f"{dt} operands ({node.op} of {dt} runs on the cpu plugin)"
    for a in node.args:
        if a.name in _OPERANDS and not isinstance(a.type, TensorType):
            v = node.const(a.name, None)
            if not a.is_constant or not isinstance(v, bool if dt == "bool" else int):
                return f"argument {a.name!r} is {v!r}: {dt} operands take an integer constant"
    want = result or dt
    if node.output_types[0].dtype != want:
        return f"the result is {node.output_types[0].dtype}; {dt} operands make {want}"
    return None


def _where(node: NodeInfo):
    """float32 values, or integer / bool ones of the result's dtype (a number of an integer result
    integral and within torch's checked conversion: ``where(m, u8, 300)`` raises in torch)."""
    out = node.output_types[0].dtype
    ts = {a.type.dtype for a in node.args if a.name in ("self", "other") and isinstance(a.type, TensorType)}
    if out == "float32":
        return None
    if ts - {out}:
        return f"values of dtypes {sorted(ts)} and a {out} result (no promotion in where)"
    for a in node.args:
        if a.name in ("self", "other") and not isinstance(a.type, TensorType):
            v = node.const(a.name, None)
            if not a.is_constant or not isinstance(v, bool if out == "bool" else int):
                return f"argument {a.name!r} is {v!r}: a {out} where takes an integer constant"
            if out != "bool" and not _fits(v, out):
                return f"argument {a.name!r} is {v!r}, out of {out}'s range (torch raises)"
    return None


def _fits(v: int, dtype: str) -> bool:
    """torch's checked conversion of a number to an integer dtype (c10::overflows): signed ones take
    their range, unsigned ones also the negatives down to -max (they wrap)."""
    bits = {"int64": 64, "int32": 32, "int16": 16, "int8": 8, "uint8": 8}[dtype]
    if dtype == "uint8":
        return -255 <= v <= 255
    return -(1 << (bits - 1)) <= v < (1 << (bits - 1))


def _one_hot(node: NodeInfo):
    n = node.const("num_classes", -1)
    return None if isinstance(n, int) and n >= 0 else f"num_classes={n!r} (the engine needs it known: no -1)"


def _int_scalar(node: NodeInfo):
    if node.args[0].type.dtype != node.output_types[0].dtype:
        return f"a {node.args[0].type.dtype} self made {node.output_types[0].dtype}"
    if node.args[0].type.dtype == "float32" and not isinstance(node.const("other", None), (int, float)):
        return f"argument 'other' is {node.const('other', None)!r}, not a number"
    mode = node.const("rounding_mode", None) if node.op.startswith("aten::div") else "floor"
    return None if mode == "floor" else f"rounding_mode={mode!r} (the engine divides integers with 'floor')"


def _rows(converter: str, ops: dict[str, tuple[str, ...]], check: Check | None = None,
          int8: bool = False, data_args: dict[str, tuple[str, ...]] | None = None,
          data_results: dict[int, tuple[str, ...]] | None = None, any_data: bool = False) -> list[OpSupport]:
    data = tuple((data_args or {}).items())
    results = tuple((data_results or {}).items())
    return [OpSupport(op, converter, consts, check, _NOTES.get(check, ""), int8, data, results, any_data)
            for op, consts in ops.items()]


def _qconv(node: NodeInfo):
    if len(node.args[0].type.shape) != 4:
        return f"qx of shape {_shape(node, 0)} is not 4-D (the layers are batched NCHW)"
    return _weight_axis(node, 1)


def _weight_axis(node: NodeInfo, i: int):
    q = node.args[i].type.qparams
    if q is not None and q.axis not in (None, 0):
        return f"{node.args[i].name} is quantized per channel along axis {q.axis} (the int8 layers take axis 0)"
    return None


def _qadd(node: NodeInfo):
    a, b = node.args[0].type.shape, node.args[1].type.shape
    return None if tuple(a) == tuple(b) else f"qa {_shape(node, 0)} and qb {_shape(node, 1)} differ (no broadcasting)"


def _quantized_input(node: NodeInfo) -> bool:
    return node.args[0].type.dtype in INT8_DTYPES


def _adaptive_pool(node: NodeInfo):
    why = _nchw(node)
    if why is None and _quantized_input(node) and tuple(node.output_types[0].shape[-2:]) != (1, 1):
        return f"output_size={node.const('output_size')!r} on a quantized tensor (the int8 layer pools to 1x1)"
    return why


def _mean(node: NodeInfo):
    why = _no_dtype(node)
    if why is None and _quantized_input(node):
        nd = _rank(node, 0)
        dims = node.const("dim", None)
        dims = sorted(d % nd for d in dims) if dims else list(range(nd))
        if dims != list(range(nd - len(dims), nd)):
            return f"dim={node.const('dim', None)!r} on a quantized tensor (the int8 mean is over the innermost dims)"
    return why


def _qmax_pool(node: NodeInfo):
    why = _nchw(node)
    if why is None and node.args[0].type.dtype in INT8_DTYPES and node.const("ceil_mode", False):
        return "ceil_mode=True on a quantized tensor"
    return why


_NOTES = {
    _pixel_shuffle: "rank >= 3; channels (shuffle) or height and width (unshuffle) divisible by the factor",
    _einsum: "two or more operands (a chain of products); every letter a batch (equal sizes), contracted or free one; no ellipsis",
    _roll: "explicit dims",
    _gelu: "approximate is 'none' or 'tanh'",
    _dropout: "train=False (inference: the identity)",
    _nchw: "a 4-D (N, C, H, W) input",
    _convolution: "1-D, 2-D or 3-D; transposed: 2-D",
    _ncdhw: "a 5-D (N, C, D, H, W) input",
    _pool3d: "a 5-D (N, C, D, H, W) input, padding at most half the kernel, no divisor_override",
    _pool1d: "a 3-D (N, C, L) input, padding at most half the kernel",
    _conv_transpose: "a batched (N, C, *spatial) input of 1-3 spatial dims, a constant weight (C, O / groups, *k)",
    _ncl: "a 3-D (N, C, L) input, explicit padding",
    _matmul: "x @ a constant 2-D weight, or two operands of rank >= 2, one of them computed (no matrix-vector products)",
    _addmm: "alpha != 0, a 2-D mat2",
    _no_dtype: "no dtype argument",
    _encoder: "no mask, a 3-D src",
    _sdpa: "no dropout, a float mask, none or is_causal, equal batch dims",
    _baddbmm: "computed batch1 and batch2",
    _repeat_interleave: "an integer number of repeats along a given dim",
    _native_mha: "no mask, need_weights=False, batch-first 3-D inputs",
    _qconv: "int8: a 4-D qx, weights per tensor or per output channel",
    _qadd: "int8: equal shapes",
    _qmax_pool: "a 4-D (N, C, H, W) input; quantized: ceil_mode=False",
    _adaptive_pool: "a 4-D (N, C, H, W) input; quantized: to 1x1",
    _mean: "no dtype argument; quantized: over the innermost dims",
    _group_norm: "(N, C, ...) input, C divisible by num_groups",
    _cat: "a list of float32 tensors of one rank built in the graph (prim::ListConstruct, copied into the segment)",
    _resize: "a 4-D (N, C, H, W) input, mode 'nearest', 'bilinear' or 'bicubic', or a 3-D (N, C, L) one, 'nearest' or "
             "'linear' (align_corners either), or a 5-D one, 'nearest'; no antialias",
    _pad: "mode 'constant', 'reflect' (pads under the dim's size) or 'replicate', non-negative pads",
    _grid_sample: "4-D input and (N, Ho, Wo, 2) grid; bilinear or nearest, any padding mode",
    _affine_grid: "a 4-D size (N, C, H, W) and an (N, 2, 3) theta",
    _embedding: "a constant 2-D weight; indices int64 or int32 (engine inputs or constants)",
    _gather: "index int64 of self's rank",
    _index_select: "a 0-D or 1-D int64 / int32 index",
    _instance_norm: "(N, C, ...) input; running statistics when use_input_stats=False",
    _sort: "a float32 input of rank >= 1; indices int64 (ties in input order: torch's stable=True order)",
    _scatter: "self, index (int64) and src of one rank; no reduce argument",
    _cdist: "x1 and x2 of rank >= 2, as many columns, broadcasting batch dims; p >= 0; compute_mode as torch's",
    _embedding_bag: "1-D indices and offsets of one dtype (constant offsets start at 0, do not decrease, stay within "
                    "the indices, end at their count with include_last_offset), modes sum / mean / max (max: a constant weight without NaN), per_sample_weights in sum "
                    "mode; results 1-3 unread",
    _fold: "im2col: a 3-D or 4-D input; col2im: a 2-D or 3-D one; kernel, dilation, stride >= 1, padding >= 0",
    _quantile: "a constant q within [0, 1] (a number, or a 0-D / 1-D float32 tensor), any interpolation; a non-empty input",
    _searchsorted: "values and boundaries of one dtype (float32, int64, int32); bucketize: 1-D boundaries; "
                   "searchsorted: a 1-D sequence or one of the values' leading dims, an int64 sorter of its shape",
    _cumsum: "no dtype argument; float32, or bool / int64 / int32 (an int64 sum)",
    _compare: "float32 or integer (int64, int32, int16, int8, uint8) operands of one dtype (a tensor and a tensor or a number; integer "
              "tensors: an integer number); the result is a bool mask",
    _arith: "float32 operands, or integer ones (int64, int32, int16, int8, uint8; bitwise: bool too) with integer "
            "numbers: exact integer arithmetic wrapping in the result's dtype, numbers cast to it as torch "
            "(floor_divide / remainder by 0 raises, as torch); integer / bool tensors promoted to the result's "
            "dtype (int64 * 0.5 is float32)",
    _where: "float32 values, or integer / bool ones of the result's dtype (numbers within torch's checked range)",
    _one_hot: "int64 indices, a known num_classes",
    _batch_norm: "(N, C, ...) input; training=False with running statistics",
    _int_scalar: "integer self (int64, int32, int16, int8, uint8; other cast to its dtype, wrapping, as torch), an integer other (a division by 0 fails the build, as torch raises); "
                 "div: rounding_mode='floor'",
}


_ARITH = {"data_args": {"self": _PROMOTED, "other": _PROMOTED}, "data_results": {0: _NUMERIC}}
_LOGIC_ARGS = {"data_args": {"self": _LOGIC, "other": _LOGIC}, "data_results": {0: _LOGIC}}

_UNARY = ("aten::abs", "aten::exp", "aten::log", "aten::sqrt", "aten::rsqrt", "aten::reciprocal",
          "aten::square", "aten::relu6", "aten::sigmoid", "aten::tanh", "aten::silu",
          "aten::hardswish", "aten::hardsigmoid", "aten::mish", "aten::sin", "aten::cos", "aten::expm1",
          "aten::log1p", "aten::erf")
_CONV_ARGS = ("weight", "bias", "stride", "padding", "dilation", "groups")
_QCONV_ARGS = ("weight", "bias", "stride", "padding", "dilation", "groups", "output_scale", "output_zero_point")
_QLINEAR_ARGS = ("W", "B", "Y_scale_i", "Y_zero_point_i")
_ENCODER_ARGS = ("embed_dim", "num_heads", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "use_gelu",
                 "norm_first", "eps", "norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2",
                 "ffn_weight_1", "ffn_bias_1", "ffn_weight_2", "ffn_bias_2", "mask_type")

_TABLE: list[OpSupport] = [
    # pointwise (fused into one compiled kernel per group)
    *_rows("add_sub", {"aten::add.Tensor": ("alpha",), "aten::add.Scalar": ("other", "alpha"),
                       "aten::sub.Tensor": ("alpha",), "aten::sub.Scalar": ("other", "alpha")}, _arith, **_ARITH),
    *_rows("add_sub", {"srcore::add_relu": ("alpha",)}),
    *_rows("rsub", {"aten::rsub.Tensor": ("alpha",), "aten::rsub.Scalar": ("other", "alpha")}, _arith, **_ARITH),
    *_rows("binary", {"aten::mul.Tensor": (), "aten::mul.Scalar": ("other",), "aten::maximum": (),
                      "aten::minimum": (), "aten::max.other": (), "aten::min.other": ()}, _arith, **_ARITH),
    *_rows("binary", {"aten::div.Tensor": (), "aten::div.Scalar": ("other",)}, _arith,
           data_args={"self": _PROMOTED, "other": _PROMOTED}),
    # integer and bool elementwise ops (the int_binary layer)
    *_rows("int_binary", {"aten::floor_divide": (), "aten::remainder.Tensor": ()}, _arith, **_ARITH),
    *_rows("int_binary", {**{f"aten::bitwise_{op}.{form}": ("other",) if form == "Scalar" else ()
                             for op in ("and", "or", "xor") for form in ("Tensor", "Scalar")}},
           _arith, **_LOGIC_ARGS),
    *_rows("int_binary", {f"aten::logical_{op}": () for op in ("and", "or", "xor")}, _arith,
           data_args={"self": ("bool",), "other": ("bool",)}, data_results={0: ("bool",)}),
    *_rows("one_hot", {"aten::one_hot": ("num_classes",)}, _one_hot, data_args={"self": ("int64",)},
           data_results={0: ("int64",)}),
    *_rows("flip", {"aten::flip": ("dims",)}, any_data=True),
    *_rows("unary", {op: () for op in _UNARY}),
    *_rows("negate", {"aten::neg": ()}, _arith, data_args={"self": _NUMERIC}, data_results={0: _NUMERIC}),
    *_rows("unary", {"aten::relu": ()}, int8=True),
    *_rows("gelu", {"aten::gelu": ("approximate",)}, _gelu),
    *_rows("glu", {"aten::glu": ("dim",)}),
    *_rows("clamp", {"aten::hardtanh": ("min_val", "max_val"), "aten::clamp": ("min", "max"),
                     "aten::clamp_min": ("min",), "aten::clamp_max": ("max",)}),
    *_rows("leaky_relu", {"aten::leaky_relu": ("negative_slope",)}),
    *_rows("prelu", {"aten::prelu": ()}, _prelu),
    *_rows("elu", {"aten::elu": ("alpha", "scale", "input_scale")}),
    *_rows("softplus", {"aten::softplus": ("beta", "threshold")}),
    *_rows("selu", {"aten::selu": ()}),
    *_rows("nan_to_num", {"aten::nan_to_num": ("nan", "posinf", "neginf")}),
    *_rows("round_", {"aten::round": (), "aten::round.decimals": ("decimals",)}),
    *_rows("log_sigmoid", {"aten::log_sigmoid": ()}),
    *_rows("clamp_tensor", {"aten::clamp.Tensor": ()}, _clamp_tensor),
    *_rows("pow_scalar", {"aten::pow.Tensor_Scalar": ("exponent",)}),
    *_rows("pow_scalar", {"aten::pow.Tensor_Tensor": ("exponent",)}, _pow_tensor),
    # layout (views inside the engine) and copies
    *_rows("alias", {"aten::contiguous": ("memory_format",), "aten::flatten.using_ints": ("start_dim", "end_dim"),
                     "aten::view": ("size",), "aten::reshape": ("shape",), "aten::unflatten.int": ("dim", "sizes")},
           int8=True, any_data=True),
    *_rows("alias", {"aten::dropout": ("p", "train")}, _dropout, int8=True),
    *_rows("alias", {"aten::squeeze.dim": ("dim",), "aten::unsqueeze": ("dim",)}, any_data=True),
    *_rows("permute", {"aten::transpose.int": ("dim0", "dim1"), "aten::permute": ("dims",), "aten::t": ()},
           any_data=True),
    *_rows("pixel_shuffle", {"aten::pixel_shuffle": ("upscale_factor",),
                             "aten::pixel_unshuffle": ("downscale_factor",)}, _pixel_shuffle),
    *_rows("roll", {"aten::roll": ("shifts", "dims")}, _roll, any_data=True),
    *_rows("index", {"aten::select.int": ("dim", "index"), "aten::slice.Tensor": ("dim", "start", "end", "step")},
           any_data=True),
    *_rows("narrow", {"aten::narrow": ("dim", "start", "length")}, any_data=True),
    # convolution and pooling
    *_rows("conv", {"aten::conv2d": _CONV_ARGS, "srcore::conv2d_relu": _CONV_ARGS,
                    "srcore::conv2d_add_relu": _CONV_ARGS}, _nchw),
    *_rows("conv", {"aten::conv1d": _CONV_ARGS}, _ncl),
    *_rows("conv3d", {"aten::conv3d": _CONV_ARGS}, _ncdhw),
    *_rows("conv", {"aten::_convolution": ("weight", "bias", "stride", "padding", "dilation", "transposed",
                                           "output_padding", "groups")}, _convolution),
    *_rows("conv_transpose", {"aten::conv_transpose1d": ("weight", "bias", "stride", "padding",
                                                         "output_padding", "groups", "dilation")},
           _conv_transpose),
    *_rows("conv_transpose", {"aten::conv_transpose2d.input": ("weight", "bias", "stride", "padding",
                                                               "output_padding", "groups", "dilation")},
           _conv_transpose),
    *_rows("conv_transpose", {"aten::conv_transpose3d.input": ("weight", "bias", "stride", "padding",
                                                               "output_padding", "groups", "dilation")},
           _conv_transpose),
    *_rows("max_pool", {"aten::max_pool2d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode")}, _qmax_pool,
           int8=True),
    *_rows("avg_pool", {"aten::avg_pool2d": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                                             "divisor_override")}, _nchw),
    *_rows("adaptive_avg_pool", {"aten::adaptive_avg_pool2d": ("output_size",)}, _adaptive_pool, int8=True),
    # 1-D and 3-D pools: 2-D pool layers on views (builder/pool1d.py, builder/volume.py)
    *_rows("max_pool1d", {"aten::max_pool1d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode")},
           _pool1d),
    *_rows("avg_pool1d", {"aten::avg_pool1d": ("kernel_size", "stride", "padding", "ceil_mode",
                                               "count_include_pad")}, _pool1d),
    *_rows("adaptive_avg_pool1d", {"aten::adaptive_avg_pool1d": ("output_size",)}, _pool1d),
    *_rows("max_pool3d", {"aten::max_pool3d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode")},
           _pool3d),
    *_rows("avg_pool3d", {"aten::avg_pool3d": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                                               "divisor_override")}, _pool3d),
    *_rows("adaptive_avg_pool3d", {"aten::adaptive_avg_pool3d": ("output_size",)}, _ncdhw),
    *_rows("qadaptive_avg_pool", {"quantized::adaptive_avg_pool2d_channels_last": ("output_size",)}, _adaptive_pool,
           int8=True),
    # matrix products (a constant weight is laid out once)
    *_rows("linear", {"aten::linear": ("weight", "bias"), "srcore::linear_relu": ("weight", "bias"),
                      "srcore::linear_silu": ("weight", "bias"), "srcore::linear_tanh": ("weight", "bias"),
                      "srcore::linear_sigmoid": ("weight", "bias")}),
    *_rows("linear", {"srcore::linear_gelu": ("weight", "bias", "approximate")}, _gelu),
    *_rows("matmul", {"aten::matmul": (), "aten::mm": (), "aten::bmm": ()}, _matmul),
    *_rows("baddbmm", {"aten::baddbmm": ("beta", "alpha")}, _baddbmm),
    *_rows("addmm", {"aten::addmm": ("self", "mat2", "beta", "alpha")}, _addmm),
    *_rows("einsum", {"aten::einsum": ("equation", "path")}, _einsum),
    # normalisation, reductions
    *_rows("softmax", {"aten::softmax.int": ("dim", "dtype"), "aten::log_softmax.int": ("dim", "dtype")}, _no_dtype),
    *_rows("layer_norm", {"aten::layer_norm": ("normalized_shape", "weight", "bias", "eps")}),
    *_rows("rms_norm", {"aten::rms_norm": ("normalized_shape", "weight", "eps")}),
    *_rows("group_norm", {"aten::group_norm": ("num_groups", "weight", "bias", "eps", "cudnn_enabled")},
           _group_norm),
    *_rows("batch_norm", {"aten::batch_norm": ("weight", "bias", "running_mean", "running_var", "training",
                                               "momentum", "eps", "cudnn_enabled")}, _batch_norm),
    *_rows("instance_norm", {"aten::instance_norm": ("weight", "bias", "running_mean", "running_var",
                                                     "use_input_stats", "momentum", "eps", "cudnn_enabled")},
           _instance_norm),
    *_rows("mean", {"aten::mean.dim": ("dim", "keepdim", "dtype")}, _mean, int8=True),
    *_rows("mean", {"aten::mean": ("dtype",)}, _no_dtype),
    *_rows("mse_loss", {"aten::mse_loss": ("reduction",)}, _mse_loss),
    *_rows("norm", {"aten::norm.ScalarOpt_dim": ("p", "dim", "keepdim"), "aten::norm.Scalar": ("p",),
                    "aten::linalg_vector_norm": ("ord", "dim", "keepdim", "dtype")}, _norm),
    *_rows("var_std", {f"aten::{op}{form}": args for op in ("var", "std") for form, args in (
        ("", ("unbiased",)), (".dim", ("dim", "unbiased", "keepdim")), (".correction", ("dim", "correction", "keepdim")))},
           _reduce),
    *_rows("cumsum", {"aten::cumsum": ("dim", "dtype")}, _cumsum, data_args={"self": ("float32", *DATA_DTYPES)},
           data_results={0: ("float32", "int64")}),
    # data movement: concatenation, resizing, padding, lookups and selections
    *_rows("cat", {"aten::cat": ("dim",)}, _cat),
    *_rows("stack", {"aten::stack": ("dim",)}, _cat),
    *_rows("expand", {"aten::expand": ("size", "implicit"), "aten::expand_as": ()}, any_data=True),
    *_rows("repeat", {"aten::repeat": ("repeats",)}, any_data=True),
    *_rows("repeat_interleave", {"aten::repeat_interleave.self_int": ("repeats", "dim", "output_size")},
           _repeat_interleave, any_data=True),
    *_rows("cast", {"aten::to.dtype": ("dtype", "non_blocking", "copy", "memory_format")},
           data_args={"self": ("float32", *DATA_DTYPES, *HALF)}, data_results={0: ("float32", *DATA_DTYPES, *HALF)}),
    *_rows("int_scalar", {"aten::div.Scalar_mode": ("other", "rounding_mode"), "aten::remainder.Scalar": ("other",),
                          "aten::floor_divide.Scalar": ("other",)},
           _int_scalar, data_args={"self": _NUMERIC}, data_results={0: _NUMERIC}),
    *_rows("resize", {"aten::upsample_nearest2d": ("output_size", "scales_h", "scales_w"),
                      "aten::upsample_nearest2d.vec": ("output_size", "scale_factors"),
                      "aten::upsample_bilinear2d": ("output_size", "align_corners", "scales_h", "scales_w"),
                      "aten::upsample_bilinear2d.vec": ("output_size", "align_corners", "scale_factors"),
                      "aten::upsample_nearest1d": ("output_size", "scales"),
                      "aten::upsample_nearest3d": ("output_size", "scales_d", "scales_h", "scales_w"),
                      "aten::upsample_nearest3d.vec": ("output_size", "scale_factors"),
                      "aten::upsample_nearest1d.vec": ("output_size", "scale_factors"),
                      "aten::upsample_bicubic2d": ("output_size", "align_corners", "scales_h", "scales_w"),
                      "aten::upsample_bicubic2d.vec": ("output_size", "align_corners", "scale_factors"),
                      "aten::upsample_linear1d": ("output_size", "align_corners", "scales"),
                      "aten::upsample_linear1d.vec": ("output_size", "align_corners", "scale_factors"),
                      **{f"aten::__interpolate{o}": ("size", "scale_factor", "mode", "align_corners",
                                                     "recompute_scale_factor", "antialias")
                         for o in ("", ".size_list", ".scale_list", ".size_list_scale_list")}}, _resize),
    *_rows("pad", {"aten::constant_pad_nd": ("pad", "value"), "aten::pad": ("pad", "mode", "value")}, _pad),
    *_rows("grid_sample", {op: ("interpolation_mode", "padding_mode", "align_corners")
                           for op in ("aten::grid_sampler", "aten::grid_sampler_2d")}, _grid_sample),
    *_rows("affine_grid", {"aten::affine_grid_generator": ("size", "align_corners")}, _affine_grid),
    *_rows("embedding", {"aten::embedding": ("weight", "padding_idx", "scale_grad_by_freq", "sparse")}, _embedding,
           data_args={"indices": _INDEX}),
    *_rows("gather", {"aten::gather": ("dim", "sparse_grad")}, _gather,
           data_args={"index": ("int64",), "self": ("float32", *DATA_DTYPES)},
           data_results={0: ("float32", *DATA_DTYPES)}),
    *_rows("index_select", {"aten::index_select": ("dim",)}, _index_select, data_args={"index": _INDEX}),
    *_rows("index_tensor", {"aten::index.Tensor": ()}, _index_tensor, data_args={"self": ("float32", *DATA_DTYPES)},
           data_results={0: ("float32", *DATA_DTYPES)}),
    *_rows("where", {"aten::where.self": (), "aten::where.ScalarOther": ("other",),
                     "aten::where.ScalarSelf": ("self",), "aten::where.Scalar": ("self", "other")}, _where,
           data_args={"condition": ("bool",), "self": _LOGIC + ("float32",), "other": _LOGIC + ("float32",)},
           data_results={0: _LOGIC + ("float32",)}),
    *_rows("masked_fill", {"aten::masked_fill.Scalar": ("value",), "aten::masked_fill.Tensor": ()},
           data_args={"mask": ("bool",)}),
    *_rows("sort", {"aten::sort": ("dim", "descending"), "aten::sort.stable": ("stable", "dim", "descending")},
           _sort, data_results={1: ("int64",)}),
    *_rows("topk", {"aten::topk": ("k", "dim", "largest", "sorted")}, _sort, data_results={1: ("int64",)}),
    *_rows("argsort", {"aten::argsort": ("dim", "descending"), "aten::argsort.stable": ("stable", "dim", "descending")},
           _sort, data_args={"self": ("float32", "int64", "int32")}, data_results={0: ("int64",)}),
    *_rows("reduce", {"aten::amax": ("dim", "keepdim"), "aten::amin": ("dim", "keepdim"),
                      "aten::logsumexp": ("dim", "keepdim")}, _reduce),
    *_rows("reduce", {"aten::sum.dim_IntList": ("dim", "keepdim", "dtype"), "aten::sum": ("dtype",)}, _count,
           data_args={"self": ("bool", "float32", *_INTS)}, data_results={0: ("int64", "float32")}),
    *_rows("reduce", {"aten::any.dim": ("dim", "keepdim"), "aten::all.dim": ("dim", "keepdim"),
                      "aten::any.dims": ("dim", "keepdim"), "aten::all.dims": ("dim", "keepdim"), "aten::any": (),
                      "aten::all": ()}, data_args={"self": ("bool",)}, data_results={0: ("bool",)}),
    *_rows("max_dim", {"aten::max.dim": ("dim", "keepdim"), "aten::min.dim": ("dim", "keepdim")}, _arg_reduce,
           data_results={1: ("int64",)}),
    *_rows("global_max_pool1d", {"aten::adaptive_max_pool1d": ("output_size",)}, _global_max_pool1d,
           data_results={1: ("int64",)}),
    *_rows("logical_not", {"aten::bitwise_not": (), "aten::logical_not": ()}, data_args={"self": ("bool",)},
           data_results={0: ("bool",)}),
    *_rows("argmax", {"aten::argmax": ("dim", "keepdim"), "aten::argmin": ("dim", "keepdim")}, _arg_reduce,
           data_args={"self": ("float32", "int64", "int32")}, data_results={0: ("int64",)}),
    *_rows("scatter", {"aten::scatter.src": ("dim",), "aten::scatter.value": ("dim", "value"),
                       "aten::scatter_add": ("dim",)}, _scatter, data_args={"index": ("int64",)}),
    *_rows("scatter_reduce", {"aten::scatter_reduce.two": ("dim", "reduce", "include_self")}, _scatter_reduce,
           data_args={"index": ("int64",)}),
    *_rows("cdist", {"aten::cdist": ("p", "compute_mode"), "aten::_cdist_forward": ("p", "compute_mode")}, _cdist),
    *_rows("embedding_bag", {"aten::embedding_bag": ("scale_grad_by_freq", "mode", "sparse", "include_last_offset"),
                             "aten::embedding_bag.padding_idx": ("scale_grad_by_freq", "mode", "sparse",
                                                                 "include_last_offset", "padding_idx")},
           _embedding_bag, data_args={"indices": _INDEX, "offsets": _INDEX},
           data_results={1: ("int64",), 2: ("int64",), 3: ("int64",)}),
    *_rows("im2col", {"aten::im2col": ("kernel_size", "dilation", "padding", "stride")}, _fold),
    *_rows("col2im", {"aten::col2im": ("output_size", "kernel_size", "dilation", "padding", "stride")}, _fold),
    *_rows("quantile", {"aten::quantile": ("q", "dim", "keepdim", "interpolation"),
                        "aten::quantile.scalar": ("q", "dim", "keepdim", "interpolation")}, _quantile),
    *_rows("searchsorted", {"aten::bucketize.Tensor": ("out_int32", "right"),
                            "aten::searchsorted.Tensor": ("out_int32", "right", "side")}, _searchsorted,
           data_args={"self": ("float32", *_INDEX), "boundaries": ("float32", *_INDEX),
                      "sorted_sequence": ("float32", *_INDEX), "sorter": ("int64",)},
           data_results={0: _INDEX}),
    *_rows("index_add", {"aten::index_add": ("dim", "alpha")}, _index_add, data_args={"index": ("int64", "int32")}),
    # only self's shape is read: any dtype (a bool key padding mask made float: F._canonical_mask);
    # the float32 result is checked as every result is, whatever ``dtype`` asks
    *_rows("zeros_like", {"aten::zeros_like": ("dtype", "layout", "device", "pin_memory", "memory_format")},
           data_args={"self": ENGINE_DTYPES + DATA_DTYPES}),
    *_rows("full_like", {"aten::ones_like": ("dtype", "layout", "device", "pin_memory", "memory_format"),
                         "aten::full_like": ("fill_value", "dtype", "layout", "device", "pin_memory",
                                             "memory_format")},
           data_args={"self": ENGINE_DTYPES + DATA_DTYPES}),
    *_rows("compare", {f"aten::{op}.{form}": ("other",) if form == "Scalar" else ()
                       for op in ("lt", "le", "gt", "ge", "eq", "ne") for form in ("Tensor", "Scalar")},
           _compare, data_args={"self": _NUMERIC, "other": _NUMERIC}, data_results={0: ("bool",)}),
    *_rows("sdpa", {"aten::scaled_dot_product_attention": ("dropout_p", "is_causal", "scale", "enable_gqa")}, _sdpa,
           data_args={"attn_mask": ("float32", "bool")}),
    *_rows("native_mha", {"aten::_native_multi_head_attention": (
        "embed_dim", "num_head", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "need_weights",
        "average_attn_weights", "mask_type")}, _native_mha, data_args={"mask": ("float32", "bool")}),
    *_rows("encoder_layer", {"aten::_transformer_encoder_layer_fwd": _ENCODER_ARGS}, _encoder,
           data_args={"mask": ("float32", "bool")}),
    # int8 layers (quantized segments: docs/trt-like.md, "INT8 engines")
    *_rows("quantize", {"aten::quantize_per_tensor": ("scale", "zero_point", "dtype"),
                        "aten::quantize_per_tensor.tensor_qparams": ("scale", "zero_point", "dtype")}, int8=True),
    *_rows("dequantize", {"aten::dequantize.self": ()}, int8=True),
    *_rows("qconv", {"quantized::qconv2d": _QCONV_ARGS, "quantized::qconv2d_relu": _QCONV_ARGS}, _qconv, int8=True),
    *_rows("qconv_then_add", {"quantized::qconv2d_then_add": ("weight", "bias", "stride", "padding", "dilation",
                                                              "groups", "conv_scale", "conv_zero_point", "conv_relu",
                                                              "output_scale", "output_zero_point", "relu", "layout")},
           _qconv, int8=True),
    *_rows("qlinear", {"quantized::qlinear": _QLINEAR_ARGS, "quantized::qlinear_relu": _QLINEAR_ARGS},
           lambda node: _weight_axis(node, 1), int8=True),
    *_rows("qadd", {f"quantized::{op}": ("scale", "zero_point")
                    for op in ("add", "add_relu", "add_channels_last", "add_relu_channels_last", "add_mixed_layout",
                               "add_relu_mixed_layout")}, _qadd, int8=True),
]

#: op (base name or full overload) -> its row
SUPPORT: dict[str, OpSupport] = {row.op: row for row in _TABLE}


def lookup(op: str) -> OpSupport | None:
    """The row of ``op`` (``aten::add.Tensor``), or of its base name (``aten::relu``)."""
    return SUPPORT.get(op) or SUPPORT.get(op.split(".", 1)[0])


def converter_name(op: str) -> str | None:
    row = lookup(op)
    return row.converter if row is not None else None


def refusal(node: NodeInfo) -> str | None:
    """Why ``node`` may not go into a trt_like engine (naming the argument, dtype or shape at
    fault), or None if it may."""
    row = SUPPORT.get(node.op)
    if row is None:
        return f"{node.op} is not in the engine's op table (srcore list-ops --engine trt_like)"
    why = _tensors_refused(node, row)
    if why:
        return why
    for a in node.args:
        if a.name not in row.constants or a.is_constant:
            continue
        if isinstance(a.type, TensorType):
            return f"argument {a.name!r} is a computed tensor; the engine bakes it in (a weight) and needs a constant"
        if not a.derived:
            return (f"argument {a.name!r} is computed from tensor data at run time; the engine bakes it in "
                    f"and needs a constant or a value known from the input shapes")
    if row.check is None:
        return None
    try:
        return row.check(node)
    except KeyError as exc:   # the check needs the value of an argument known only per signature
        return f"{exc.args[0] if exc.args else exc}: the engine needs it to decide"


def supports(node: NodeInfo) -> bool | str:
    """``True`` if ``node`` may go into a trt_like engine, else the reason it may not."""
    return refusal(node) or True


def _tensors_refused(node: NodeInfo, row: OpSupport) -> str | None:
    if not node.output_types or not isinstance(node.output_types[0], TensorType):
        return f"its result is {node.output_types[0] if node.output_types else 'nothing'}, not a tensor"
    # an int8 row bakes its constant arguments in as numbers (quantize's scale and zero point tensors)
    data = dict(row.data_args)
    for a in node.args:
        if a.name in data and isinstance(a.type, TensorType):
            if a.type.dtype not in data[a.name]:
                return f"argument {a.name!r} is {a.type.dtype or 'of unknown dtype'}; {node.op} takes {', '.join(data[a.name])}"
            if a.type.shape is None:
                return f"argument {a.name!r} has no known rank"
    named = [(f"argument {a.name!r}", a.type, a.is_constant) for a in node.args
             if a.name not in data
             and not (row.int8 and a.is_constant and a.name in row.constants
                      and not (isinstance(a.type, TensorType) and a.type.dtype in INT8_DTYPES))]
    several = len(node.output_types) > 1
    results = dict(row.data_results)
    for i, t in enumerate(node.output_types):
        name = f"result {i}" if several else "the result"
        if i in results and isinstance(t, TensorType):
            if t.dtype not in results[i]:
                return f"{name} is {t.dtype or 'of unknown dtype'}; {node.op} makes {', '.join(results[i])}"
            continue
        named.append((name, t, False))
    for name, t, const in named:
        if not isinstance(t, TensorType):
            continue
        if row.any_data and t.dtype in DATA_DTYPES:
            if t.shape is None:
                return f"{name} has no known rank"
            continue
        if t.dtype in INT8_DTYPES and row.int8:
            # baked into the requantization: known per-tensor parameters (a constant weight: per channel too)
            if t.qparams is None:
                return f"{name} is {t.dtype} with parameters known only at run time (dynamic quantization)"
            if t.qparams.axis is not None and not const:
                return f"{name} is {t.dtype} quantized per channel; the int8 layers take per-tensor activations"
        elif t.dtype not in ENGINE_DTYPES:
            what = ", ".join(ENGINE_DTYPES + (INT8_DTYPES if row.int8 else ()))
            more = "" if row.int8 else f" ({node.op} has no int8 layer)" if t.dtype in INT8_DTYPES else ""
            return f"{name} is {t.dtype or 'of unknown dtype'}; engines compute in {what}{more}"
        if t.shape is None:
            return f"{name} has no known rank"
    return None


def engine_ops() -> list:
    """The op table as :class:`srcore.plugin.EngineOp` records (``srcore list-ops --engine trt_like``)."""
    from srcore.plugin import EngineOp

    return [EngineOp(row.op, row.constants, row.notes) for row in _TABLE]

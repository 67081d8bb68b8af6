"""Normalization: batch_norm (eval and batch statistics), layer_norm, native_layer_norm,
group_norm, instance_norm, and the native batch-norm variants torch.export emits.

Eval batch norm folds its four constants into one scale and one shift at load
(the matcher), so the hot path is one multiply and one add into ``out``.
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo, Specialized, TensorType

from .aliasing import disjoint_or_same


def _chan(v, ndim):
    """A per-channel vector shaped to broadcast over (N, C, *spatial)."""
    return v.reshape((-1,) + (1,) * (ndim - 2)) if ndim > 1 else v


def _fold(weight, bias, mean, var, eps, dtype):
    scale = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias
    return scale.astype(dtype), shift.astype(dtype)


def _affine(out, scale, shift):
    np.multiply(out, scale, out=out)
    np.add(out, shift, out=out)
    return out


def _normalize(x, axes, eps, out):
    """``(x - mean) * rstd`` over ``axes`` into ``out``; returns (out, mean, rstd) keepdims."""
    mean = np.mean(x, axis=axes, keepdims=True)
    np.subtract(x, mean, out=out)
    var = np.mean(np.square(out), axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    np.multiply(out, rstd, out=out)
    return out, mean, rstd


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True,
               out=None):
    """``aten::batch_norm``: running statistics in eval, batch statistics when training (no update)."""
    if not training and (running_mean is None or running_var is None):
        raise KernelError("batch_norm: running_mean and running_var must be defined in evaluation mode")
    if out is None:
        out = np.empty_like(input)
    nd = input.ndim
    if training:
        axes = (0,) + tuple(range(2, nd))
        _normalize(input, axes, eps, out)
        if weight is not None:
            np.multiply(out, _chan(weight, nd), out=out)
        if bias is not None:
            np.add(out, _chan(bias, nd), out=out)
        return out
    scale, shift = _fold(weight, bias, running_mean, running_var, eps, input.dtype)
    np.copyto(out, input)
    return _affine(out, _chan(scale, nd), _chan(shift, nd))


def batch_norm_matcher(node: NodeInfo):
    """Eval mode with constant statistics: fold them into scale/shift once; else the generic kernel
    (never None: a declining matcher makes dispatch skip the kernel)."""
    names = ("weight", "bias", "running_mean", "running_var", "training", "eps")
    if not all(node.is_const(n) for n in names) or node.const("training") or node.const("running_mean") is None:
        return batch_norm
    w, b, m, v = (node.const(n) for n in names[:4])
    dtype = m.dtype
    scale, shift = _fold(w, b, m, v, node.const("eps"), dtype)
    shaped = {nd: (_chan(scale, nd), _chan(shift, nd)) for nd in range(1, 7)}

    def batch_norm_eval(input, out=None):
        s, t = shaped[input.ndim]
        out = np.multiply(input, s, out=out)
        np.add(out, t, out=out)
        return out
    return Specialized(batch_norm_eval, args=(0,))


def _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps,
                                         out=None):
    """``aten::_native_batch_norm_legit_no_training``: (output, empty, empty) like torch."""
    if out is None:
        out = (np.empty_like(input), np.empty((0,), input.dtype), np.empty((0,), input.dtype))
    batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps, out=out[0])
    return out


def _native_batch_norm_legit(input, weight, bias, running_mean=None, running_var=None, training=False,
                             momentum=0.1, eps=1e-5, out=None):
    """``aten::_native_batch_norm_legit`` (and ``.no_stats``: no running statistics), what torch.export's
    core decomposition makes of instance_norm and of batch norm with batch statistics: (output,
    save_mean, save_invstd); with ``training`` the running statistics are updated in place, as
    torch does (unbiased variance)."""
    if not training:
        if running_mean is None or running_var is None:
            raise KernelError("_native_batch_norm_legit: running_mean and running_var must be defined "
                              "in evaluation mode")
        if out is None:
            out = (np.empty_like(input), np.empty((0,), input.dtype), np.empty((0,), input.dtype))
        batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps, out=out[0])
        return out
    out = native_batch_norm(input, weight, bias, None, None, True, momentum, eps, out=out)
    if running_mean is not None:
        n = input.size // input.shape[1]
        axes = (0,) + tuple(range(2, input.ndim))
        var = np.var(input, axis=axes, ddof=1 if n > 1 else 0)
        running_mean *= 1 - momentum
        running_mean += momentum * np.mean(input, axis=axes).astype(running_mean.dtype)
        running_var *= 1 - momentum
        running_var += momentum * var.astype(running_var.dtype)
    return out


def _native_batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps, out=None):
    return _native_batch_norm_legit(input, weight, bias, None, None, training, momentum, eps, out=out)


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, out=None):
    """``aten::native_batch_norm``: eval only returns empty save_mean/save_invstd, like torch."""
    if training:
        C = input.shape[1]
        if out is None:
            out = (np.empty_like(input), np.empty((C,), input.dtype), np.empty((C,), input.dtype))
        axes = (0,) + tuple(range(2, input.ndim))
        _, mean, rstd = _normalize(input, axes, eps, out[0])
        if weight is not None:
            np.multiply(out[0], _chan(weight, input.ndim), out=out[0])
        if bias is not None:
            np.add(out[0], _chan(bias, input.ndim), out=out[0])
        out[1][...] = mean.reshape(-1)
        out[2][...] = rstd.reshape(-1)
        return out
    return _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps,
                                                out=out)


def _ln_axes(input, normalized_shape):
    k = len(normalized_shape)
    return tuple(range(input.ndim - k, input.ndim))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True, out=None):
    """``aten::layer_norm`` over the trailing ``normalized_shape`` dims."""
    if out is None:
        out = np.empty_like(input)
    _normalize(input, _ln_axes(input, normalized_shape), eps, out)
    if weight is not None:
        np.multiply(out, weight, out=out)
    if bias is not None:
        np.add(out, bias, out=out)
    return out


def native_layer_norm(input, normalized_shape, weight, bias, eps, out=None):
    """``aten::native_layer_norm``: (output, mean, rstd); mean/rstd keep the normalized dims as 1."""
    axes = _ln_axes(input, normalized_shape)
    if out is None:
        stat = input.shape[:input.ndim - len(axes)] + (1,) * len(axes)
        out = (np.empty_like(input), np.empty(stat, input.dtype), np.empty(stat, input.dtype))
    _, mean, rstd = _normalize(input, axes, eps, out[0])
    if weight is not None:
        np.multiply(out[0], weight, out=out[0])
    if bias is not None:
        np.add(out[0], bias, out=out[0])
    np.copyto(out[1], mean)
    np.copyto(out[2], rstd)
    return out


def rms_norm(input, normalized_shape, weight=None, eps=None, out=None):
    """``aten::rms_norm`` (nn.RMSNorm, Llama-style): ``x * rsqrt(mean(x**2) + eps) * weight`` over
    the trailing ``normalized_shape`` dims; ``eps=None`` is the dtype's machine epsilon, as torch."""
    if eps is None:
        eps = float(np.finfo(input.dtype).eps)
    if out is None:
        out = np.empty_like(input)
    ms = np.mean(np.square(input), axis=_ln_axes(input, normalized_shape), keepdims=True)
    np.multiply(input, 1.0 / np.sqrt(ms + eps), out=out)
    if weight is not None:
        np.multiply(out, weight, out=out)
    return out


def _group_norm(input, groups, weight, bias, eps, y):
    """Group norm of ``input`` (N, C, *) into ``y``; returns the (N, groups) mean and rstd."""
    N, C = input.shape[:2]
    if C % groups:
        raise KernelError(f"group_norm: {C} channels do not split into {groups} groups")
    # not empty_like: a non-contiguous input's layout would make the reshapes below copies
    target = y if y.flags.c_contiguous else np.empty(input.shape, input.dtype)
    per_group = (C // groups) * math.prod(input.shape[2:])   # not -1: an empty batch has no size to infer
    _, mean, rstd = _normalize(input.reshape(N, groups, per_group), (2,), eps,
                               target.reshape(N, groups, per_group))
    if weight is not None:
        np.multiply(target, _chan(weight, input.ndim), out=target)
    if bias is not None:
        np.add(target, _chan(bias, input.ndim), out=target)
    if target is not y:
        np.copyto(y, target)
    return mean.reshape(N, groups), rstd.reshape(N, groups)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True, out=None):
    """``aten::group_norm``: statistics over (C/G, *spatial) per sample and group."""
    if out is None:
        out = np.empty_like(input)
    _group_norm(input, num_groups, weight, bias, eps, out)
    return out


def native_group_norm(input, weight, bias, N, C, HxW, group, eps, out=None):
    """``aten::native_group_norm`` (torch.export's core decomposition of group_norm): (output,
    mean, rstd), the statistics of shape (N, group)."""
    if out is None:
        out = (np.empty(input.shape, input.dtype), np.empty((N, group), input.dtype),
               np.empty((N, group), input.dtype))
    mean, rstd = _group_norm(input, group, weight, bias, eps, out[0])
    np.copyto(out[1], mean)
    np.copyto(out[2], rstd)
    return out


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled=True, out=None):
    """``aten::instance_norm``: per-sample, per-channel statistics (or running ones)."""
    if not use_input_stats:
        return batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps, out=out)
    if out is None:
        out = np.empty_like(input)
    _normalize(input, tuple(range(2, input.ndim)), eps, out)
    if weight is not None:
        np.multiply(out, _chan(weight, input.ndim), out=out)
    if bias is not None:
        np.add(out, _chan(bias, input.ndim), out=out)
    return out


# --- the compiled group norm (``jit_norm.py``, numba) for large float32 nodes ----------------------

#: the compiled layer norm from this many elements: numpy's takes ~6 passes and ~10 µs of Python
#: (12.8 against 3.9 µs on 4x64 rows, 33.6 against 13.8 on audio_conv1d's transposed 99x128, thread
#: CPU time, Sapphire Rapids, 2026-11-27), so it loses far below the one-pass ops' ``MIN_ELEMENTS``
MIN_ELEMENTS_LAYER_NORM = 1024


def _f32_node(node: NodeInfo, least: int | None = None) -> bool:
    """float32 in and out, and (when known) at least ``least`` elements (``MIN_ELEMENTS`` by
    default): smaller nodes keep the numpy kernel (a model of small nodes never imports numba)."""
    from .pointwise_match import MIN_ELEMENTS, _size

    src = node.args[0].type if node.args else None
    dst = node.output_types[0] if node.output_types else None
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)):
        return False
    size = _size(dst)
    least = MIN_ELEMENTS if least is None else least
    return src.dtype == "float32" and dst.dtype == "float32" and (size is None or size >= least)


def _jit_ready(x, groups, weight, bias, outs):
    """Whether the compiled kernel takes these arrays (else the numpy kernel does)."""
    if x.dtype != np.float32 or x.ndim < 2 or not x.flags.c_contiguous or x.size == 0 or groups <= 0:
        return False
    C = x.shape[1]
    if C % groups:
        return False
    for v in (weight, bias):
        if v is not None and (v.dtype != np.float32 or v.shape != (C,) or not v.flags.c_contiguous):
            return False
    return all(o.dtype == np.float32 and o.flags.c_contiguous for o in outs)


def _group_norm_kernel(node: NodeInfo, groups: int, eps: float):
    """The compiled group norm (:class:`.jit_norm.GroupNorm`), compiled now; at more than one
    intra-op thread, for a large node of static shape, split over them by blocks of samples or
    groups where that times faster now (``row_split.py``; the same bits)."""
    from . import row_split as RS
    from .jit_norm import GroupNorm

    kernel = GroupNorm()
    t = node.output_types[0]
    threads = RS.split_threads_for(t)
    shape = RS.static_shape(t)
    if threads <= 1 or len(shape) < 2 or groups <= 0 or shape[1] % groups:
        return kernel
    split = RS.split_group_norm(kernel, threads)
    N, C = shape[:2]
    x, y = RS.sample(shape), np.empty(shape, np.float32)
    w, b = np.ones(C, np.float32), np.zeros(C, np.float32)
    mean, rstd = np.empty(N * groups, np.float32), np.empty(N * groups, np.float32)
    return split if RS.split_pays(kernel, split, (x, groups, w, b, eps, y, mean, rstd)) else kernel


def layer_norm_matcher(node: NodeInfo):
    """``aten::layer_norm``: at more than one intra-op thread, a large float32 node of static shape
    with constant ``normalized_shape`` and ``eps`` gets the kernel split over the rows before the
    normalized dims where that times faster now (``row_split.py``; the same bits); else the
    kernel itself (never None: a declining matcher makes dispatch skip the kernel)."""
    from . import row_split as RS

    if not (node.is_const("normalized_shape") and node.is_const("eps")):
        return layer_norm
    t = node.output_types[0] if node.output_types else None
    threads = RS.split_threads_for(t)
    ns, eps = tuple(int(d) for d in node.const("normalized_shape")), float(node.const("eps"))
    # the compiled kernel for large float32 nodes, at any thread count (a split runs the same
    # kernel on blocks of rows: the bits of one thread)
    kernel = _compiled_layer_norm(ns) if _f32_node(node, MIN_ELEMENTS_LAYER_NORM) else layer_norm
    if threads <= 1:
        if kernel is layer_norm:
            return _late_layer_norm(node, ns, eps) or layer_norm
        return Specialized(lambda input, weight=None, bias=None, out=None: kernel(input, ns, weight, bias, eps,
                                                                                  out=out), args=(0, 2, 3))
    shape = RS.static_shape(t)
    split = RS.split_layer_norm(kernel, shape, ns, eps, threads)
    if split is None:
        return layer_norm if kernel is layer_norm else Specialized(
            lambda input, weight=None, bias=None, out=None: kernel(input, ns, weight, bias, eps, out=out),
            args=(0, 2, 3))

    def one(x, weight=None, bias=None, out=None):
        return kernel(x, ns, weight, bias, eps, out=out)
    x, y = RS.sample(shape), np.empty(shape, np.float32)
    w, b = np.ones(ns, np.float32), np.zeros(ns, np.float32)
    fn = split if RS.split_pays(one, split, (x, w, b, y)) else one
    return Specialized(fn, args=(0, 2, 3))


def _late_layer_norm(node: NodeInfo, ns, eps):
    """A small float32 layer norm of static shape: numpy's kernel or the compiled one, whichever is
    faster at the first call where numba is loaded anyway (``late_compiled.py``); else None."""
    shape = _small_f32_node(node, ())
    if not shape or not ns or tuple(shape[len(shape) - len(ns):]) != ns or not math.prod(shape):
        return None

    def layer_norm_np(input, weight=None, bias=None, out=None):
        return layer_norm(input, ns, weight, bias, eps, out=out)

    def build():
        jit = _compiled_layer_norm(ns)
        return lambda input, weight=None, bias=None, out=None: jit(input, ns, weight, bias, eps, out=out)
    return Specialized(_late_norm(node, shape, layer_norm_np, build, ns), args=(0, 2, 3))


def _compiled_layer_norm(ns):
    """``layer_norm_jit(input, normalized_shape, weight, bias, eps, out=None)`` (``layer_norm``'s
    signature) for ``normalized_shape == ns``: the compiled layer norm (:class:`.jit_norm.LayerNorm`,
    compiled now); a non-contiguous float32 input (a transposed view) is copied into ``out`` and
    normalized there in place; arrays it does not take (other dtypes, a weight or bias of another
    shape, an ``out`` overlapping the input) go to :func:`layer_norm`."""
    from .jit_norm import LayerNorm

    E = math.prod(ns)
    run = LayerNorm()
    ones, zeros = np.ones(E, np.float32), np.zeros(E, np.float32)

    def layer_norm_jit(input, normalized_shape, weight=None, bias=None, eps=1e-5, out=None):
        if out is None:
            out = np.empty(input.shape, input.dtype)
        if (E == 0 or tuple(normalized_shape) != ns or input.shape[input.ndim - len(ns):] != ns
                or out.shape != input.shape):
            return layer_norm(input, normalized_shape, weight, bias, eps, out=out)
        if (not input.flags.c_contiguous and input.dtype == np.float32 and out.dtype == np.float32
                and out.flags.c_contiguous and not np.may_share_memory(input, out)):
            # numpy's passes over a strided view cost 2.5x the copy and the compiled kernel in place
            np.copyto(out, input)
            input = out
        if not _ln_ready(input, E, weight, bias, out):
            return layer_norm(input, normalized_shape, weight, bias, eps, out=out)
        run(input.reshape(-1, E), ones if weight is None else weight.reshape(E),
            zeros if bias is None else bias.reshape(E), out.reshape(-1, E), eps)
        return out
    return layer_norm_jit


def _ln_ready(x, E, weight, bias, out) -> bool:
    """Whether the compiled layer norm takes these arrays (else the numpy kernel does)."""
    if x.dtype != np.float32 or not x.flags.c_contiguous or out.dtype != np.float32 or not out.flags.c_contiguous:
        return False
    if not disjoint_or_same(x, out):
        return False
    return all(v is None or (v.dtype == np.float32 and v.size == E and v.flags.c_contiguous) for v in (weight, bias))


def _small_f32_node(node: NodeInfo, consts) -> tuple[int, ...] | None:
    """The static shape of a float32 node the compiled kernels' size floor declines (``_f32_node``
    false only for its size) with constant ``consts`` arguments: a candidate for the compiled kernel
    chosen at the first call (``late_compiled.py``); else None."""
    from . import row_split as RS

    if not (_f32_node(node, least=0) and all(node.is_const(n) for n in consts)):
        return None
    return RS.static_shape(node.output_types[0])


def _norm_sample(shape, C):
    """Arguments (x, weight, bias, out) of the node's static shape for the first-call timing; ``C`` the
    affine parameters' shape (a channel count, or a layer norm's normalized shape)."""
    from . import row_split as RS

    return RS.sample(shape), np.ones(C, np.float32), np.zeros(C, np.float32), np.empty(shape, np.float32)


def _late_norm(node, shape, numpy_fn, build, C):
    """``numpy_fn`` or the compiled kernel ``build()``, chosen at the first call (``late_compiled``)."""
    from .late_compiled import late

    return late(numpy_fn, build, lambda: _norm_sample(shape, C), what=node.op)


def _group_norm_jit(node: NodeInfo, groups: int, eps: float):
    kernel = _group_norm_kernel(node, groups, eps)

    def group_norm_jit(input, weight=None, bias=None, out=None):
        if out is None:
            out = np.empty(input.shape, input.dtype)
        if out.shape != input.shape or not _jit_ready(input, groups, weight, bias, (out,)):
            return group_norm(input, groups, weight, bias, eps, out=out)
        C = input.shape[1]
        stats = np.empty((2, input.shape[0] * groups), np.float32)
        kernel(input, groups, np.ones(C, np.float32) if weight is None else weight,
               np.zeros(C, np.float32) if bias is None else bias, eps, out, stats[0], stats[1])
        return out
    return group_norm_jit


def group_norm_matcher(node: NodeInfo):
    """``aten::group_norm`` on large float32 tensors: the compiled kernel (compiled now); on small
    ones of static shape, it or numpy's, whichever is faster at the first call (``late_compiled``);
    else None."""
    if not (_f32_node(node) and node.is_const("num_groups") and node.is_const("eps")):
        shape = _small_f32_node(node, ("num_groups", "eps"))
        if shape is None or len(shape) < 2:
            return None
        groups, eps = int(node.const("num_groups")), float(node.const("eps"))

        def group_norm_np(input, weight=None, bias=None, out=None):
            return group_norm(input, groups, weight, bias, eps, out=out)
        return Specialized(_late_norm(node, shape, group_norm_np, lambda: _group_norm_jit(node, groups, eps),
                                      shape[1]), args=(0, 2, 3))
    groups, eps = int(node.const("num_groups")), float(node.const("eps"))
    return Specialized(_group_norm_jit(node, groups, eps), args=(0, 2, 3))


def _instance_norm_jit(node: NodeInfo, groups: int, eps: float):
    kernel = _group_norm_kernel(node, groups, eps)

    def instance_norm_jit(input, weight=None, bias=None, out=None):
        if out is None:
            out = np.empty(input.shape, input.dtype)
        if out.shape != input.shape or not _jit_ready(input, groups, weight, bias, (out,)):
            return instance_norm(input, weight, bias, None, None, True, 0.0, eps, out=out)
        stats = np.empty((2, input.shape[0] * groups), np.float32)
        kernel(input, groups, np.ones(groups, np.float32) if weight is None else weight,
               np.zeros(groups, np.float32) if bias is None else bias, eps, out, stats[0], stats[1])
        return out
    return instance_norm_jit


def instance_norm_matcher(node: NodeInfo):
    """``aten::instance_norm`` with input statistics on float32 tensors of known channel count: the
    compiled group norm with one group per channel (the same statistics), compiled now for large
    ones, chosen against numpy's at the first call for small ones of static shape
    (``late_compiled``); or None."""
    t = node.output_types[0] if node.output_types else None
    shape = getattr(t, "shape", None)
    if not (_f32_node(node, least=0) and node.is_const("use_input_stats") and node.const("use_input_stats") is True
            and node.is_const("eps") and shape is not None and len(shape) >= 3 and isinstance(shape[1], int)):
        return None
    groups, eps = shape[1], float(node.const("eps"))
    if _f32_node(node):
        return Specialized(_instance_norm_jit(node, groups, eps), args=(0, 1, 2))
    static = _small_f32_node(node, ())
    if static is None:
        return None

    def instance_norm_np(input, weight=None, bias=None, out=None):
        return instance_norm(input, weight, bias, None, None, True, 0.0, eps, out=out)
    return Specialized(_late_norm(node, static, instance_norm_np, lambda: _instance_norm_jit(node, groups, eps),
                                  groups), args=(0, 1, 2))


def _native_group_norm_jit(node: NodeInfo, groups: int, eps: float):
    kernel = _group_norm_kernel(node, groups, eps)

    def native_group_norm_jit(input, weight, bias, N, C, HxW, out=None):
        if out is None:
            out = (np.empty(input.shape, input.dtype), np.empty((N, groups), input.dtype),
                   np.empty((N, groups), input.dtype))
        y, mean, rstd = out
        if (y.shape != input.shape or mean.size != input.shape[0] * groups or rstd.size != mean.size
                or not _jit_ready(input, groups, weight, bias, out)):
            return native_group_norm(input, weight, bias, N, C, HxW, groups, eps, out=out)
        Cn = input.shape[1]
        kernel(input, groups, np.ones(Cn, np.float32) if weight is None else weight,
               np.zeros(Cn, np.float32) if bias is None else bias, eps, y, mean, rstd)
        return out
    return native_group_norm_jit


def native_group_norm_matcher(node: NodeInfo):
    """``aten::native_group_norm`` on large float32 tensors: the compiled kernel; on small ones of
    static shape, it or numpy's, whichever is faster at the first call (``late_compiled``); or None."""
    if _f32_node(node) and node.is_const("group") and node.is_const("eps"):
        groups, eps = int(node.const("group")), float(node.const("eps"))
        return Specialized(_native_group_norm_jit(node, groups, eps), args=(0, 1, 2, 3, 4, 5))
    shape = _small_f32_node(node, ("group", "eps"))
    if shape is None or len(shape) < 2:
        return None
    groups, eps = int(node.const("group")), float(node.const("eps"))
    if groups <= 0 or shape[1] % groups:
        return None   # (the numpy kernel raises the error)
    N, C = shape[:2]

    def native_group_norm_np(input, weight, bias, N, C, HxW, out=None):
        return native_group_norm(input, weight, bias, N, C, HxW, groups, eps, out=out)

    def sample():
        x, w, b, y = _norm_sample(shape, C)
        return x, w, b, N, C, math.prod(shape[2:]), (y, np.empty((N, groups), np.float32),
                                                    np.empty((N, groups), np.float32))
    from .late_compiled import late

    return Specialized(late(native_group_norm_np, lambda: _native_group_norm_jit(node, groups, eps), sample,
                            what=node.op), args=(0, 1, 2, 3, 4, 5))

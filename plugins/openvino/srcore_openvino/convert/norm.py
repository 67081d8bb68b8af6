"""Normalisations: layer, group, instance (with input statistics), batch (eval) and RMS norm."""
from __future__ import annotations

import numpy as np

from .table import arg_shape, divide, f32, i64, out, rank, rank_of, register


def _affine(c, y, axis_from: int, name_w: str = "weight", name_b: str = "bias", per_channel: bool = False):
    """``y * weight + bias`` (either may be None); ``per_channel``: weight and bias are (C,) and
    apply along dim 1 of ``y``."""
    o = c.o
    for name, fn in ((name_w, o.multiply), (name_b, o.add)):
        if name in c.names and not c.is_none(name):
            v = c.x(name)
            if per_channel:
                r = rank(y)
                v = out(o.reshape(v, i64(o, [-1] + [1] * (r - 2)), False))
            y = out(fn(y, v))
    return y


def _layer_norm_ok(n) -> bool:
    ns = n.const("normalized_shape", None)
    shape = arg_shape(n, 0)
    if shape is None or not isinstance(ns, (list, tuple)) or not 0 < len(ns) <= len(shape):
        return False
    # the normalized dims must match the input's (torch raises otherwise)
    tail = shape[len(shape) - len(ns):]
    return all(not isinstance(t, int) or t == s for t, s in zip(tail, ns))


@register("aten::layer_norm", consts=("normalized_shape", "eps", "cudnn_enable"), check=_layer_norm_ok)
def _layer_norm(c):
    o, x = c.o, c.x("input")
    r, k = rank(x), len(c.const("normalized_shape"))
    y = out(o.mvn(x, i64(o, list(range(r - k, r))), True, float(c.const("eps", 1e-5)), "inside_sqrt"))
    return _affine(c, y, r - k)


@register("aten::group_norm", consts=("num_groups", "eps", "cudnn_enabled"),
          check=lambda n: (rank_of(n, 0) or 0) >= 2 and isinstance(arg_shape(n, 0)[1], int)
          and isinstance(n.const("num_groups", None), int) and n.const("num_groups") > 0
          and arg_shape(n, 0)[1] % n.const("num_groups") == 0)
def _group_norm(c):
    o, x = c.o, c.x("input")
    ch = x.get_partial_shape()[1].get_length()
    w = c.x("weight") if not c.is_none("weight") else o.constant(np.ones(ch, np.float32)).output(0)
    b = c.x("bias") if not c.is_none("bias") else o.constant(np.zeros(ch, np.float32)).output(0)
    return out(o.group_normalization(x, w, b, int(c.const("num_groups")), float(c.const("eps", 1e-5))))


@register("aten::instance_norm", consts=("running_mean", "running_var", "use_input_stats", "momentum", "eps",
                                         "cudnn_enabled"),
          check=lambda n: (rank_of(n, 0) or 0) >= 3 and n.const("use_input_stats", False) is True)
def _instance_norm(c):
    o, x = c.o, c.x("input")
    r = rank(x)
    y = out(o.mvn(x, i64(o, list(range(2, r))), True, float(c.const("eps", 1e-5)), "inside_sqrt"))
    return _affine(c, y, 1, per_channel=True)


@register("aten::batch_norm", consts=("weight", "bias", "running_mean", "running_var", "training", "momentum",
                                      "eps", "cudnn_enabled"),
          check=lambda n: n.const("training", True) is False and (rank_of(n, 0) or 0) >= 2
          and n.const("running_mean", None) is not None and n.const("running_var", None) is not None)
def _batch_norm(c):
    """As torch's eval kernel: x * (w / sqrt(var + eps)) + (b - mean * w / sqrt(var + eps))."""
    o, x = c.o, c.x("input")
    mean = np.asarray(c.const("running_mean"), np.float32)
    var = np.asarray(c.const("running_var"), np.float32)
    w = c.const("weight", None)
    b = c.const("bias", None)
    invstd = np.float32(1.0) / np.sqrt(var + np.float32(c.const("eps", 1e-5)))
    alpha = invstd * (np.asarray(w, np.float32) if w is not None else np.float32(1.0))
    beta = (np.asarray(b, np.float32) if b is not None else np.float32(0.0)) - mean * alpha
    shape = [-1] + [1] * (rank(x) - 2)
    return out(o.add(out(o.multiply(x, o.constant(alpha.astype(np.float32).reshape(shape)))),
                     o.constant(beta.astype(np.float32).reshape(shape))))


@register("aten::rms_norm", consts=("normalized_shape", "eps"), check=_layer_norm_ok)
def _rms_norm(c):
    o, x = c.o, c.x("input")
    r, k = rank(x), len(c.const("normalized_shape"))
    eps = c.const("eps", None)
    eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
    ms = out(o.reduce_mean(out(o.multiply(x, x)), i64(o, list(range(r - k, r))), True))
    y = out(o.multiply(x, divide(o, f32(o, 1.0), out(o.sqrt(out(o.add(ms, f32(o, eps))))))))
    return _affine(c, y, r - k, name_b="__none__")

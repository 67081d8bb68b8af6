"""Neural-network ops: norms, softmax, attention, padding, glu, and the transformer fast paths."""
from __future__ import annotations

from . import symbolic as sym
from .base import A, Ctx, UNKNOWN, dtype_code, rule, tt
from .elementwise import broadcast_shapes


def _check_channels(ctx: Ctx, x, param_pos, name):
    p = ctx.arg(param_pos, name)
    if p is None or x.shape is None or len(x.shape) < 2 or p.known is None:
        return
    ps = getattr(p.type, "shape", None)
    if ps is not None and len(ps) == 1 and sym.equal(ps[0], x.shape[1]) is False:
        raise ctx.fail(f"{name} of shape {ps} does not match {x.shape[1]} channels of input {x.shape}")


@rule("aten::batch_norm", "aten::instance_norm")
def batch_norm(ctx: Ctx):
    x = ctx.tensor(0)
    for pos, name in ((1, "weight"), (2, "bias"), (3, "running_mean"), (4, "running_var")):
        if ctx.op.startswith("aten::batch_norm"):
            _check_channels(ctx, x, pos, name)
    return [x]


@rule("aten::native_batch_norm", "aten::_native_batch_norm_legit", "aten::_native_batch_norm_legit_no_training",
      "aten::_native_batch_norm_legit_functional")
def native_batch_norm(ctx: Ctx):
    x = ctx.tensor(0)
    training = ctx.known(5, "training", False) if "no_training" not in ctx.op else False
    c = x.shape[1] if x.shape is not None and len(x.shape) > 1 else None
    stat = (c,) if training else (0,)
    if training is UNKNOWN:
        stat = (None,)
    outs = [x, tt(x.dtype, stat), tt(x.dtype, stat)]
    return (outs + [tt(x.dtype, (c,))] * 2)[:len(ctx.node.outputs)]


@rule("aten::layer_norm", "aten::group_norm", "aten::rms_norm")
def layer_norm(ctx: Ctx):
    x = ctx.tensor(0)
    if ctx.op.startswith(("aten::layer_norm", "aten::rms_norm")):
        ns = ctx.int_list(1, "normalized_shape")
        if ns is not None and x.shape is not None:
            tail = x.shape[len(x.shape) - len(ns):] if len(ns) <= len(x.shape) else None
            if tail is None or any(sym.equal(a, b) is False for a, b in zip(tail, ns)):
                raise ctx.fail(f"normalized_shape {ns} does not match the trailing dims of input {x.shape}")
    else:
        g = ctx.known(1, "num_groups")
        if x.shape is not None and len(x.shape) > 1 and isinstance(g, int) and isinstance(x.shape[1], int) \
                and x.shape[1] % g:
            raise ctx.fail(f"expected {x.shape[1]} channels to be divisible by num_groups={g}")
    return [x]


@rule("aten::native_layer_norm")
def native_layer_norm(ctx: Ctx):
    x = ctx.tensor(0)
    ns = ctx.int_list(1, "normalized_shape")
    layer_norm(ctx)
    if x.shape is None or ns is None:
        stat = tt(x.dtype, None)
    else:
        axis = len(x.shape) - len(ns)
        stat = tt(x.dtype, x.shape[:axis] + (1,) * len(ns))
    return [x, stat, stat]


@rule("aten::native_group_norm")
def native_group_norm(ctx: Ctx):
    x = ctx.tensor(0)
    n, g = ctx.known(3, "N"), ctx.known(6, "group")
    d = lambda v: v if isinstance(v, (int, str)) and not isinstance(v, bool) else None  # noqa: E731
    return [x, tt(x.dtype, (d(n), d(g))), tt(x.dtype, (d(n), d(g)))]


@rule("aten::softmax", "aten::log_softmax", "aten::_softmax", "aten::_log_softmax", "aten::special_softmax")
def softmax(ctx: Ctx):
    x = ctx.tensor(0)
    ctx.norm_dim(ctx.known(1, "dim"), x.rank)
    dtype = x.dtype
    if ctx.op.startswith(("aten::_softmax", "aten::_log_softmax")):
        if ctx.known(2, "half_to_float", False) is True and dtype == "float16":
            dtype = "float32"
    else:
        code = ctx.known(2, "dtype", None)
        if code is UNKNOWN:
            dtype = None
        elif code is not None:
            dtype = dtype_code(code)
    return [tt(dtype, x.shape)]


@rule("aten::scaled_dot_product_attention")
def sdpa(ctx: Ctx):
    """(..., L, E) x (..., S, E) x (..., S, Ev) -> (..., L, Ev)."""
    q, k, v = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    if q.shape is None or v.shape is None:
        return [tt(q.dtype, None)]
    if k.shape is not None:
        if sym.equal(q.shape[-1], k.shape[-1]) is False:
            raise ctx.fail(f"query and key embedding dims differ: {q.shape} vs {k.shape}")
        if sym.equal(k.shape[-2], v.shape[-2]) is False:
            raise ctx.fail(f"key and value sequence lengths differ: {k.shape} vs {v.shape}")
    kv_batch = v.shape[:-2]
    gqa = ctx.known(6, "enable_gqa", False)
    if gqa is not False and len(q.shape) >= 3 and len(v.shape) >= 3:
        # grouped-query attention: each key/value head serves q_heads / kv_heads query heads
        hq, hkv = q.shape[-3], v.shape[-3]
        if isinstance(hq, int) and isinstance(hkv, int) and hq % hkv:
            raise ctx.fail(f"enable_gqa: {hq} query heads are not a multiple of {hkv} key/value heads")
        kv_batch = v.shape[:-3] + (hq,)
    batch = broadcast_shapes([q.shape[:-2], kv_batch], ctx.fail)
    return [tt(q.dtype, batch + (q.shape[-2], v.shape[-1]))]


@rule("aten::_transformer_encoder_layer_fwd")
def encoder_layer(ctx: Ctx):
    return [ctx.tensor(0)]


@rule("aten::_native_multi_head_attention")
def native_mha(ctx: Ctx):
    """(query (B, L, E), ...) -> (out (B, L, E), attention weights (B, [H,] L, S) or empty)."""
    q, k = ctx.tensor(0), ctx.tensor(1)
    need = ctx.known(10, "need_weights", True)
    avg = ctx.known(11, "average_attn_weights", True)
    heads = ctx.known(4, "num_head")
    if q.shape is None or k.shape is None or need is UNKNOWN or avg is UNKNOWN:
        w = tt(q.dtype, None)
    elif not need:
        w = tt(q.dtype, (0,))
    else:
        b, lq, s = q.shape[:-2], q.shape[-2], k.shape[-2]
        h = () if avg else ((heads if isinstance(heads, int) else None),)
        w = tt(q.dtype, b + h + (lq, s))
    return [q, w][:len(ctx.node.outputs)]


@rule("aten::glu")
def glu(ctx: Ctx):
    x = ctx.tensor(0)
    d = ctx.known(1, "dim", -1)
    if x.shape is None or d is UNKNOWN:
        return [tt(x.dtype, None if x.shape is None else (None,) * len(x.shape))]
    d = ctx.norm_dim(d, len(x.shape))
    n = x.shape[d]
    if isinstance(n, int) and n % 2:
        raise ctx.fail(f"glu halves dimension {d}, but its size {n} is odd")
    return [tt(x.dtype, x.shape[:d] + (sym.exact_div(n, 2),) + x.shape[d + 1:])]


@rule("aten::constant_pad_nd", "aten::pad", "aten::reflection_pad1d", "aten::reflection_pad2d",
      "aten::reflection_pad3d", "aten::replication_pad1d", "aten::replication_pad2d",
      "aten::replication_pad3d", "aten::zero_pad2d")
def pad(ctx: Ctx):
    """``pad`` lists (left, right) pairs from the last dim backwards."""
    x = ctx.tensor(0)
    p = ctx.int_list(1, "pad") or ctx.int_list(1, "padding")
    if x.shape is None or p is None:
        return [tt(x.dtype, None if x.shape is None else (None,) * len(x.shape))]
    if len(p) % 2 or len(p) // 2 > len(x.shape):
        raise ctx.fail(f"padding {p} must be pairs for at most {len(x.shape)} dims")
    s = list(x.shape)
    for i in range(len(p) // 2):
        d = len(s) - 1 - i
        s[d] = sym.add(sym.add(s[d], p[2 * i]), p[2 * i + 1]) if None not in (p[2 * i], p[2 * i + 1]) else None
        if isinstance(s[d], int) and s[d] < 0:
            raise ctx.fail(f"padding {p} makes dimension {d} negative")
    return [tt(x.dtype, s)]


@rule("aten::channel_shuffle", "aten::native_channel_shuffle", "aten::local_response_norm",
      "aten::_weight_norm_same")
def same_as_input(ctx: Ctx):
    return [ctx.tensor(0)]


@rule("aten::cosine_similarity")
def cosine_similarity(ctx: Ctx):
    """The inputs broadcast; ``dim`` of the broadcast shape is reduced away."""
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = a.dtype or b.dtype
    if a.shape is None or b.shape is None:
        return [tt(dtype, None)]
    shape = broadcast_shapes([a.shape, b.shape], ctx.fail)
    d = ctx.known(2, "dim", 1)
    if d is UNKNOWN:
        return [tt(dtype, (None,) * max(len(shape) - 1, 0))]
    d = ctx.norm_dim(d, len(shape))
    return [tt(dtype, shape[:d] + shape[d + 1:])]

"""Written-out multi-head attention (BERT's, ``transformer_block_explicit``'s) as one
``attention_heads`` layer.

After pointwise fusion such an attention is twelve layers: per query, key and value a ``reshape``
to (B, L, H, D) and a ``permute`` to heads, the key's second ``permute`` to (B, H, D, L), the
``matmul`` of scores, a ``fused_pointwise`` dividing (or multiplying) them by a constant and adding
a mask, the ``softmax`` over keys, the ``matmul`` with the values, the ``permute`` back and the
``reshape`` to (B, L, E). Five of those are copies (20 us each on bert_encoder's 128 x 256), and
the scale and mask are one more pass over the scores. The fused layer reads the three (B, L, E)
projections and the mask as they are: per batch and head a product on strided column blocks,
the scale, mask and softmax in one compiled pass per row, and the head's output written straight
into its columns (``tactics/attention.py``).

torch's ``nn.MultiheadAttention`` written out (one packed (B, L, 3E) projection reshaped to
(B, L, 3, H, D), permuted (2, 0, 3, 1, 4) and indexed) becomes the packed ``attention`` layer the
fused encoder layer's converter makes, when it has no mask and multiplies by its scale.

Only an exact match is fused: every intermediate read by the next layer alone and not an engine
output, the permutes and reshapes exactly those above, a mask broadcastable to (B, H, L, S) per
dim; anything else stays as it was.
"""
from __future__ import annotations

from .network import Layer, Network

_HEADS = (0, 2, 1, 3)
_KEYS_T = (0, 1, 3, 2)


def fuse_attention(net: Network) -> Network:
    """Replace every written-out attention of ``net`` by an ``attention_heads`` layer (in place)."""
    while True:
        match = _find(net)
        if match is None:
            return net
        remove, layer, at = match   # the fused layer takes the place of the last one it replaces
        net.layers[:] = [layer if x is at else x for x in net.layers if x is at or not any(x is r for r in remove)]


def _find(net: Network):
    users = net.users()
    producer = {t: x for x in net.layers for t in x.outputs}
    outputs = set(net.outputs)

    def only(t):
        """The one layer reading ``t`` (None: several, none, or an engine output)."""
        u = users.get(t, [])
        return u[0] if len(u) == 1 and t not in outputs else None

    def made_by(t, kind):
        x = producer.get(t)
        return x if x is not None and x.kind == kind and only(t) is not None else None

    def heads(t, B, H, L, D):
        """The (B, L, H * D) tensor whose reshape and (0, 2, 1, 3) permute give ``t``, and those two."""
        p = made_by(t, "permute")
        if p is None or tuple(p.attrs["perm"]) != _HEADS:
            return None
        r = made_by(p.inputs[0], "reshape")
        if r is None or net.shape(r.outputs[0]) != (B, L, H, D) or net.shape(r.inputs[0]) != (B, L, H * D):
            return None
        return r.inputs[0], [r, p]

    for sm in net.layers:
        if sm.kind != "softmax" or len(net.shape(sm.outputs[0])) != 4 or sm.attrs["dim"] != 3:
            continue
        B, H, L, S = net.shape(sm.outputs[0])
        pw = made_by(sm.inputs[0], "fused_pointwise")
        if pw is not None:
            scale = _scale_and_mask(pw, net, (B, H, L, S))
            if scale is None:
                continue
            c, divide, mask, at = scale
            qk = made_by(pw.inputs[at], "matmul")
        else:   # softmax of the bare scores (T5: no scaling, no bias)
            c, divide, mask, qk = 1.0, False, None, made_by(sm.inputs[0], "matmul")
        if qk is None:
            continue
        kt = made_by(qk.inputs[1], "permute")
        if kt is None or tuple(kt.attrs["perm"]) != _KEYS_T:
            continue
        D = net.shape(qk.inputs[0])[3]
        pv = only(sm.outputs[0])
        if pv is None or pv.kind != "matmul" or pv.inputs[0] != sm.outputs[0]:
            continue
        back = only(pv.outputs[0])
        if back is None or back.kind != "permute" or tuple(back.attrs["perm"]) != _HEADS:
            continue
        merge = only(back.outputs[0])
        if merge is None or merge.kind != "reshape" or net.shape(merge.outputs[0]) != (B, L, H * D):
            continue
        tail = [kt, qk, *([pw] if pw is not None else []), sm, pv, back, merge]
        q, k, v = heads(qk.inputs[0], B, H, L, D), heads(kt.inputs[0], B, H, S, D), heads(pv.inputs[1], B, H, S, D)
        if q is not None and k is not None and v is not None:
            inputs = [q[0], k[0], v[0]] + ([mask] if mask is not None else [])
            layer = Layer("attention_heads", inputs, list(merge.outputs),
                          {"heads": H, "scale": c, "divide": divide, "safe": bool(sm.attrs.get("safe"))}, sm.source)
            return [*q[1], *k[1], *v[1], *tail], layer, pv
        packed = _packed(net, users, producer, outputs, (qk.inputs[0], kt.inputs[0], pv.inputs[1]), B, H, L, S, D)
        if packed is not None and mask is None and not divide:
            qkv, front = packed   # torch's nn.MultiheadAttention: the existing packed layer
            layer = Layer("attention", [qkv], list(merge.outputs), {"heads": H, "scale": c}, sm.source)
            return [*front, *tail], layer, pv
    return None


def _packed(net, users, producer, outputs, qkv_heads, B, H, L, S, D):
    """``(qkv, [its reshape, permute and three strided layers])`` when the query, key and value
    heads are ``qkv`` (B, L, 3 * H * D) reshaped to (B, L, 3, H, D), permuted (2, 0, 3, 1, 4) and
    taken apart by index (torch's packed in-projection), else None."""
    if L != S:
        return None
    picks = [producer.get(t) for t in qkv_heads]
    if any(p is None or p.kind != "strided" or len(users.get(t, [])) != 1 or t in outputs
           for p, t in zip(picks, qkv_heads)):
        return None
    if [tuple(p.attrs["key"]) for p in picks] != [(0,), (1,), (2,)] or len({p.inputs[0] for p in picks}) != 1:
        return None
    t = picks[0].inputs[0]
    perm = producer.get(t)
    if (perm is None or perm.kind != "permute" or tuple(perm.attrs["perm"]) != (2, 0, 3, 1, 4) or t in outputs
            or sorted(map(id, users.get(t, []))) != sorted(map(id, picks))):
        return None
    r = producer.get(perm.inputs[0])
    if (r is None or r.kind != "reshape" or len(users.get(perm.inputs[0], [])) != 1 or perm.inputs[0] in outputs
            or net.shape(r.outputs[0]) != (B, L, 3, H, D) or net.shape(r.inputs[0]) != (B, L, 3 * H * D)):
        return None
    return r.inputs[0], [r, perm, *picks]


def _scale_and_mask(pw: Layer, net: Network, shape):
    """``(c, divide, mask tensor or None, scores input)`` of a fused_pointwise computing
    ``x / c + mask`` (or ``x * c + mask``, or without the mask) of its first input, or ``x + bias``
    of either input (T5's relative position bias, ALiBi: ``c`` 1, which multiplies exactly), else
    None."""
    ops, results = pw.attrs["ops"], pw.attrs["results"]
    if not ops or tuple(results) != (len(ops) - 1,) or len(ops) > 2:
        return None
    first = ops[0]
    if len(ops) == 1 and first.op == "add" and not first.params and len(pw.inputs) == 2 \
            and sorted(first.args) == [("ext", 0), ("ext", 1)]:
        for at in (0, 1):   # the scores are the input a matmul makes (checked by the caller)
            mask = _mask(net, pw.inputs[1 - at], shape)
            if mask is not None and net.shape(pw.inputs[at]) == tuple(shape):
                return 1.0, False, mask, at
        return None
    if first.op not in ("div", "mul") or first.params or len(first.args) != 2:
        return None
    (k0, x0), (k1, c) = first.args
    if (k0, x0) != ("ext", 0) or k1 != "const" or not isinstance(c, (int, float)) or isinstance(c, bool):
        return None
    if float(c) == 0.0 or float(c) != float(c):
        return None
    if len(ops) == 1:
        return (float(c), first.op == "div", None, 0) if len(pw.inputs) == 1 else None
    add = ops[1]
    if add.op != "add" or add.params or sorted(add.args) != [("ext", 1), ("tmp", 0)] or len(pw.inputs) != 2:
        return None
    mask = _mask(net, pw.inputs[1], shape)
    return None if mask is None else (float(c), first.op == "div", mask, 0)


def _mask(net: Network, mask: int, shape):
    """``mask`` when it is a float32 tensor of rank 4 broadcastable to ``shape`` per dim, else None."""
    ms = net.shape(mask)
    if len(ms) != 4 or any(m not in (1, n) for m, n in zip(ms, shape)) or net.tensors[mask].dtype != "float32":
        return None
    return mask

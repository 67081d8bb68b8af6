"""Fusion, the network rewrites before tactics are chosen.

* :func:`fuse_pointwise`: runs of pointwise layers become one ``fused_pointwise`` layer (one
  compiled kernel);
* :func:`fuse_swish`: ``x * sigmoid(x)`` becomes one ``silu`` layer (before the conv fusions);
* :func:`fuse_conv_activation`: a float conv whose output only a relu, hardswish, hardsigmoid,
  SiLU, sigmoid, GELU, leaky relu or relu6 (a clamp to [0, 6]) reads carries that activation
  (``attrs["relu"]`` / ``attrs["activation"]``; the conv tactics apply it, after a residual);
* :func:`fuse_norm_activation`: the same for a group norm (instance norm) and those activations
  (its kernel applies it to each row it writes);
* :func:`fuse_conv_add`: a float conv without activation whose output only an ``add`` of a tensor
  of the same shape reads carries that tensor as its residual (MobileNetV2/V3's linear bottleneck,
  a TCN's residual 1-D conv; the conv tactics add it in their stores);
* :func:`fuse_squeeze_excite`: global average pool -> 1x1 conv (+ relu/SiLU/hardswish) -> 1x1 conv
  + hardsigmoid/sigmoid -> channel-wise scale of the pooled tensor becomes one ``squeeze_excite``
  layer (``tactics/squeeze_excite.py``);
* :func:`fuse_conv_avg_pool`: an ungrouped 1x1 conv whose output only an unpadded k x k / k average
  pool with whole windows reads is one k x k / k conv of the weight / k^2 (DenseNet's transition:
  the same multiply-adds, no pool pass; the patchify tactics run it);
* :func:`fuse_conv_pool`: a conv whose output only a max pool reads becomes one ``conv_max_pool``
  layer (its tactics pool the conv's output while it is in cache, ``conv/conv_pool.py``);
* :func:`fuse_pad_conv1d`: a zero ``pad`` of the last dim that only an unpadded 1-D conv
  reads (F.pad's causal left padding) becomes that conv's own padding: a ``conv1d`` layer
  (``tactics/conv1d.py``).
* :func:`collapse_reshapes`: a chain of reshapes becomes one (before the attention fusion).
* :func:`drop_unread`: layers whose results nothing reads go (``torch.max(x, dim)[0]``: its
  argmax).
* :func:`fuse_cat_permute`: a ``permute`` (and a ``reshape`` of it) that only a ``cat`` reads is
  folded into that cat's copy (``tactics/data.py``).

Pointwise runs:

A run is a sequence of consecutive pointwise layers (execution order) with one output
shape; it reads the run's external tensors and writes only the tensors something
outside the run reads (or the engine returns). Consecutive keeps it safe: every
external input is computed before the run, and nobody reads a member's result before
the run has finished. Members' other intermediates never touch memory.
"""
from __future__ import annotations

import math

import attrs
import numpy as np

from .network import Layer, Network

#: no more than this many ops in one kernel (compile time grows with the expression size)
MAX_OPS = 128


@attrs.frozen
class FusedOp:
    """One op of a fused group: ``args`` are ``("ext", k)`` (the group's k-th input),
    ``("tmp", j)`` (the result of the group's op j) or ``("const", x)``."""

    op: str
    args: tuple
    params: tuple[tuple[str, object], ...] = ()


def drop_unread(net: Network) -> Network:
    """Remove (in place) every layer none of whose results a later layer reads or the engine
    returns: the unread half of a two-result op (``torch.max(x, dim)``'s indices) and what only it
    read."""
    read = set(net.outputs)
    keep: list[Layer] = []
    for layer in reversed(net.layers):
        if any(t in read for t in layer.outputs):
            keep.append(layer)
            read.update(layer.inputs)
    net.layers = keep[::-1]
    return net


def collapse_reshapes(net: Network) -> Network:
    """A ``reshape`` of a ``reshape`` read only by reshapes (``.contiguous().view(...)`` after a
    permute: an identity reshape, then the real one) reads the first one's input, and the first goes
    (in place): the pattern matchers (attention) see one reshape."""
    users = net.users()
    producer = {t: x for x in net.layers for t in x.outputs}
    drop: set[int] = set()
    for layer in net.layers:
        if layer.kind != "reshape":
            continue
        first = producer.get(layer.inputs[0])
        t = layer.inputs[0]
        if (first is not None and first.kind == "reshape" and t not in net.outputs
                and all(u.kind == "reshape" for u in users[t])):
            layer.inputs = [first.inputs[0]]
            users[first.inputs[0]].append(layer)
            users[t] = [u for u in users[t] if u is not layer]
            if not users[t]:
                drop.add(id(first))
    net.layers = [x for x in net.layers if id(x) not in drop]
    return net


def fuse_pointwise(net: Network, max_ops: int = MAX_OPS) -> Network:
    """Replace every run of pointwise layers by ``fused_pointwise`` layers of at most ``max_ops``
    ops each (in place; ``max_ops=1``: one kernel per op, fusion off)."""
    out: list[Layer] = []
    run: list[Layer] = []
    for layer in net.layers:
        if layer.kind == "pointwise" and (not run or (_shape(net, layer) == _shape(net, run[0])
                                                      and len(run) < max_ops)):
            run.append(layer)
            continue
        if run:
            out.append(_fuse(net, run))
            run = []
        if layer.kind == "pointwise":
            run.append(layer)
        else:
            out.append(layer)
    if run:
        out.append(_fuse(net, run))
    # the users of every tensor changed: compute the group outputs against the final list
    net.layers = out
    _trim_outputs(net)
    return net


def _shape(net: Network, layer: Layer) -> tuple[int, ...]:
    return net.shape(layer.outputs[0])


def _fuse(net: Network, run: list[Layer]) -> Layer:
    made: dict[int, int] = {}           # tensor id -> index of the op making it
    ext: list[int] = []                 # external input tensor ids, first-use order
    ops: list[FusedOp] = []
    for layer in run:
        args = []
        for a in layer.attrs["args"]:
            if a[0] == "const":
                args.append(("const", float(a[1])))
                continue
            tid = layer.inputs[a[1]]
            if tid in made:
                args.append(("tmp", made[tid]))
            else:
                if tid not in ext:
                    ext.append(tid)
                args.append(("ext", ext.index(tid)))
        ops.append(FusedOp(layer.attrs["op"], tuple(args), tuple(sorted(layer.attrs.get("params", {}).items()))))
        made[layer.outputs[0]] = len(ops) - 1
    source = run[0].source
    # every member's output for now; _trim_outputs keeps those read outside the group
    return Layer("fused_pointwise", ext, [l.outputs[0] for l in run],
                 {"ops": tuple(ops), "results": tuple(range(len(ops)))}, source)


def _trim_outputs(net: Network) -> None:
    read_by: dict[int, set[int]] = {}
    for i, layer in enumerate(net.layers):
        for t in layer.inputs:
            read_by.setdefault(t, set()).add(i)
    returned = set(net.outputs)
    for i, layer in enumerate(net.layers):
        if layer.kind != "fused_pointwise":
            continue
        keep = [(t, r) for t, r in zip(layer.outputs, layer.attrs["results"])
                if t in returned or read_by.get(t, set()) - {i}]
        if not keep:  # dead group (the graph's DCE should have removed it): keep its last result
            keep = [(layer.outputs[-1], layer.attrs["results"][-1])]
        layer.outputs = [t for t, _ in keep]
        layer.attrs["results"] = tuple(r for _, r in keep)


#: the pointwise ops a conv layer can carry as its ``activation`` (``kernels/activation.py``)
CONV_ACTIVATIONS = frozenset({"hardswish", "hardsigmoid", "silu", "sigmoid", "gelu", "gelu_tanh", "leaky_relu"})
#: a clamp a conv carries as an activation: ``(min, max)`` -> its name (MobileNetV2's hardtanh(0, 6))
CONV_CLAMPS = {(0.0, 6.0): "relu6"}


def _readers(net: Network) -> dict[int, list[Layer]]:
    """Tensor id -> the layers that read it, in network order."""
    readers: dict[int, list[Layer]] = {}
    for layer in net.layers:
        for t in layer.inputs:
            readers.setdefault(t, []).append(layer)
    return readers


def fuse_swish(net: Network) -> Network:
    """``x * sigmoid(x)`` written out (a conformer's or an EfficientNet's hand-made Swish) becomes
    one ``silu`` pointwise layer, where the sigmoid's result only that ``mul`` reads (in place):
    :func:`fuse_conv_activation` then hands it to the conv before it. Runs before that."""
    readers = _readers(net)
    producer = {t: layer for layer in net.layers for t in layer.outputs}
    drop: set[int] = set()
    for layer in net.layers:
        if not (layer.kind == "pointwise" and layer.attrs.get("op") == "mul" and len(layer.inputs) == 2
                and tuple(layer.attrs["args"]) in ((("in", 0), ("in", 1)), (("in", 1), ("in", 0)))):
            continue
        for k in (0, 1):
            sig, x = producer.get(layer.inputs[k]), layer.inputs[1 - k]
            if (sig is not None and sig.kind == "pointwise" and sig.attrs.get("op") == "sigmoid"
                    and sig.inputs == [x] and tuple(sig.attrs["args"]) == (("in", 0),) and not sig.attrs.get("params")
                    and len(readers.get(sig.outputs[0], [])) == 1 and sig.outputs[0] not in net.outputs
                    and net.shape(x) == net.shape(layer.outputs[0])):
                layer.inputs, layer.attrs = [x], {**layer.attrs, "op": "silu", "args": (("in", 0),), "params": {}}
                drop.add(id(sig))
                break
    net.layers = [layer for layer in net.layers if id(layer) not in drop]
    return net


def fuse_conv_activation(net: Network) -> Network:
    """Give every conv without relu or activation whose output only one activation pointwise layer
    (relu, :data:`CONV_ACTIVATIONS`; leaky relu's slope goes to ``attrs["negative_slope"]``) reads
    (and the engine does not return) that activation, and drop the pointwise layer (in place); a
    conv with a residual applies it after the add, as the add's reader did. The activation may read
    the conv's output through a ``reshape`` nothing else reads (a 1-D conv's (N, C, 1, L) ->
    (N, C, L) view): then the reshape makes the activation's output instead. Runs before
    :func:`fuse_pointwise` (the pointwise layers are still single ops), and again after
    :func:`fuse_conv_add` for the activation after a residual add."""
    return _fuse_activation(net, lambda x: x.kind == "conv" and not x.attrs["relu"], NORM_ACTIVATIONS,
                            own_relu=True)


#: the activations a group norm (instance norm) or conv layer carries
NORM_ACTIVATIONS = CONV_ACTIVATIONS | {"relu"}


def fuse_norm_activation(net: Network) -> Network:
    """The same for a ``group_norm`` (torch's group and instance norms) and :data:`NORM_ACTIVATIONS`:
    its kernel applies the activation to each channel's row as it writes it (U-Nets' norm + leaky
    relu / SiLU / relu: one pass over the tensor instead of two); and for a ``conv3d`` or
    ``conv_transpose`` layer (their tactics apply it in place after the bias: no pointwise layer of
    its own)."""
    return _fuse_activation(net, lambda x: x.kind in ("group_norm", "conv3d", "conv_transpose"), NORM_ACTIVATIONS,
                            own_relu=False)


def _fuse_activation(net: Network, takes, activations, own_relu: bool) -> Network:
    """``own_relu``: a relu goes to the layer's ``attrs["relu"]`` (a conv's own relu, in every
    tactic's store) rather than to ``attrs["activation"]``."""
    readers = _readers(net)
    drop: set[int] = set()
    for layer in net.layers:
        if not takes(layer) or layer.attrs.get("activation", "none") != "none" or layer.outputs[0] in net.outputs:
            continue
        users = readers.get(layer.outputs[0], [])
        if len(users) != 1:
            continue
        view = None
        if users[0].kind == "reshape" and users[0].outputs[0] not in net.outputs:
            view = users[0]
            users = readers.get(view.outputs[0], [])
            if len(users) != 1:
                continue
        act = users[0]
        src = view.outputs if view is not None else layer.outputs
        params = dict(act.attrs.get("params") or {}) if act.kind == "pointwise" else {}
        op = act.attrs.get("op") if act.kind == "pointwise" else None
        if op == "clamp" and (params.get("min"), params.get("max")) in CONV_CLAMPS:
            op, params = CONV_CLAMPS[params["min"], params["max"]], {}
        if (act.kind == "pointwise" and op in (*activations, *CONV_CLAMPS.values()) and act.inputs == src
                and tuple(act.attrs["args"]) == (("in", 0),)
                and set(params) <= ({"negative_slope"} if op == "leaky_relu" else set())
                and net.shape(act.outputs[0]) == net.shape(src[0])):
            if op == "relu" and own_relu:   # the conv's own relu (in every tactic's store; NaN stays NaN)
                layer.attrs["relu"] = True
            else:
                layer.attrs["activation"] = op
            if op == "leaky_relu":
                layer.attrs["negative_slope"] = float(params.get("negative_slope", 0.01))
            if view is not None:
                view.outputs = list(act.outputs)
            else:
                layer.outputs = list(act.outputs)
            drop.add(id(act))
    net.layers = [layer for layer in net.layers if id(layer) not in drop]
    return net


def fuse_conv_add(net: Network) -> Network:
    """Give every conv without relu, residual or activation whose output only one ``add`` pointwise
    layer reads (and the engine does not return), the add's other operand a float32 tensor of the
    same shape (not a constant, not the conv's output), that operand as its residual
    (``inputs = [x, other]``, ``attrs["residual"]``): the conv moves to the add's place (its input is
    computed before it, the other operand by then too) and makes the add's output. ``a + b`` is
    ``b + a`` bit for bit, so the conv's ``acc + residual`` is the add's result. The add may read
    a 1-D conv's output through its (N, C, 1, L) -> (N, C, L) ``reshape`` that nothing else reads:
    then the residual comes through a new (N, C, 1, L) view of the other operand and the conv and
    its view both move to the add's place, the view making the add's output. Runs after
    :func:`fuse_conv_activation` and before :func:`fuse_pointwise` (in place)."""
    readers = _readers(net)
    made = {t: layer for layer in net.layers for t in layer.outputs}
    moved: dict[int, list[Layer]] = {}
    for layer in net.layers:
        if (layer.kind != "pointwise" or layer.attrs["op"] != "add" or len(layer.inputs) != 2
                or tuple(layer.attrs["args"]) != (("in", 0), ("in", 1)) or layer.attrs.get("params")):
            continue
        for y, other in (layer.inputs, layer.inputs[::-1]):
            conv, view = made.get(y), None
            if conv is not None and conv.kind == "reshape" and len(readers.get(conv.inputs[0], [])) == 1:
                view, conv = conv, made.get(conv.inputs[0])
            if (conv is None or conv.kind != "conv" or conv.attrs["relu"]
                    or conv.attrs["residual"] or conv.attrs.get("activation", "none") != "none"
                    or y in net.outputs or len(readers.get(y, [])) != 1 or other == y or other in net.constants
                    or net.tensors[other].dtype != "float32" or net.tensors[y].dtype != "float32"
                    or not net.shape(other) == net.shape(y) == net.shape(layer.outputs[0])
                    or view is not None and conv.outputs[0] in net.outputs):
                continue
            conv.attrs["residual"] = True
            if view is None:
                conv.inputs = [conv.inputs[0], other]
                conv.outputs = list(layer.outputs)
                moved[id(layer)] = [conv]
            else:
                other4 = net.new_tensor(net.shape(conv.outputs[0]))
                conv.inputs = [conv.inputs[0], other4]
                view.outputs = list(layer.outputs)
                moved[id(layer)] = [Layer("reshape", [other], [other4], {}, layer.source), conv, view]
            break
    gone = {id(x) for run in moved.values() for x in run}
    net.layers = [x for layer in net.layers if id(layer) not in gone
                  for x in moved.get(id(layer), [layer])]
    return net


def _fc(layer: Layer | None, x: int) -> bool:
    """Whether ``layer`` is an ungrouped, residual-free 1x1 conv (stride 1, no padding) of ``x``."""
    return (layer is not None and layer.kind == "conv" and layer.inputs == [x] and not layer.attrs["residual"]
            and layer.attrs["groups"] == 1 and layer.attrs["weight"].shape[2:] == (1, 1)
            and layer.attrs["stride"] == (1, 1) and layer.attrs["padding"] == (0, 0))


def fuse_squeeze_excite(net: Network) -> Network:
    """Replace every squeeze-excite block, ``x * gate(fc2(act(fc1(adaptive_avg_pool2d(x, 1)))))`` (or
    ``x.mean((2, 3), keepdim=True)``, EfficientNet's form) with 1x1 convs as the FCs (any channel
    counts), ``act`` none/relu/SiLU/hardswish and ``gate``
    hardsigmoid/sigmoid (carried by fc2, see :func:`fuse_conv_activation`), whose intermediates
    nothing else reads, by one ``squeeze_excite`` layer at the multiply's place (in place)."""
    made = {t: layer for layer in net.layers for t in layer.outputs}
    readers: dict[int, int] = {}
    for layer in net.layers:
        for t in layer.inputs:
            readers[t] = readers.get(t, 0) + 1
    only = lambda t: readers.get(t) == 1 and t not in net.outputs  # noqa: E731
    drop: set[int] = set()
    out = []
    for layer in net.layers:
        match = None
        if (layer.kind == "pointwise" and layer.attrs["op"] == "mul" and len(layer.inputs) == 2
                and tuple(layer.attrs["args"]) == (("in", 0), ("in", 1))):
            for x, s in (layer.inputs, layer.inputs[::-1]):
                xs, ss = net.shape(x), net.shape(s)
                if len(xs) != 4 or ss != xs[:2] + (1, 1) or net.shape(layer.outputs[0]) != xs or not only(s):
                    continue
                fc2 = made.get(s)
                if fc2 is None or fc2.kind != "conv" or fc2.attrs.get("activation") not in ("hardsigmoid", "sigmoid"):
                    continue
                h = fc2.inputs[0]
                fc1 = made.get(h)
                if not (_fc(fc2, h) and only(h) and fc1 is not None) or fc1.attrs.get("activation", "none") \
                        not in ("none", "silu", "hardswish"):
                    continue
                p = fc1.inputs[0]
                pool = made.get(p)
                if (_fc(fc1, p) and only(p) and pool is not None and pool.inputs == [x]
                        and (pool.kind == "adaptive_avg_pool2d" or pool.kind == "mean" and pool.attrs["dims"] == (2, 3))
                        and net.shape(p) == xs[:2] + (1, 1)):
                    match = (x, pool, fc1, fc2)
                    break
        if match is None:
            out.append(layer)
            continue
        x, pool, fc1, fc2 = match
        act = "relu" if fc1.attrs["relu"] else fc1.attrs.get("activation", "none")
        C, R = net.shape(x)[1], fc1.attrs["weight"].shape[0]
        bias = lambda c, n: np.zeros(n, np.float32) if c.attrs["bias"] is None else c.attrs["bias"]  # noqa: E731
        attrs = dict(w1=np.ascontiguousarray(fc1.attrs["weight"].reshape(R, C)), b1=bias(fc1, R), act=act,
                     w2=np.ascontiguousarray(fc2.attrs["weight"].reshape(C, R)), b2=bias(fc2, C),
                     gate=fc2.attrs["activation"])
        drop.update((id(pool), id(fc1), id(fc2)))
        out.append(Layer("squeeze_excite", [x], list(layer.outputs), attrs, layer.source))
    net.layers = [layer for layer in out if id(layer) not in drop]
    return net


def fuse_conv_avg_pool(net: Network) -> Network:
    """Replace every float, ungrouped, unpadded 1x1 stride-1 conv without activation or residual
    whose output only an average pool reads (and the engine does not return), the pool's kernel its
    stride, unpadded, every window whole (the conv's output a multiple of the kernel: ``ceil_mode``
    and ``count_include_pad`` change nothing), no ``divisor_override``, by one conv with the pool's
    kernel and stride and the weight spread over the window / its size (in place). The average of
    a linear map is the map of the average; the bias passes through."""
    readers = _readers(net)
    drop: set[int] = set()
    out = []
    for layer in net.layers:
        if id(layer) in drop:
            continue
        a = layer.attrs
        users = readers.get(layer.outputs[0], []) if layer.kind == "conv" else []
        w = a.get("weight") if users else None
        if (len(users) == 1 and users[0].kind == "avg_pool2d" and isinstance(w, np.ndarray) and w.ndim == 4
                and w.shape[2:] == (1, 1) and a["groups"] == 1 and a["stride"] == (1, 1) and a["padding"] == (0, 0)
                and not a["relu"] and not a["residual"] and a.get("activation", "none") == "none"
                and net.tensors[layer.inputs[0]].dtype == "float32" and layer.outputs[0] not in net.outputs):
            pool = users[0].attrs
            (kh, kw), (H, W) = pool["kernel"], net.shape(layer.outputs[0])[2:]
            if (pool["stride"] == pool["kernel"] and pool["padding"] == (0, 0) and pool["divisor_override"] is None
                    and H % kh == 0 and W % kw == 0):
                spread = np.ascontiguousarray(np.broadcast_to(w / np.float32(kh * kw), (*w.shape[:2], kh, kw)),
                                              np.float32)
                out.append(Layer("conv", list(layer.inputs), list(users[0].outputs),
                                 dict(a, weight=spread, stride=(kh, kw)), layer.source))
                drop.add(id(users[0]))
                continue
        out.append(layer)
    net.layers = out
    return net


def fuse_conv_pool(net: Network) -> Network:
    """Replace every ungrouped, residual-free conv whose output only a max pool reads (and the engine
    does not return) by one ``conv_max_pool`` layer at the conv's place (in place)."""
    readers = _readers(net)
    drop: set[int] = set()
    out = []
    for layer in net.layers:
        if id(layer) in drop:
            continue
        users = readers.get(layer.outputs[0], []) if layer.kind == "conv" else []
        if (len(users) == 1 and users[0].kind == "max_pool2d" and not layer.attrs["residual"]
                and layer.attrs["groups"] == 1 and users[0].attrs["dilation"] == (1, 1)
                and layer.attrs.get("activation", "none") == "none"
                and layer.outputs[0] not in net.outputs):
            pool = users[0]
            attrs = dict(layer.attrs, pool={k: pool.attrs[k] for k in ("kernel", "stride", "padding", "ceil_mode")},
                         conv_shape=net.shape(layer.outputs[0]))
            out.append(Layer("conv_max_pool", list(layer.inputs), list(pool.outputs), attrs, layer.source))
            drop.add(id(pool))
            continue
        out.append(layer)
    net.layers = out
    return net


#: output channels a block of ``tactics/conv1d.py``'s kernel keeps in registers
CONV1D_OC_BLOCK = 4


def conv1d_applies(layer: Layer, net: Network) -> bool:
    """Whether ``tactics/conv1d.py`` (``conv1d_simd``) runs ``layer``: a float32 1-D conv (kernel
    height 1 on an (N, C, 1, L) input, any stride), any activation, a group's output channels in
    blocks of :data:`CONV1D_OC_BLOCK`; a ``conv`` layer (symmetric padding) or a ``conv1d`` one
    (:func:`fuse_pad_conv1d`: a zero ``pad`` folded in, its ``pads`` (left, right))."""
    a = layer.attrs
    w = a.get("weight")
    if layer.kind not in ("conv", "conv1d") or "nchwc" in a or not isinstance(w, np.ndarray) or w.ndim != 4 \
            or w.shape[2] != 1:
        return False
    x = net.shape(layer.inputs[0])
    groups = a["groups"]
    return (len(x) == 4 and x[2] == 1 and a["stride"][0] == 1 and a["padding"][0] == 0
            and a["dilation"][0] == 1
            and net.tensors[layer.inputs[0]].dtype == "float32"
            and w.shape[0] % groups == 0 and (w.shape[0] // groups) % CONV1D_OC_BLOCK == 0)


def fuse_pad_conv1d(net: Network) -> Network:
    """Fold every zero ``pad`` of the last dim only (widths >= 0) whose output only the
    (N, C, L) -> (N, C, 1, L) ``reshape`` of an unpadded 1-D conv (any stride) reads (and the engine does not
    return) into that conv: it reads a new view of the pad's input and becomes a ``conv1d`` layer
    with ``pads`` (left, right), which only ``tactics/conv1d.py`` runs (so only where
    :func:`conv1d_applies`).
    Runs after the conv fusions (in place)."""
    readers = _readers(net)
    drop: set[int] = set()
    for pad in net.layers:
        if pad.kind != "pad" or pad.attrs["value"] != 0.0 or pad.outputs[0] in net.outputs:
            continue
        widths = pad.attrs["widths"]
        if any(w != (0, 0) for w in widths[:-1]) or min(widths[-1]) < 0 or len(widths) != 3:
            continue
        users = readers.get(pad.outputs[0], [])
        if len(users) != 1 or users[0].kind != "reshape" or users[0].outputs[0] in net.outputs:
            continue
        view = users[0]
        convs = readers.get(view.outputs[0], [])
        if len(convs) != 1 or convs[0].kind != "conv" or convs[0].inputs[0] != view.outputs[0]:
            continue
        conv = convs[0]
        if tuple(conv.attrs["padding"]) != (0, 0) or not conv1d_applies(conv, net):
            continue
        n, c, length = net.shape(pad.inputs[0])
        x4 = net.new_tensor((n, c, 1, length))
        view.inputs, view.outputs = [pad.inputs[0]], [x4]
        conv.inputs = [x4, *conv.inputs[1:]]
        conv.kind = "conv1d"
        conv.attrs["pads"] = tuple(int(w) for w in widths[-1])
        drop.add(id(pad))
    net.layers = [layer for layer in net.layers if id(layer) not in drop]
    return net


def fuse_cat_permute(net: Network) -> Network:
    """A ``permute``, or a ``reshape`` of one, whose result only a ``cat`` reads (once; the engine
    does not return it or the permuted tensor) is folded into the cat: the cat reads the permute's
    input and copies it transposed into its slice of the output, seen in the permuted shape (a
    detection head's ``permute(0, 2, 3, 1).reshape(N, -1, K)`` per level before the cat over levels:
    one copy instead of two, a layer fewer). Only where that slice is a view in the permuted shape:
    the dims before the cat dim end at a dim of it. ``attrs["permuted"]``: per cat input, None or
    ``(perm, permuted shape)``. Runs after :func:`collapse_reshapes` (in place)."""
    readers = _readers(net)
    producer = {t: x for x in net.layers for t in x.outputs}
    drop: set[int] = set()
    for cat in net.layers:
        if cat.kind != "cat":
            continue
        lead = math.prod(net.shape(cat.outputs[0])[:cat.attrs["dim"]])
        permuted = list(cat.attrs.get("permuted") or (None,) * len(cat.inputs))
        for i, t in enumerate(cat.inputs):
            chain, made = [], producer.get(t)
            if made is not None and made.kind == "reshape":
                chain.append(made)
                made = producer.get(made.inputs[0])
            if made is None or made.kind != "permute" or cat.inputs.count(t) != 1:
                continue
            chain.append(made)
            shape = tuple(net.shape(made.outputs[0]))
            if (any(len(readers.get(x.outputs[0], ())) != 1 or x.outputs[0] in net.outputs for x in chain)
                    or lead not in {math.prod(shape[:q]) for q in range(len(shape) + 1)}):
                continue
            cat.inputs[i] = made.inputs[0]
            permuted[i] = (tuple(made.attrs["perm"]), shape)
            drop.update(id(x) for x in chain)
        if any(p is not None for p in permuted):
            cat.attrs["permuted"] = tuple(permuted)
    net.layers = [layer for layer in net.layers if id(layer) not in drop]
    return net

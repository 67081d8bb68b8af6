"""The NCHW16c activation layout between conv-family layers (ONNX Runtime's NCHWc): which tensors of
a float network are kept channel-blocked, as (N, ceil(C / 16), H, W, 16) with 16 channels of a pixel
innermost (``srcore.plugin.nchwc``), instead of NCHW.

A tensor is blocked when the layer that makes it can write the layout and every layer that reads it
can read it: convs (ungrouped ones of any kernel, 1x1, depthwise: one input channel per output
channel), a dense conv with its max pool fused (``conv_max_pool``) and ``squeeze_excite``. It is never an engine input, output or constant. The convs read
and write either layout, with two limits (applied until nothing changes): a residual is in its
conv's output layout; a ``squeeze_excite`` reads and writes one layout. So the reorders happen only
at a run's edges, inside the first and last layers' kernels (the dense kernel copies NCHW rows into
its window and transposes its last row buffer into NCHW planes; the depthwise kernel transposes NCHW
in or out per channel block; the 1x1 kernel reads NCHW in place and transposes its register tile
into NCHW planes), never as layers of their own.

Marked layers carry ``attrs["nchwc"] = (input blocked, output blocked)`` and ``attrs["x_shape"]``,
the logical NCHW input shape; a blocked tensor's ``shape`` is its physical one, so the plan's arena
and the timing cache see what is stored.
"""
from __future__ import annotations

from .network import Layer, Network

#: channels per block: the kernels' vector (16 float32 lanes; LLVM splits it on narrower CPUs)
LANES = 16


def blocked_shape(shape) -> tuple[int, ...]:
    N, C, H, W = shape
    return (N, -(-C // LANES), H, W, LANES)


def _role(layer: Layer, net: Network) -> str | None:
    """``"pw"`` (1x1), ``"dw"`` (depthwise), ``"dense"`` (any other ungrouped conv), ``"se"``, ``"rs"``
    (a nearest resize: one layout both sides) or None: how ``layer`` may take part."""
    if layer.kind == "squeeze_excite":
        return "se" if len(net.shape(layer.inputs[0])) == 4 else None
    if layer.kind == "resize":   # (nearest: 16 channels of a pixel copied as one, tactics/data.py)
        return "rs" if layer.attrs["mode"] == "nearest" and len(net.shape(layer.inputs[0])) == 4 else None
    if layer.kind == "conv_max_pool":   # (pooled in the layout after its NCHW16c conv, tactics/conv_pool.py)
        a = layer.attrs
        return "dense" if a["groups"] == 1 and a["dilation"] == (1, 1) and a["weight"].ndim == 4 else None
    if layer.kind != "conv":
        return None
    a = layer.attrs
    xs = net.shape(layer.inputs[0])
    if len(xs) != 4 or a["weight"].ndim != 4 or a["dilation"] != (1, 1):
        return None
    O = a["weight"].shape[0]
    if a["groups"] == 1 and a["weight"].shape[2:] == (1, 1) and a["stride"] == (1, 1) and a["padding"] == (0, 0):
        return "pw"
    if a["groups"] == xs[1] == O:   # (an activation its kernel does not fuse runs in place: any layout)
        return "dw"
    if a["groups"] == 1:
        return "dense"
    return None


def assign_nchwc(net: Network) -> set[int]:
    """Mark the network's NCHW16c tensors and layers (in place, see the module); returns the tensors."""
    blocked = nchwc_tensors(net)
    apply_nchwc(net, blocked)
    return blocked


def nchwc_tensors(net: Network) -> set[int]:
    """The tensors the layout may block (see the module); the network is not changed."""
    roles = {id(layer): _role(layer, net) for layer in net.layers}
    made = {t: layer for layer in net.layers for t in layer.outputs}
    readers: dict[int, list[tuple[Layer, int]]] = {}
    for layer in net.layers:
        for i, t in enumerate(layer.inputs):
            readers.setdefault(t, []).append((layer, i))
    fixed = set(net.inputs) | set(net.outputs) | set(net.constants)
    blocked = set()
    for t, producer in made.items():
        if (t in fixed or roles[id(producer)] is None or producer.outputs[0] != t
                or net.tensors[t].dtype != "float32" or len(net.shape(t)) != 4 or not readers.get(t)):
            continue
        if all(roles[id(r)] is not None and (i == 0 or (r.kind == "conv" and i == 1 and r.attrs["residual"]))
               for r, i in readers[t]):
            blocked.add(t)
    changed = True
    while changed:
        changed = False
        for layer in net.layers:
            role = roles[id(layer)]
            if role is None:
                continue
            x, y = layer.inputs[0], layer.outputs[0]
            linked = [x] if role in ("se", "rs") else []
            if role not in ("se", "rs") and layer.attrs["residual"]:
                linked = [layer.inputs[1]]
            drop: set[int] = set()
            if any((t in blocked) != (y in blocked) for t in linked):
                drop.update([y, *linked])
            if drop & blocked:
                blocked -= drop
                changed = True
    return blocked


def nchwc_runs(net: Network, blocked: set[int]) -> list[tuple[set[int], list[Layer]]]:
    """``blocked`` split into runs: ``(tensors, layers)`` joined by the layers that read or write them
    (every blocked tensor of a layer is in its run, so a run can go back to NCHW on its own)."""
    parent = {t: t for t in blocked}

    def root(t: int) -> int:
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t
    touching = []
    for layer in net.layers:
        mine = [t for t in (*layer.inputs, *layer.outputs) if t in blocked]
        if mine:
            touching.append((layer, mine[0]))
            for t in mine[1:]:
                parent[root(t)] = root(mine[0])
    runs: dict[int, tuple[set[int], list[Layer]]] = {}
    for t in blocked:
        runs.setdefault(root(t), (set(), []))[0].add(t)
    for layer, t in touching:
        runs[root(t)][1].append(layer)
    return sorted(runs.values(), key=lambda run: net.layers.index(run[1][0]))


def apply_nchwc(net: Network, blocked: set[int]) -> None:
    """Mark ``blocked`` (from :func:`nchwc_tensors`, or whole runs of it) and the layers at them."""
    for layer in net.layers:
        if not layer.inputs or not layer.outputs:
            continue
        x, y = layer.inputs[0], layer.outputs[0]
        if x in blocked or y in blocked:
            layer.attrs["nchwc"] = (x in blocked, y in blocked)
            layer.attrs["x_shape"] = net.shape(x)
    for t in blocked:
        net.tensors[t].shape = blocked_shape(net.tensors[t].shape)


def clear_nchwc(net: Network, tensors: set[int], layers: list[Layer], shapes: dict[int, tuple]) -> None:
    """Undo :func:`apply_nchwc` for one run: its ``tensors`` back to their NCHW ``shapes``."""
    for layer in layers:
        layer.attrs.pop("nchwc", None)
        layer.attrs.pop("x_shape", None)
    for t in tensors:
        net.tensors[t].shape = shapes[t]

"""The data-movement layers: ``cat``, ``resize`` (nearest, bilinear), ``pad``, ``index_select``
(embeddings too), ``gather``, ``where`` (masked_fill too) and ``cumsum``.

numpy does these at memory speed (copies, takes, one select), so each has a numpy tactic; ``resize``,
which numpy does in several passes over the output, also has a compiled one (:mod:`..kernels.resize`).
Index tables are computed here from the layer's shapes and scales (never stored), as ATen's
``UpSample.h`` does in float32. Indices read at run time are checked against the dim they index:
torch raises for an index out of range, and numpy's ``take`` would wrap a negative one.
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError

from ..builder.network import Layer, Network
from ..kernels.layout_copy import channels_last_into, transpose_into, transpose_tiles
from ..kernels.rows import max_rows

f32 = np.float32


def batched_transpose(perm, shape) -> tuple[int, int, int] | None:
    """``(b, m, n)`` when transposing ``shape`` by ``perm`` is, in memory, ``b`` transposes of an
    (m, n) matrix: the dims (size-1 ones left out) form three runs, the first kept in place and the
    other two swapped (NCHW -> NHWC: b = N, m = C, n = H * W); None otherwise."""
    at = {d: i for i, d in enumerate(d for d in range(len(shape)) if shape[d] != 1)}
    kept = [at[d] for d in perm if d in at]     # the dims of size > 1, numbered among themselves
    runs: list[list[int]] = []
    for d in kept:
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    if len(runs) == 3 and runs[0][0] == 0 and runs[2][0] == runs[0][-1] + 1:
        lead, second, first = runs
    elif len(runs) == 2 and runs[1][0] == 0:
        lead, (second, first) = [], runs
    else:
        return None
    dims = sorted(at, key=at.get)
    size = lambda run: math.prod(shape[dims[i]] for i in run)   # noqa: E731
    return size(lead), size(first), size(second)


def permute_tiles(layer: Layer, net: Network):
    """A float32 ``permute`` that is a batch of matrix transposes (:func:`batched_transpose`) as one
    compiled copy through 8 x 8 register blocks (:func:`..kernels.layout_copy.transpose_tiles`),
    timed against numpy's transposed copy: 0.5-0.75x numpy's on the AMD EPYC, 0.17x where the
    source's rows are 4 KiB apart (a detection head's 75x32x32: numpy's reads all hit one L1 set)."""
    x, o = layer.inputs[0], layer.outputs[0]
    if net.tensors[x].storage != np.float32 or net.tensors[o].storage != np.float32:
        return None
    bmn = batched_transpose(tuple(layer.attrs["perm"]), net.shape(x))
    if bmn is None or bmn[1] == 1 or bmn[2] == 1:
        return None

    perm = tuple(layer.attrs["perm"])

    def run(x, out):
        if x.flags.c_contiguous:
            transpose_tiles(x, out, *bmn)
        else:   # (a caller's strided input: the kernel reads flat memory)
            np.copyto(out, x.transpose(perm))
    return run


def cat(layer: Layer, net: Network):
    dim, sizes = layer.attrs["dim"], layer.attrs["sizes"]
    bounds = np.cumsum((0,) + tuple(sizes)).tolist()
    keys = [(slice(None),) * dim + (slice(a, b),) for a, b in zip(bounds[:-1], bounds[1:])]
    permuted = layer.attrs.get("permuted")
    if permuted is None:
        def run(*arrays):
            out = arrays[-1]
            for key, x in zip(keys, arrays[:-1]):
                out[key] = x
        return run
    # a permute folded in (builder/fusion.py fuse_cat_permute): its input transposed into the slice.
    # A move of one dim to last whose leading dims are the cat's (NCHW -> NHWC): one compiled copy
    # (numpy's transposed copy cost 1.3 us on 2x15x8x8), of float32 through 8 x 8 register blocks
    # (transpose_into); any other, numpy into the slice seen in the permuted shape (a view:
    # fuse_cat_permute checked the shapes)
    out_shape = net.shape(layer.outputs[0])
    f32 = net.tensors[layer.outputs[0]].storage == np.float32
    lead, inner = math.prod(out_shape[:dim]), math.prod(out_shape[dim + 1:])
    copies = []
    for i, (key, p) in enumerate(zip(keys, permuted)):
        fast = None
        if p is not None:
            perm, x_shape = p[0], net.shape(layer.inputs[i])
            q = next((k for k in range(len(perm)) if perm[k] != k), len(perm))
            if perm == (*range(q), *range(q + 1, len(perm)), q) and math.prod(x_shape[:q]) == lead:
                fast = (lead, x_shape[q], math.prod(x_shape[q + 1:]), bounds[i] * inner)
                if f32:
                    fast = (*fast[:3], math.prod(out_shape) // max(lead, 1), fast[3])
        copies.append((key, p, fast))

    def run(*arrays):
        out = arrays[-1]
        for (key, p, fast), x in zip(copies, arrays[:-1]):
            if fast is not None and len(fast) == 5:
                transpose_into(x, out, *fast)
            elif fast is not None:
                channels_last_into(x, out, *fast)
            elif p is None:
                out[key] = x
            else:
                v = out[key].reshape(p[1])
                if not np.may_share_memory(v, out):   # (never: fuse_cat_permute checked the shapes)
                    raise KernelError(f"cat ({layer.source}): a folded permute's slice is not a view")
                np.copyto(v, x.transpose(p[0]))
    return run


def expand(layer: Layer, net: Network):
    def run(x, out):
        np.copyto(out, x)   # (broadcast: torch's expand rules are numpy's)
    return run


def cast(layer: Layer, net: Network):
    def run(x, out):
        np.copyto(out, x, casting="unsafe")   # (an int64 index above 2**24 rounds, as torch's)
    return run


def int_scalar(layer: Layer, net: Network):
    fn, k = (np.remainder if layer.attrs["op"] == "remainder" else np.floor_divide), layer.attrs["other"]

    def run(x, out):
        with np.errstate(over="ignore"):   # (int8 -128 // -1 wraps to -128, as torch's)
            fn(x, k, out=out)
    return run


_INT_FNS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
            "floor_divide": np.floor_divide, "remainder": np.remainder, "and": np.bitwise_and, "or": np.bitwise_or,
            "xor": np.bitwise_xor}


def int_binary(layer: Layer, net: Network):
    """Integer / bool elementwise ops (numpy's integer ``//`` and ``%`` floor, as torch's); a
    division by zero raises (torch: ZeroDivisionError; numpy would give 0)."""
    (a, b), fn, op = layer.attrs["args"], _INT_FNS[layer.attrs["op"]], layer.attrs["op"]
    divides = op in ("floor_divide", "remainder")

    def pick(arg, arrays):
        return arrays[arg[1]] if arg[0] == "in" else arg[1]

    def run(*arrays):
        y = pick(b, arrays)
        if divides and b[0] == "in" and not np.all(y):
            raise ZeroDivisionError(f"{op}: integer division by zero")
        with np.errstate(over="ignore"):   # (int8 -128 // -1 wraps to -128, as torch's)
            fn(pick(a, arrays), y, out=arrays[-1])
    return run


def one_hot(layer: Layer, net: Network):
    n = layer.attrs["n"]
    classes = np.arange(n)

    def run(x, out):
        if x.size and (x.min() < 0 or x.max() >= n):
            raise IndexError(f"one_hot: a class value is outside [0, {n})")
        np.equal(x[..., None], classes, out=out, casting="unsafe")
    return run


def flip(layer: Layer, net: Network):
    dims = layer.attrs["dims"]

    def run(x, out):
        np.copyto(out, np.flip(x, dims))
    return run


def pad(layer: Layer, net: Network):
    widths, value = layer.attrs["widths"], f32(layer.attrs["value"])
    mode = layer.attrs.get("mode", "constant")
    out_shape = net.shape(layer.outputs[0])
    inner = tuple(slice(lo, n - hi) for (lo, hi), n in zip(widths, out_shape))
    if mode != "constant":
        borders = _pad_borders(widths, net.shape(layer.inputs[0]), mode)

        def run(x, out):
            out[inner] = x
            for dst, src in borders:
                out[dst] = out[src]
        return run

    def run(x, out):
        out.fill(value)
        out[inner] = x
    return run


def pad_compiled(layer: Layer, net: Network):
    """A ``reflect`` / ``replicate`` pad of the last two dims (or the last one) as a nearest gather:
    the compiled resize kernel with each dim's source index table, one pass over the output (the
    numpy tactic's five slice copies cost ~5 us on a small plane, most of it Python)."""
    from ..kernels.resize import nearest_planes

    widths, mode = layer.attrs["widths"], layer.attrs.get("mode", "constant")
    shape, out_shape = net.shape(layer.inputs[0]), net.shape(layer.outputs[0])
    if mode == "constant" or len(shape) < 2 or any(w != (0, 0) for w in map(tuple, widths[:-2])) \
            or "nchwc" in layer.attrs:
        return None
    h, w = (pad_table(int(lo), int(n), int(m), mode) for (lo, _), n, m in zip(widths[-2:], shape[-2:], out_shape[-2:]))
    planes = (int(np.prod(shape[:-2], dtype=np.int64)),) + tuple(shape[-2:])
    oplanes = (planes[0],) + tuple(out_shape[-2:])

    def run(x, out):
        nearest_planes(x.reshape(planes), h, w, out.reshape(oplanes))
    return run


def resize_pad_tables(layer: Layer, net: Network) -> tuple[np.ndarray, np.ndarray]:
    """``builder/resize_pad.py``'s layer: the pad's tables indexing the nearest resize's."""
    (H, W), (Hr, Wr), (Ho, Wo) = net.shape(layer.inputs[0])[2:], layer.attrs["mid_shape"][2:], \
        net.shape(layer.outputs[0])[2:]
    (sh, sw), (wh, ww), mode = layer.attrs["scales"], layer.attrs["widths"][2:], layer.attrs["mode"]
    return (np.ascontiguousarray(nearest_table(H, Hr, sh)[pad_table(int(wh[0]), Hr, Ho, mode)]),
            np.ascontiguousarray(nearest_table(W, Wr, sw)[pad_table(int(ww[0]), Wr, Wo, mode)]))


def resize_pad_compiled(layer: Layer, net: Network):
    from ..kernels.resize import nearest_planes

    h, w = resize_pad_tables(layer, net)
    shape, out_shape = net.shape(layer.inputs[0]), net.shape(layer.outputs[0])
    planes, oplanes = (shape[0] * shape[1], *shape[2:]), (shape[0] * shape[1], *out_shape[2:])

    def run(x, out):
        nearest_planes(x.reshape(planes), h, w, out.reshape(oplanes))
    return run


def resize_pad(layer: Layer, net: Network):
    h, w = resize_pad_tables(layer, net)

    def run(x, out):
        np.take(np.take(x, h, axis=-2), w, axis=-1, out=out)
    return run


def _resize_add_tables(layer: Layer, net: Network):
    (H, W), (Ho, Wo) = net.shape(layer.inputs[1])[2:], layer.attrs["mid_shape"][2:]
    sh, sw = layer.attrs["scales"]
    return np.ascontiguousarray(nearest_table(H, Ho, sh)), np.ascontiguousarray(nearest_table(W, Wo, sw))


def resize_add_compiled(layer: Layer, net: Network):
    """``builder/resize_add.py``'s layer: one pass, the resize's tables read in place."""
    from ..kernels.resize import nearest_add_planes

    h, w = _resize_add_tables(layer, net)
    relu = bool(layer.attrs["relu"])
    shape, out_shape = net.shape(layer.inputs[1]), net.shape(layer.outputs[0])
    planes, oplanes = (shape[0] * shape[1], *shape[2:]), (out_shape[0] * out_shape[1], *out_shape[2:])

    def run(a, x, out):
        nearest_add_planes(a.reshape(oplanes), x.reshape(planes), h, w, relu, out.reshape(oplanes))
    return run


def resize_add(layer: Layer, net: Network):
    h, w = _resize_add_tables(layer, net)
    relu = bool(layer.attrs["relu"])

    def run(a, x, out):
        np.add(a, np.take(np.take(x, h, axis=-2), w, axis=-1), out=out)
        if relu:
            np.maximum(out, f32(0), out=out)
    return run


def pad_table(lo: int, n: int, n_out: int, mode: str) -> np.ndarray:
    """The input index each of a dim's ``n_out`` output positions reads (``lo`` positions before the
    input's ``n``): mirrored about the edge (``reflect``) or the edge itself (``replicate``)."""
    i = np.arange(n_out, dtype=np.int64) - lo
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    i = np.abs(i)
    return np.where(i > n - 1, 2 * (n - 1) - i, i)


def _pad_borders(widths, shape, mode: str) -> list[tuple[tuple, tuple]]:
    """``(destination, source)`` index pairs of the output that fill a ``reflect`` / ``replicate`` pad's
    borders from the output itself once the input is copied into it, one dim after the other (the pad
    is separable: a later dim's borders copy the earlier dims' padded rows, corners included). Slices
    only: np.pad took ~35 us on a 2x16x10x12 plane, its Python around a few copies."""
    out = []
    for d, ((lo, hi), n) in enumerate(zip(widths, shape)):
        if lo < 0 or hi < 0:
            raise ValueError(f"{mode} pad: negative widths {widths}")
        def at(sl, d=d):
            return (slice(None),) * d + (sl,)
        if mode == "replicate":
            pairs = [(slice(0, lo), slice(lo, lo + 1)), (slice(lo + n, lo + n + hi), slice(lo + n - 1, lo + n))]
        else:   # reflect: output p < lo reads 2 lo - p, p >= lo + n reads 2 (lo + n - 1) - p
            stop = lo + n - 2 - hi
            pairs = [(slice(0, lo), slice(2 * lo, lo, -1)),
                     (slice(lo + n, lo + n + hi), slice(lo + n - 2, stop if stop >= 0 else None, -1))]
        out += [(at(dst), at(src)) for dst, src in pairs if dst.stop > dst.start]
    return out


# -- resize ---------------------------------------------------------------------------------------------
def _scale(n_in: int, n_out: int, scale, align_corners: bool):
    """ATen's ``area_pixel_compute_scale`` in float32."""
    if align_corners:
        return f32((n_in - 1) / (n_out - 1)) if n_out > 1 else f32(0)
    if scale is not None and scale > 0:
        return f32(1.0 / scale)
    return f32(n_in) / f32(n_out)


def nearest_table(n_in: int, n_out: int, scale) -> np.ndarray:
    """Source index of every output position (ATen's ``nearest_idx``: ``floor(dst * scale)``)."""
    if n_in == n_out:
        return np.arange(n_out, dtype=np.int64)
    src = np.floor(np.arange(n_out, dtype=f32) * _scale(n_in, n_out, scale, False))
    return np.minimum(src.astype(np.int64), n_in - 1)


def linear_table(n_in: int, n_out: int, scale, align_corners: bool):
    """``(i0, i1, w1)``: the two source taps of every output position and the weight of the second."""
    s = _scale(n_in, n_out, scale, align_corners)
    dst = np.arange(n_out, dtype=f32)
    src = s * dst if align_corners else np.maximum(s * (dst + f32(0.5)) - f32(0.5), f32(0))
    i0 = np.minimum(src.astype(np.int64), n_in - 1)
    i1 = i0 + (i0 < n_in - 1)
    w1 = np.clip(src - i0.astype(f32), 0, 1).astype(f32)
    return i0, i1, w1


def resize_tables(layer: Layer, net: Network):
    (H, W), (Ho, Wo) = net.shape(layer.inputs[0])[-2:], net.shape(layer.outputs[0])[-2:]
    sh, sw = layer.attrs["scales"]
    if layer.attrs["mode"] == "nearest":
        return nearest_table(H, Ho, sh), nearest_table(W, Wo, sw)
    align = layer.attrs["align_corners"]
    if layer.attrs["mode"] == "linear":   # (1-D: the last dim only)
        return None, linear_table(W, Wo, sw, align)
    return linear_table(H, Ho, sh, align), linear_table(W, Wo, sw, align)


def resize(layer: Layer, net: Network):
    """numpy: one ``take`` per dim (nearest); for bilinear, the two taps of each dim weighted."""
    if "nchwc" in layer.attrs:   # (the compiled tactic's)
        return None
    th, tw = resize_tables(layer, net)
    one = f32(1)
    if layer.attrs["mode"] == "nearest":
        def run(x, out):
            np.take(np.take(x, th, axis=-2), tw, axis=-1, out=out)
        return run
    if layer.attrs["mode"] == "linear":
        i0, i1, l1 = tw

        def run(x, out):
            np.add(np.take(x, i0, axis=-1) * (one - l1), np.take(x, i1, axis=-1) * l1, out=out)
        return run
    (h0, h1, lh), (w0, w1, lw) = th, tw
    lh, lw = lh.reshape(-1, 1), lw

    def run(x, out):
        rows = np.take(x, h0, axis=-2) * (one - lh) + np.take(x, h1, axis=-2) * lh
        np.add(np.take(rows, w0, axis=-1) * (one - lw), np.take(rows, w1, axis=-1) * lw, out=out)
    return run


def resize_compiled(layer: Layer, net: Network):
    return _resize_kernel(layer, net, 1)


def _resize_kernel(layer: Layer, net: Network, nt: int):
    """The compiled resize on one thread (``nt`` 1) or its planes (rows) claimed over numba's OpenMP
    team of ``nt`` threads (:mod:`..kernels.rows_split`, governed: the same bits)."""
    from ..kernels import resize as one
    from ..kernels import rows_split as split
    from ..kernels import threads as _threads

    gov = _threads.Governor(nt)

    def driver(serial, parallel, n):
        if nt == 1:
            return serial
        chunk = max(1, -(-n // (4 * nt)))   # 4 claims a thread: a late worker leaves little to wait for
        return lambda *args: gov.run(parallel, nt, chunk, n, *args)

    shape, out_shape = net.shape(layer.inputs[0]), net.shape(layer.outputs[0])
    if "nchwc" in layer.attrs:
        # NCHW16c both sides (builder/layout.py; nearest): a pixel's 16 channels are one unit, so the
        # planes kernel runs on (N * blocks, H, W * 16) with each column index spread over 16
        (H, W), (Ho, Wo) = layer.attrs["x_shape"][2:], out_shape[2:4]
        sh, sw = layer.attrs["scales"]
        h = nearest_table(H, Ho, sh)
        w = (nearest_table(W, Wo, sw)[:, None] * 16 + np.arange(16)).reshape(-1)
        planes, oplanes = (shape[0] * shape[1], H, W * 16), (shape[0] * shape[1], Ho, Wo * 16)
        nearest = driver(one.nearest_planes, split.nearest_split, planes[0])

        def run(x, out):
            nearest(x.reshape(planes), h, w, out.reshape(oplanes))
        return run
    th, tw = resize_tables(layer, net)
    planes = (int(np.prod(shape[:-2], dtype=np.int64)),) + tuple(shape[-2:])
    oplanes = (planes[0],) + tuple(out_shape[-2:])
    if layer.attrs["mode"] == "nearest":
        h, w = (np.ascontiguousarray(t, np.int64) for t in (th, tw))
        nearest = driver(one.nearest_planes, split.nearest_split, planes[0])

        def run(x, out):
            nearest(x.reshape(planes), h, w, out.reshape(oplanes))
        return run
    if layer.attrs["mode"] == "linear":
        rows, orows = (planes[0] * planes[1], planes[2]), (planes[0] * oplanes[1], oplanes[2])
        i0, i1, l1 = tw
        linear = driver(one.linear_rows, split.linear_split, rows[0])

        def run(x, out):
            linear(x.reshape(rows), i0, i1, l1, out.reshape(orows))
        return run
    (h0, h1, lh), (w0, w1, lw) = th, tw
    bilinear = driver(one.bilinear_planes, split.bilinear_split, planes[0])

    def run(x, out):
        bilinear(x.reshape(planes), h0, h1, lh, w0, w1, lw, out.reshape(oplanes))
    return run


#: output elements under which a resize or group norm stays whole at more than one intra-op thread:
#: ~0.05 ms of work, where the split's claims and the team's hand-over stop paying
SPLIT_MIN_ELEMENTS = 1 << 16


def split_resize(layer: Layer, net: Network) -> bool:
    """Whether the resize has a ``numba_split`` candidate (the table's ``threaded``)."""
    from ..kernels import threads as _threads

    shape = net.shape(layer.inputs[0])
    return (_threads.count() > 1 and len(shape) > 2 and int(np.prod(shape[:-2], dtype=np.int64)) > 1
            and net.tensors[layer.outputs[0]].size >= SPLIT_MIN_ELEMENTS)


def resize_split(layer: Layer, net: Network):
    """At more than one intra-op thread, large resizes with their planes claimed over numba's OpenMP
    team (``numba_split``), timed against the one-thread kernel."""
    from ..kernels import threads as _threads
    from .records import Candidate, Kernel

    if not split_resize(layer, net):
        return []
    return [Candidate("numba_split", lambda: Kernel(_resize_kernel(layer, net, _threads.count())), blas="omp")]


# -- sampling --------------------------------------------------------------------------------------------
def grid_sample(layer: Layer, net: Network):
    """srcore's compiled grid sampler (``srcore.plugin.grid_sample``, the cpu plugin's kernel too; its
    small tap tables allocated per call: a typed scratch view cost more, ~4 us each)."""
    from srcore.plugin import grid_sample as _gs

    sampler = _gs.GridSampler()
    mode, padding, align = layer.attrs["mode"], layer.attrs["padding"], layer.attrs["align_corners"]

    def run(x, grid, out):
        sampler(x, grid, mode, padding, align, out)
    return run


# -- lookups -------------------------------------------------------------------------------------------------
def _checked(index: np.ndarray, n: int, what: str) -> np.ndarray:
    if index.size and (index.min() < 0 or index.max() >= n):
        from srcore.plugin import KernelError

        bad = index[(index < 0) | (index >= n)].flat[0]
        raise KernelError(f"{what}: index {int(bad)} is out of range for a dim of size {n}")
    return index


def _lookup_index(layer: Layer, net: Network, default: str):
    """A lookup's ``dim`` and ``index(rest)``: its index from a run's inputs after ``x`` (``rest``),
    checked against that dim of ``x`` (a constant index once, here; an input's at every call)."""
    dim, const = layer.attrs["dim"], layer.attrs["index"]
    n = net.shape(layer.inputs[0])[dim]
    what = layer.source or default
    if const is not None:
        const = _checked(np.asarray(const, np.int64), n, what)
        return dim, lambda rest: const
    return dim, lambda rest: _checked(rest[0], n, what)


def index_select(layer: Layer, net: Network):
    """``x.index_select(dim, index)`` (an embedding: ``weight.index_select(0, indices)`` with the
    indices' shape in front of the row)."""
    dim, index = _lookup_index(layer, net, "index_select")

    def run(x, *rest):
        out = rest[-1]
        idx = index(rest)
        # checked above, so "clip" changes nothing; numpy's default "raise" buffers ``out`` first
        if dim == 0:
            np.take(x, idx.reshape(-1), axis=0, out=out.reshape((idx.size,) + x.shape[1:]), mode="clip")
        else:
            np.take(x, idx.reshape(-1), axis=dim, out=out, mode="clip")
    return run


def index_tensor(layer: Layer, net: Network):
    """``x[key]``, the key's entries at ``dims`` the index tensors (negative ones count from the
    end, as torch's; out of range: a ``KernelError``), slices elsewhere: numpy's advanced indexing
    is torch's, placement of the index dims included."""
    dims, shape = layer.attrs["dims"], net.shape(layer.inputs[0])
    what = layer.source or "index"
    rank = max(dims) + 1

    def run(x, *rest):
        key = [slice(None)] * rank
        for d, idx in zip(dims, rest[:-1]):
            n = shape[d]
            if idx.size and (idx.min() < -n or idx.max() >= n):
                _checked(np.where(idx < 0, idx + n, idx), n, what)
            key[d] = idx
        np.copyto(rest[-1], x[tuple(key)])
    return run


def gather(layer: Layer, net: Network):
    dim, index = _lookup_index(layer, net, "gather")

    def run(x, *rest):
        out = rest[-1]
        idx = index(rest)
        # torch's gather reads only the index's extent of the other dims of x
        xs = x[tuple(slice(0, s) if d != dim else slice(None) for d, s in enumerate(idx.shape))]
        np.copyto(out, np.take_along_axis(xs, idx, axis=dim))
    return run


def where(layer: Layer, net: Network):
    """``where(mask, a, b)``: ``a`` and ``b`` are ``("in", k)`` (the layer's k-th input) or
    ``("const", x)``; the mask is the last input, or a constant."""
    (a, b), const = layer.attrs["args"], layer.attrs["mask"]
    n_ops = sum(1 for arg in (a, b) if arg[0] == "in")

    def pick(arg, arrays):
        if arg[0] == "in":
            return arrays[arg[1]]
        return arg[1] if isinstance(arg[1], (bool, int)) else f32(arg[1])   # (an integer result's: exact)

    def run(*arrays):
        out = arrays[-1]
        mask = const if const is not None else arrays[n_ops]
        np.copyto(out, np.where(mask, pick(a, arrays), pick(b, arrays)))
    return run


def cumsum(layer: Layer, net: Network):
    dim = layer.attrs["dim"]

    def run(x, out):
        np.cumsum(x, axis=dim, dtype=out.dtype, out=out)   # (a mask counts in int64)
    return run


# -- sorting, scattering, comparing ------------------------------------------------------------------------
def sort_keys(x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    """The int64 indices that sort ``x`` along ``dim`` as torch's ``sort(stable=True)``: NaN above
    everything, -0.0 equal to 0.0, ties in input order (descending too)."""
    if descending and not np.issubdtype(x.dtype, np.floating):
        # integers: a stable ascending sort of the reversed line, reversed (ties back in input order)
        n = x.shape[dim]
        return n - 1 - np.flip(np.argsort(np.flip(x, dim), axis=dim, kind="stable"), dim)
    if descending:
        # a stable ascending sort of -x, NaNs first (numpy puts them last, in input order)
        nan = np.isnan(x)
        key = np.where(nan, np.float32(-np.inf), -x)
        order = np.argsort(key, axis=dim, kind="stable")
        first = np.argsort(~np.take_along_axis(nan, order, axis=dim), axis=dim, kind="stable")
        return np.take_along_axis(order, first, axis=dim)
    return np.argsort(x, axis=dim, kind="stable")


def sort(layer: Layer, net: Network):
    dim, descending = layer.attrs["dim"], layer.attrs["descending"]

    def run(x, values, indices):
        np.copyto(indices, sort_keys(x, dim, descending))
        np.copyto(values, np.take_along_axis(x, indices, axis=dim))
    return run


def topk(layer: Layer, net: Network):
    """The ``k`` first of :func:`sort_keys` (largest: descending); ties in input order."""
    dim, k, largest = layer.attrs["dim"], layer.attrs["k"], layer.attrs["largest"]
    first = (slice(None),) * dim + (slice(0, k),)

    def run(x, values, indices):
        np.copyto(indices, sort_keys(x, dim, largest)[first])
        np.copyto(values, np.take_along_axis(x, indices, axis=dim))
    return run


def argmax(layer: Layer, net: Network):
    """``argmax`` / ``argmin``: numpy's rule is torch's (the first extreme, the first NaN if any)."""
    dim, fn = layer.attrs["dim"], np.argmax if layer.attrs["largest"] else np.argmin
    last_nan = layer.attrs.get("last_nan", False)   # a max pool's index: the last NaN

    def run(x, out):
        i = fn(x, axis=dim)
        if last_nan:
            nan = np.isnan(x)
            i = np.where(nan.any(axis=dim), x.shape[dim] - 1 - np.argmax(np.flip(nan, dim), axis=dim), i)
        np.copyto(out, i.reshape(out.shape))
    return run


def _logsumexp(x, axis):
    """torch's ``logsumexp``: ``log(sum(exp(x - m))) + m`` with ``m`` the max, taken as 0 where it is
    infinite (a row of -inf gives -inf, one holding +inf gives +inf, not NaN)."""
    m = np.max(x, axis=axis, keepdims=True)
    if not np.isfinite(m).all():
        m[np.isinf(m)] = 0.0
    t = np.subtract(x, m)
    np.exp(t, out=t)
    s = np.add.reduce(t, axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):   # log(0) of a row of -inf: -inf, as torch
        np.log(s, out=s)
    s += m
    return s


def _int_sum(x, axis):
    return np.sum(x, axis=axis, dtype=np.int64)   # (integers sum in int64, torch's result dtype)


def reduce(layer: Layer, net: Network):
    """``amax`` / ``amin`` (NaN propagates: numpy's max), the int64 count of a mask or its
    ``any`` / ``all``, ``logsumexp``, over ``dims``."""
    dims, op = layer.attrs["dims"], layer.attrs["op"]
    fn = {"max": np.max, "min": np.min, "any": np.any, "all": np.all, "logsumexp": _logsumexp,
          "sum": np.add.reduce, "isum": _int_sum}.get(op)
    shape = net.shape(layer.inputs[0])
    if (op in ("max", "min") and net.tensors[layer.inputs[0]].dtype == "float32" and dims
            and sorted(d % len(shape) for d in dims) == list(range(len(shape) - len(dims), len(shape)))):
        lead, sign = math.prod(shape[:len(shape) - len(dims)]), np.float32(1.0 if op == "max" else -1.0)

        def run_rows(x, out):   # over trailing dims (a global max pool written as amax): compiled rows
            max_rows(x.reshape(lead, -1), out.reshape(lead), sign)
        return run_rows

    def run(x, out):
        if fn is None:
            np.copyto(out, np.count_nonzero(x, axis=dims).reshape(out.shape))
        else:
            np.copyto(out, fn(x, axis=dims).reshape(out.shape))
    return run


def logical_not(layer: Layer, net: Network):
    def run(x, out):
        np.logical_not(x, out=out)
    return run


def scatter(layer: Layer, net: Network):
    """``self.scatter(dim, index, src | value)`` / ``scatter_add``: ``self`` copied, then each
    index element's source element written to (added at) its position along ``dim``."""
    dim, add, value, const = (layer.attrs[k] for k in ("dim", "add", "value", "index"))
    n = net.shape(layer.inputs[0])[dim]
    what = layer.source or "scatter"
    if const is not None:
        const = _checked(np.asarray(const, np.int64), n, what)

    def run(x, *rest):
        out = rest[-1]
        idx = const if const is not None else _checked(rest[-2], n, what)
        np.copyto(out, x)
        grid = list(np.indices(idx.shape, sparse=True))
        src = f32(value) if value is not None else rest[0][tuple(slice(0, s) for s in idx.shape)]
        grid[dim] = idx
        if add:
            np.add.at(out, tuple(grid), src)
        else:
            out[tuple(grid)] = src
    return run


#: scatter_reduce's reductions: the ufunc combining a source element and the reduction's identity
_SCATTER_REDUCE = {"sum": (np.add, 0.0), "mean": (np.add, 0.0), "prod": (np.multiply, 1.0),
                   "amax": (np.maximum, -np.inf), "amin": (np.minimum, np.inf)}


def scatter_reduce(layer: Layer, net: Network):
    """``self.scatter_reduce(dim, index, src, reduce, include_self)`` (GNN aggregations): ``self``
    copied; without ``include_self`` the positions the index reaches start from the reduction's
    identity; each source element is combined in index order (``ufunc.at``; a NaN propagates through
    ``amax`` / ``amin`` as torch's); ``mean`` divides the reached positions by their count (plus one
    with ``include_self``), the others keep ``self``."""
    dim, op, include, const = (layer.attrs[k] for k in ("dim", "reduce", "include_self", "index"))
    fn, identity = _SCATTER_REDUCE[op]
    n = net.shape(layer.inputs[0])[dim]
    what = layer.source or "scatter_reduce"
    if const is not None:
        const = _checked(np.asarray(const, np.int64), n, what)

    def run(x, src, *rest):
        out = rest[-1]
        idx = const if const is not None else _checked(rest[-2], n, what)
        np.copyto(out, x)
        grid = list(np.indices(idx.shape, sparse=True))
        grid[dim] = idx
        at = tuple(grid)
        if not include:
            out[at] = f32(identity)
        fn.at(out, at, src[tuple(slice(0, s) for s in idx.shape)])
        if op == "mean":
            count = np.zeros(out.shape, np.float32)
            np.add.at(count, at, np.float32(1))
            if include:
                count += count > 0
            np.divide(out, count, out=out, where=count > 0)
    return run


def searchsorted(layer: Layer, net: Network):
    """``searchsorted(seq, values, right, sorter)`` / ``bucketize(values, seq, right)``: torch's binary
    search (``cus_lower_bound`` / ``cus_upper_bound``: ``!(mid >= v)`` / ``!(mid > v)`` moves right),
    every value's search a step of one vectorized loop (``bit_length(M)`` halvings), so a NaN value
    lands past the end and a NaN boundary steers the search as it does torch's; a 1-D ``seq`` is
    searched by every value, an N-D one row by row (the values' matching row); ``sorter`` (a
    constant or an input of ``seq``'s shape) reads ``seq`` through it."""
    right, const, shift = layer.attrs["right"], layer.attrs["sorter"], layer.attrs.get("shift", 0)
    seq_shape = net.shape(layer.inputs[0])
    m = seq_shape[-1] if seq_shape else 0
    rows = math.prod(seq_shape[:-1]) if len(seq_shape) > 1 else 1
    what = layer.source or "searchsorted"
    if const is not None:
        const = _checked(np.asarray(const, np.int64), m, what).reshape(rows, m)
    has_sorter = const is not None or len(layer.inputs) > 2

    def run(seq, values, *rest):
        out = rest[-1]
        if not out.size:
            return
        v = values.reshape(rows, -1)
        s = seq.reshape(rows, m)
        sorter = None
        if has_sorter:
            sorter = const if const is not None else _checked(rest[0], m, what).reshape(rows, m)
        start = np.zeros(v.shape, np.int64)
        end = np.full(v.shape, m, np.int64)
        row = np.arange(rows)[:, None]
        for _ in range(m.bit_length()):
            active = start < end
            mid = start + ((end - start) >> 1)
            at = np.minimum(mid, m - 1)   # (a finished search's mid may be m: read anything, keep nothing)
            mv = s[row, sorter[row, at] if sorter is not None else at]
            with np.errstate(invalid="ignore"):
                go = ~(mv > v) if right else ~(mv >= v)
            start = np.where(active & go, mid + 1, start)
            end = np.where(active & ~go, mid, end)
        np.copyto(out, (start + shift).reshape(out.shape), casting="unsafe")
    return run


def searchsorted_compiled(layer: Layer, net: Network):
    """:func:`searchsorted` as one compiled loop per value (:func:`..kernels.search_scatter.search_rows`)."""
    from ..kernels.search_scatter import search_rows

    right, const, shift = layer.attrs["right"], layer.attrs["sorter"], layer.attrs.get("shift", 0)
    seq_shape = net.shape(layer.inputs[0])
    m = seq_shape[-1] if seq_shape else 0
    rows = math.prod(seq_shape[:-1]) if len(seq_shape) > 1 else 1
    what = layer.source or "searchsorted"
    computed = const is None and len(layer.inputs) > 2
    sorter = np.zeros((1, 1), np.int64) if const is None else \
        np.ascontiguousarray(_checked(np.asarray(const, np.int64), m, what).reshape(rows, m))
    use = const is not None or computed

    def run(seq, values, *rest):
        out = rest[-1]
        if not out.size:
            return
        s = _checked(rest[0], m, what).reshape(rows, m) if computed else sorter
        search_rows(seq.reshape(rows, m), values.reshape(rows, -1), s, use, right, shift, out.reshape(rows, -1))
    return run


_SCATTER_OPS = {"sum": 0, "mean": 1, "prod": 2, "amax": 3, "amin": 4}


def scatter_reduce_compiled(layer: Layer, net: Network):
    """:func:`scatter_reduce` compiled (:func:`..kernels.search_scatter.scatter_reduce3`) when the
    index has the source's shape and ``self``'s but along ``dim`` (embedding bags, GNN
    aggregations): the three as (outer, n, inner) views; else None (the numpy tactic)."""
    from ..kernels.search_scatter import scatter_reduce3

    dim, op, include, const = (layer.attrs[k] for k in ("dim", "reduce", "include_self", "index"))
    xs, ss = net.shape(layer.inputs[0]), net.shape(layer.inputs[1])
    ishape = tuple(np.shape(const)) if const is not None else net.shape(layer.inputs[2])
    if ishape != ss or len(xs) != len(ss) or any(a != b for d, (a, b) in enumerate(zip(xs, ss)) if d != dim):
        return None
    n, what = xs[dim], layer.source or "scatter_reduce"
    outer, inner = math.prod(xs[:dim]), math.prod(xs[dim + 1:])
    view = (outer, ss[dim], inner)
    if const is not None:
        const = np.ascontiguousarray(_checked(np.asarray(const, np.int64), n, what).reshape(view))
    code = _SCATTER_OPS[op]
    no_count = np.zeros((1, 1, 1), np.float32)

    def run(x, src, *rest):
        out = rest[-1]
        idx = const if const is not None else rest[-2].reshape(view)
        np.copyto(out, x)
        count = np.zeros((outer, n, inner), np.float32) if code == 1 else no_count
        bad = scatter_reduce3(out.reshape(outer, n, inner), src.reshape(view), idx, code, include, count)
        if bad >= 0:   # (checked in the kernel: a numpy min / max cost more than the scatter)
            raise KernelError(f"{what}: index {int(idx.flat[bad])} is out of range for a dim of size {n}")
    return run


_COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
            "ne": np.not_equal}


def compare(layer: Layer, net: Network):
    """``a < b`` and the like: a bool mask; ``a``, ``b`` as in :func:`where`."""
    (a, b), fn = layer.attrs["args"], _COMPARE[layer.attrs["op"]]

    def pick(arg, arrays):
        if arg[0] == "in":
            return arrays[arg[1]]
        return arg[1] if isinstance(arg[1], int) else f32(arg[1])   # (an integer tensor's: exact)

    def run(*arrays):
        fn(pick(a, arrays), pick(b, arrays), out=arrays[-1])
    return run


def channel_gather(layer: Layer, net: Network):
    """``builder/shuffle.py``'s fused channel shuffle: every output plane copied from its input
    plane (:func:`..kernels.channel_gather.gather_planes`), one compiled call."""
    from ..kernels.channel_gather import gather_planes

    table, n_in = layer.attrs["table"], len(layer.inputs)
    if any(len(net.shape(t)) != 4 for t in layer.inputs + layer.outputs):
        return None

    def run(*arrays):
        gather_planes(arrays[:n_in], arrays[n_in:], table)
    return run

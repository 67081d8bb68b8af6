"""``nn.EmbeddingBag`` (``aten::embedding_bag``, ``.padding_idx``): per-bag sums, means or maxima of
embedding rows (recommendation models' sparse features), on 1-D indices with bag ``offsets``.

The three auxiliary outputs follow torch's CPU shapes: ``offset2bag`` (the bag of each index; empty
for ``sum`` without ``padding_idx``), ``bag_size`` and ``max_indices`` (the argmax rows for ``max``);
models use output 0.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError, NodeInfo, Specialized, TensorType

SUM, MEAN, MAX = 0, 1, 2


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None, out=None):
    """``aten::embedding_bag`` / ``.padding_idx`` (``padding_idx`` rows count in no bag)."""
    if indices.ndim != 1 or offsets.ndim != 1:
        raise KernelError("embedding_bag: expected 1-D indices and offsets (2-D inputs are flattened by F.embedding_bag)")
    if per_sample_weights is not None and mode != SUM:
        raise KernelError("embedding_bag: per_sample_weights are only supported for mode='sum'")
    n, d = indices.shape[0], weight.shape[1]
    if n and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        raise KernelError(f"embedding_bag: index out of range for {weight.shape[0]} embeddings")
    _check_offsets(offsets, n)
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    starts = offsets[:bags]
    ends = offsets[1:bags + 1] if include_last_offset else np.append(offsets[1:], n)
    pos = np.arange(n)
    bag_of = np.searchsorted(starts, pos, side="right") - 1          # -1: before the first bag
    inbag = (bag_of >= 0) & (pos < (ends[np.maximum(bag_of, 0)] if bags else 0))
    use = inbag & (np.ones(n, bool) if padding_idx is None else indices != padding_idx % weight.shape[0])
    offset2bag = np.maximum(bag_of, 0).astype(np.int64)
    rows = weight[indices]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[:, None]
    output = np.zeros((bags, d), weight.dtype)
    counts = np.bincount(offset2bag[use], minlength=bags).astype(np.int64)
    max_indices = None
    if mode in (SUM, MEAN):
        np.add.at(output, offset2bag[use], rows[use])
        if mode == MEAN:
            np.divide(output, np.maximum(counts, 1)[:, None].astype(weight.dtype), out=output)
    elif mode == MAX:
        max_indices = np.zeros((bags, d), np.int64)
        for b in range(bags):
            sel = np.nonzero(use & (offset2bag == b))[0]
            if sel.size:   # torch's rule, row by row: a greater one wins (a later NaN never does)
                output[b] = rows[sel[0]]
                max_indices[b] = indices[sel[0]]
                for p in sel[1:]:
                    gt = rows[p] > output[b]
                    output[b][gt] = rows[p][gt]
                    max_indices[b][gt] = indices[p]
    else:
        raise KernelError(f"embedding_bag: unknown mode {mode}")
    if mode == SUM:   # torch's fast sum path leaves offset2bag empty unless a padding_idx is given
        aux = (np.zeros(0, np.int64) if padding_idx is None else offset2bag,
               np.zeros(offsets.shape[0], np.int64), np.zeros(offsets.shape[0], np.int64))
    elif mode == MEAN:
        aux = (offset2bag, counts, counts.copy())
    else:
        aux = (offset2bag, counts, max_indices)
    result = (output,) + aux
    if out is None:
        return result
    for o, r in zip(out, result):
        np.copyto(o, r)
    return out


def _check_offsets(offsets, n: int) -> None:
    """torch's rules for bag offsets: the first is 0, none past the ``n`` indices, none decreasing."""
    if not offsets.shape[0]:
        return
    if offsets[0] != 0:
        raise KernelError(f"embedding_bag: offsets[0] has to be 0 (the first bag starts at the first index), "
                          f"got {int(offsets[0])}")
    if offsets[-1] > n:
        raise KernelError(f"embedding_bag: offsets[-1] can not be greater than the indices' length {n}, "
                          f"got {int(offsets[-1])}")
    if offsets.shape[0] > 1 and (np.diff(offsets) < 0).any():
        raise KernelError("embedding_bag: offsets must not decrease")


# --- the compiled gather-reduce (``jit_embedding_bag.py``, numba) ----------------------------------

_JIT_WEIGHTS, _JIT_IDS = ("float32", "float64"), ("int32", "int64")


def embedding_bag_matcher(node: NodeInfo):
    """``embedding_bag`` on 1-D ids and offsets with constant mode, ``include_last_offset`` and
    ``padding_idx``, float weights and int32/64 ids: the compiled gather-reduce (compiled now);
    None otherwise (the numpy kernel)."""
    if len(node.args) < 3:
        return None
    w, ids, offs = (node.args[k].type for k in range(3))
    if not all(isinstance(t, TensorType) and t.shape is not None for t in (w, ids, offs)):
        return None
    if w.dtype not in _JIT_WEIGHTS or ids.dtype not in _JIT_IDS or offs.dtype not in _JIT_IDS:
        return None
    if len(w.shape) != 2 or len(ids.shape) != 1 or len(offs.shape) != 1:
        return None
    named = {a.name: a for a in node.args}
    if not (node.is_const("mode") and node.is_const("include_last_offset")) or \
            "padding_idx" in named and not named["padding_idx"].is_constant:
        return None
    mode, last = int(node.const("mode")), bool(node.const("include_last_offset"))
    pad = named["padding_idx"].value if "padding_idx" in named else None
    psw = named["per_sample_weights"].type if "per_sample_weights" in named else None
    if mode not in (SUM, MEAN, MAX) or isinstance(psw, TensorType) and (mode != SUM or psw.dtype != w.dtype):
        return None
    from .jit_embedding_bag import BAD_WEIGHTS, OUT_OF_RANGE, UNSORTED, bag_kernel

    kernel = bag_kernel(w.dtype, ids.dtype, offs.dtype)
    wdt = np.dtype(w.dtype)
    ids_dt, offs_dt = np.dtype(ids.dtype), np.dtype(offs.dtype)
    none = np.zeros(0, wdt)

    def embedding_bag_jit(weight, indices, offsets, per_sample_weights=None, out=None):
        psw = none if per_sample_weights is None else per_sample_weights
        if (weight.dtype != wdt or psw.dtype != wdt or indices.dtype != ids_dt or offsets.dtype != offs_dt
                or indices.ndim != 1 or offsets.ndim != 1
                or not (weight.flags.c_contiguous and indices.flags.c_contiguous and offsets.flags.c_contiguous
                        and psw.flags.c_contiguous)
                or out is not None and not all(o.flags.c_contiguous for o in out)):
            return embedding_bag(weight, indices, offsets, False, mode, False, per_sample_weights, last, pad, out=out)
        n, no = indices.shape[0], offsets.shape[0]
        bags = no - (1 if last else 0)
        res = out if out is not None else _outputs(weight, n, no, bags, mode, pad is not None)
        code = kernel(weight, indices, offsets, psw, per_sample_weights is not None, mode, bags,
                      -1 if pad is None else pad % weight.shape[0], res[0], res[1], res[2], res[3].reshape(-1))
        if code == OUT_OF_RANGE:
            raise KernelError(f"embedding_bag: index out of range for {weight.shape[0]} embeddings")
        if code == BAD_WEIGHTS:
            raise KernelError(f"embedding_bag: {psw.shape[0]} per_sample_weights for {indices.shape[0]} indices")
        if code == UNSORTED:   # (the numpy kernel names what is wrong with the offsets, if anything)
            return embedding_bag(weight, indices, offsets, False, mode, False, per_sample_weights, last, pad, out=out)
        return res
    return Specialized(embedding_bag_jit, args=(0, 1, 2), kwargs=(("per_sample_weights", 6),))


def _outputs(weight, n: int, no: int, bags: int, mode: int, padded: bool) -> tuple:
    """The four outputs of torch's CPU shapes (the shape rule's): output, offset2bag, bag_size, max_indices."""
    i64 = np.int64
    if mode == SUM:
        return (np.empty((bags, weight.shape[1]), weight.dtype), np.empty(n if padded else 0, i64),
                np.empty(no, i64), np.empty(no, i64))
    return (np.empty((bags, weight.shape[1]), weight.dtype), np.empty(n, i64), np.empty(bags, i64),
            np.empty((bags, weight.shape[1]) if mode == MAX else bags, i64))

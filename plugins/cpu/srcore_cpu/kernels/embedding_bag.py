"""``nn.EmbeddingBag`` (``aten::embedding_bag``, ``.padding_idx``): per-bag sums, means or maxima of
embedding rows (recommendation models' sparse features), on 1-D indices with bag ``offsets``.

The three auxiliary outputs follow torch's CPU shapes: ``offset2bag`` (the bag of each index; empty
for ``sum`` without ``padding_idx``), ``bag_size`` and ``max_indices`` (the argmax rows for ``max``);
models use output 0.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

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
            if sel.size:
                arg = np.argmax(rows[sel], axis=0)
                output[b] = rows[sel][arg, np.arange(d)]
                max_indices[b] = indices[sel][arg]
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

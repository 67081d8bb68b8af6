"""Row-wise quantized embeddings: ``quantized::embedding_bag_{byte,4bit,2bit}_rowwise_offsets`` and
``quantized::qembedding_{byte,4bit}`` (``nn.quantized.EmbeddingBag`` / ``Embedding`` unpacked), as
fbgemm's ``EmbeddingSpMDM`` kernels compute them, bit for bit.

The weight is torch's fused row-wise layout (a uint8 matrix): each row holds its values (8-bit; or
4 / 2 bits packed low bits first) followed by its scale and bias (float32 for 8-bit, float16 for the
others). A bag's sum runs over its rows in order as ``out = fma(scale, q, out + bias)`` in float32,
scale and bias first multiplied by the row's per-sample weight if there is one.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from ._common import F32

#: bits per value -> bytes of the scale and bias at the end of a row
_SCALE_BIAS_BYTES = {8: 8, 4: 4, 2: 4}


def rows_layout(weight: np.ndarray, bits: int, op: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(values, scales, biases)`` of a fused row-wise weight: the values as uint8 (N, D), scale and
    bias per row as float32 (N,)."""
    if not isinstance(weight, np.ndarray) or weight.dtype != np.uint8 or weight.ndim != 2:
        raise KernelError(f"{op}: the weight must be a 2-D uint8 matrix of fused rows (torch's "
                          f"embedding_bag_{'byte' if bits == 8 else f'{bits}bit'}_prepack), got "
                          f"{getattr(weight, 'dtype', type(weight))}{list(getattr(weight, 'shape', ()))}")
    sb = _SCALE_BIAS_BYTES[bits]
    n_bytes = weight.shape[1] - sb
    if n_bytes < 0:
        raise KernelError(f"{op}: a fused row of {weight.shape[1]} bytes has no room for its scale and bias")
    tail = np.ascontiguousarray(weight[:, n_bytes:])
    scale_bias = tail.view(np.float32 if bits == 8 else np.float16).astype(F32)
    data = weight[:, :n_bytes]
    if bits != 8:
        per = 8 // bits
        mask = (1 << bits) - 1
        data = np.stack([(data >> (bits * k)) & mask for k in range(per)], axis=-1).reshape(weight.shape[0], -1)
    return data, scale_bias[:, 0], scale_bias[:, 1]


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 ``fma(a, b, c)``, correctly rounded: ``a * b`` (float32 times an integer below 256) is
    exact in float64 and the sum is rounded once there; where that rounding left the float64 exactly
    halfway between two float32 values while the exact sum is not, it is nudged to the exact sum's
    side before the rounding to float32 (so no double rounding)."""
    p = a.astype(np.float64) * b
    c = c.astype(np.float64)
    r = p + c
    bb = r - p
    err = (p - (r - bb)) + (c - bb)                     # exact: r + err == p + c (TwoSum)
    r32 = r.astype(F32)
    toward = np.nextafter(r32, np.where(r > r32, F32(np.inf), F32(-np.inf))).astype(np.float64)
    tie = (err != 0) & (r != r32) & (2 * (r - r32) == toward - r32)
    if tie.any():
        r = np.where(tie, np.nextafter(r, np.where(err > 0, np.inf, -np.inf)), r)
        r32 = r.astype(F32)
    return r32


def _bags(indices: np.ndarray, offsets, include_last_offset: bool, op: str) -> tuple[np.ndarray, np.ndarray]:
    """(flat indices, bag starts with the end appended)."""
    if offsets is None:
        if indices.ndim != 2:
            raise KernelError(f"{op}: without offsets the indices must be 2-D (one bag per row), got "
                              f"{indices.ndim}-D")
        n, length = indices.shape
        return indices.reshape(-1), np.arange(n + 1, dtype=np.int64) * length
    if indices.ndim != 1:
        raise KernelError(f"{op}: with offsets the indices must be 1-D, got {indices.ndim}-D")
    off = np.asarray(offsets).astype(np.int64).reshape(-1)
    if not include_last_offset:
        off = np.append(off, np.int64(indices.shape[0]))
    # torch's float embedding_bag requires offsets[0] == 0; its quantized kernels do not check and read
    # such bags differently (8-bit from offsets[0], 4-bit from 0): refused, not guessed
    if off.size < 1 or (off.size > 1 and (off[0] != 0 or np.any(np.diff(off) < 0) or off[-1] > indices.shape[0])):
        raise KernelError(f"{op}: offsets must start at 0, not decrease and not pass the {indices.shape[0]} "
                          f"indices, got {np.asarray(offsets).tolist()[:16]}")
    return indices.reshape(-1), off


def embedding_bag(weight, indices, offsets, bits: int, per_sample_weights=None, include_last_offset=False,
                  pruned_weights=False, compressed_indices_mapping=None, op: str = "quantized::embedding_bag"
                  ) -> np.ndarray:
    """Sums of bags of rows of a fused row-wise weight, float32 (num_bags, D)."""
    data, scales, biases = rows_layout(weight, bits, op)
    idx, off = _bags(np.asarray(indices), offsets, bool(include_last_offset), op)
    idx = idx.astype(np.int64)
    w = None
    if per_sample_weights is not None:
        w = np.asarray(per_sample_weights, F32).reshape(-1)
        if w.shape[0] != idx.shape[0]:
            raise KernelError(f"{op}: per_sample_weights has {w.shape[0]} values for {idx.shape[0]} indices")
    n_bags, dim = off.size - 1, data.shape[1]
    out = np.zeros((n_bags, dim), F32)
    if n_bags == 0 or off[-1] == off[0]:
        return out
    idx = idx.copy()
    used = slice(0, int(off[-1]))                  # indices after the last bag are never read
    keep = None
    if pruned_weights and compressed_indices_mapping is not None:
        mapping = np.asarray(compressed_indices_mapping).astype(np.int64).reshape(-1)
        if not (mapping.size == 1 and mapping[0] == 0):   # torch's marker for "not pruned after all"
            _check_range(idx[used], mapping.size, op, "compressed_indices_mapping")
            idx[used] = mapping[idx[used]]
            keep = idx != -1                        # a pruned row adds nothing
            idx[~keep] = 0
    _check_range(idx[used], data.shape[0], op, "weight")
    idx[used.stop:] = 0
    lengths = np.diff(off)
    s, b = scales[idx], biases[idx]
    if w is not None:
        s, b = (s * w).astype(F32), (b * w).astype(F32)
    rows = data[idx]
    # position t of every bag at once: bags are summed in their own order, one row per step
    for t in range(int(lengths.max())):
        bags = np.nonzero(lengths > t)[0]
        at = off[bags] + t
        if keep is not None:
            use = keep[at]
            bags, at = bags[use], at[use]
        acc = (out[bags] + b[at, None]).astype(F32)
        out[bags] = _fma(s[at, None], rows[at], acc)
    return out


def _check_range(idx: np.ndarray, n: int, op: str, what: str) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise KernelError(f"{op}: index {int(bad)} is out of range for the {n} rows of the {what}")


def _bag_kernel(bits: int, name: str):
    op = f"quantized::{name}"

    def kernel(weight, indices, offsets=None, scale_grad_by_freq=False, mode=0, pruned_weights=False,
               per_sample_weights=None, compressed_indices_mapping=None, include_last_offset=False, *, out=None):
        if int(mode) != 0:
            raise KernelError(f"{op}: mode={mode} is not supported (torch 2.13 sums whatever the mode)")
        res = embedding_bag(weight, indices, offsets, bits, per_sample_weights, include_last_offset,
                            pruned_weights, compressed_indices_mapping, op)
        if out is None:
            return res
        out[...] = res
        return out
    kernel.__name__ = kernel.__qualname__ = f"{name}_out"
    kernel.__doc__ = f"``{op}``: sums of bags of {bits}-bit fused rows (fbgemm's EmbeddingSpMDM)."
    return kernel


embedding_bag_byte_rowwise_offsets_out = _bag_kernel(8, "embedding_bag_byte_rowwise_offsets")
embedding_bag_4bit_rowwise_offsets_out = _bag_kernel(4, "embedding_bag_4bit_rowwise_offsets")
embedding_bag_2bit_rowwise_offsets_out = _bag_kernel(2, "embedding_bag_2bit_rowwise_offsets")


def _lookup_kernel(bits: int, name: str):
    op = f"quantized::{name}"

    def kernel(weight, indices, pruned_weights=False, *, out=None):
        if pruned_weights:
            raise KernelError(f"{op}: pruned weights are not supported (torch's embedding lookup takes no "
                              "compressed indices mapping)")
        idx = np.asarray(indices)
        data, scales, biases = rows_layout(weight, bits, op)
        flat = idx.reshape(-1).astype(np.int64)
        _check_range(flat, data.shape[0], op, "weight")
        res = _fma(scales[flat, None], data[flat], np.broadcast_to(biases[flat, None], (flat.size, data.shape[1])))
        res = res.reshape(idx.shape + (data.shape[1],))
        if out is None:
            return res
        out[...] = res
        return out
    kernel.__name__ = kernel.__qualname__ = f"{name}_out"
    kernel.__doc__ = (f"``{op}``: rows of {bits}-bit fused rows looked up, ``fma(scale, q, bias)`` "
                      "(torch's embedding lookup: the bag kernel with one row per bag).")
    return kernel


qembedding_byte_out = _lookup_kernel(8, "qembedding_byte")
qembedding_4bit_out = _lookup_kernel(4, "qembedding_4bit")

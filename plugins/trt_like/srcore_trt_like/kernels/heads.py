"""Multi-head attention on small heads as one compiled call (the ``attention_heads`` layer's
``numba`` tactic): per batch and head, the scores ``Q_h K_h^T``, ``softmax(S / c + mask)``
(:func:`.rows.softmax_rows_biased`, torch's order; rows of up to :data:`BLOCK_KEYS` keys as one
block, :func:`.rows.softmax_block_biased`) and ``P V_h`` written into the head's columns.

For BERT-sized heads on short sequences (bert_pooler: 2 x 4 heads of 12 x 8) each BLAS call costs
more than its arithmetic (the numpy tactic: 36 us a layer, ~4.5 us per head); here the whole layer
is a few thousand multiply-adds in one call. Long sequences stay with BLAS by timing.
"""
from __future__ import annotations

import numba
import numpy as np

from .jit import ROWS_JIT
from .rows import softmax_block_biased, softmax_rows_biased

f32 = np.float32
#: the longest score rows exponentiated as one block: the per-row kernel's vector loops and scalar
#: tails cost more below this (Sapphire Rapids, CPU time, one (L, S) head: 20 keys 1.5 vs 3.9 us,
#: 32 keys 2.2 vs 5.8, 49 keys 4.6 vs 9.2, 64 keys 7.2 vs 11.4; the same results bit for bit)
BLOCK_KEYS = 64


@numba.njit(**ROWS_JIT)
def attention_heads(q, k, v, mask, step, c, divide, safe, heads, kt, s, p, mxs, out):
    """``out[b, :, h*D:(h+1)*D] = softmax(q_h k_h^T / c + mask) v_h`` (``divide``; else ``* c``) for
    every batch ``b`` and head ``h`` of the (B, L, E) / (B, S, E) projections; ``mask`` is
    (Bm, Hm, Lm, S) with Bm, Hm in (1, B / H) and ``step`` its row step (0: Lm == 1); ``kt``
    (D, S), ``s`` and ``p`` (L, S) and ``mxs`` (L) are scratch; ``safe``: fully masked rows give
    zeros (``scaled_dot_product_attention``), else NaN (``softmax``)."""
    B, L, E = q.shape
    S = k.shape[1]
    D = E // heads
    for b in range(B):
        mb = b if mask.shape[0] > 1 else 0
        for h in range(heads):
            c0 = h * D
            for j in range(S):          # K_h^T: the score rows vectorize over keys
                for d in range(D):
                    kt[d, j] = k[b, j, c0 + d]
            for i in range(L):
                srow = s[i]
                for j in range(S):
                    srow[j] = f32(0.0)
                for d in range(D):
                    qv = q[b, i, c0 + d]
                    ktd = kt[d]
                    for j in range(S):
                        srow[j] += qv * ktd[j]
            m = mask[mb, h if mask.shape[1] > 1 else 0]
            if S <= BLOCK_KEYS:
                softmax_block_biased(s, p, c, divide, m, step, mxs, safe)
            else:
                softmax_rows_biased(s, p, c, divide, m, step, safe)
            for i in range(L):
                orow = out[b, i, c0:c0 + D]
                for d in range(D):
                    orow[d] = f32(0.0)
                prow = p[i]
                for j in range(S):
                    pv = prow[j]
                    vrow = v[b, j, c0:c0 + D]
                    for d in range(D):
                        orow[d] += pv * vrow[d]

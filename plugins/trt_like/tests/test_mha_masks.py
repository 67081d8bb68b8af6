"""``nn.MultiheadAttention`` off torch's fast path (sequence first, masks, weights asked for) in
trt_like engines: ``F.multi_head_attention_forward``'s key padding mask made float in place
(``zeros_like(...).masked_fill_``, functionalized), ``unflatten`` of the packed projection,
``scaled_dot_product_attention`` with the merged mask, ``baddbmm`` when the weights are returned.
Every case has a batch entry whose keys are all padded: torch gives that row zeros through SDPA
(``need_weights=False``) and NaN through its softmax (``need_weights=True``); so must the engine."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn


#: no timing, and no network compiled whole (seconds of numba per model): the layers' own kernels
_FAST = {"timing": False, "exclude_tactics": ["segment"]}


class MHA(nn.Module):
    def __init__(self, attn_mask: bool, float_masks: bool):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2)
        self.use_mask = attn_mask
        causal = torch.ones(5, 5, dtype=torch.bool).triu(1)   # True: masked, as key_padding_mask
        self.register_buffer("causal", torch.zeros(5, 5).masked_fill(causal, float("-inf")) if float_masks else causal)

    def forward(self, x, pad):
        mask = self.causal if self.use_mask else None
        return self.attn(x, x, x, key_padding_mask=pad, attn_mask=mask, need_weights=False)[0] + 1.0


class MHAWeights(MHA):
    def forward(self, x, pad):
        mask = self.causal if self.use_mask else None
        y, w = self.attn(x, x, x, key_padding_mask=pad, attn_mask=mask)
        return y + 1.0, w


def _inputs(float_pad: bool):
    x = torch.randn(5, 2, 16, generator=torch.Generator().manual_seed(3))
    pad = torch.tensor([[False, False, False, True, True], [True] * 5])   # entry 1: every key padded
    return x, (torch.zeros(pad.shape).masked_fill(pad, float("-inf")) if float_pad else pad)


@pytest.mark.parametrize("need_weights, float_pad, attn_mask, path", [
    (False, False, False, "script"),   # mha_no_weights' self-attention: SDPA, zeros for the padded entry
    (True, True, True, "trace"),       # the weights returned (baddbmm + softmax: NaN there), float masks merged
    pytest.param(True, False, False, "trace", marks=pytest.mark.full),
    pytest.param(False, True, True, "trace", marks=pytest.mark.full),
    pytest.param(True, True, True, "script", marks=pytest.mark.full),
    pytest.param(False, False, True, "script", marks=pytest.mark.full),
    pytest.param(True, False, True, "trace", marks=pytest.mark.full),
])
def test_masked_multihead_attention_is_one_engine_and_matches_torch(need_weights, float_pad, attn_mask, path):
    torch.manual_seed(4)
    m = (MHAWeights if need_weights else MHA)(attn_mask, float_pad).eval()
    x, pad = _inputs(float_pad)
    mod = torch.jit.script(m) if path == "script" else torch.jit.trace(m, (x, pad), check_trace=False)
    sm = srcore.StaticModule(srcore.from_torchscript(mod, (x, pad)), options=srcore.Options(
        backends=("trt_like", "cpu"), engine_options=_FAST))
    assert not sm.partition.refused and len(sm.partition.engines) == 1, sm.partition.format()
    with torch.no_grad():
        want = m(x, pad)
    want = [t.numpy() for t in (want if need_weights else (want,))]
    got = sm(x.numpy(), pad.numpy())
    got = list(got) if need_weights else [got]
    dead = np.isnan(want[0][:, 1])
    assert dead.all() if need_weights else not dead.any()   # what torch does with the padded entry
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)   # NaN where torch has NaN


@pytest.mark.parametrize("alpha, beta, bias_shape", [(1.0, 1.0, (16, 16)), (0.25, 0.5, (4, 16, 16)), (0.5, 0.0, (16, 16))])
def test_baddbmm_matches_torch(alpha, beta, bias_shape):
    """MobileViT's ``baddbmm(bias, q, k^T, alpha=1/sqrt(d))``: in the engine, as torch computes it
    (``beta`` 0 ignores the bias, NaN included)."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.alpha, self.beta = alpha, beta
            self.register_buffer("bias", torch.randn(bias_shape))
            if beta == 0.0:
                self.bias[0, 0] = float("nan")

        def forward(self, q, k):
            return torch.baddbmm(self.bias, q, k.transpose(1, 2), beta=self.beta, alpha=self.alpha).softmax(-1)

    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(4, 16, 8, generator=g), torch.randn(4, 16, 8, generator=g)
    m = M().eval()
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (q, k)), options=srcore.Options(
        backends=("trt_like", "cpu"), engine_options=_FAST))
    assert not sm.partition.refused, sm.partition.format()
    with torch.no_grad():
        want = m(q, k).numpy()
    np.testing.assert_allclose(sm(q.numpy(), k.numpy()), want, rtol=1e-5, atol=1e-6)

"""Written-out multi-head attention fused into one layer (builder/attention_fusion.py): BERT's
form (separate projections, scores divided or multiplied, an additive mask) becomes
``attention_heads`` (tactics/attention.py: MKL and numpy, each against torch), torch's packed
in-projection form the packed ``attention`` layer; and attentions the pattern must leave alone."""
from __future__ import annotations

import math

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn


class Bert(nn.Module):
    def __init__(self, d, heads, divide=True, leak=False, contiguous=False):
        super().__init__()
        self.h, self.dh, self.divide, self.leak, self.contiguous = heads, d // heads, divide, leak, contiguous
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.h, self.dh).transpose(1, 2)

    def forward(self, x, bias):
        b, t, d = x.shape
        s = torch.matmul(self.split(self.q(x)), self.split(self.k(x)).transpose(-1, -2))
        s = s / math.sqrt(self.dh) if self.divide else s * (1.0 / math.sqrt(self.dh))
        p = torch.softmax(s + bias, dim=-1)
        y = torch.matmul(p, self.split(self.v(x))).transpose(1, 2)
        # HF BERT's .contiguous().view(): a reshape to the same shape, then the real one
        y = (y.contiguous().view(y.size()[:-2] + (d,)) if self.contiguous else y.reshape(b, t, d)) + 1.0
        return (y, p) if self.leak else y     # leak: the probabilities are an output, no fusion


class Packed(nn.Module):
    """transformer_block_explicit's attention: one (B, L, 3E) projection taken apart."""

    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        p = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dh)), dim=-1)
        return torch.matmul(p, v).transpose(1, 2).reshape(b, t, d) + 1.0


def _engine(m, args, exclude=()):
    model = srcore.from_torchscript(torch.jit.trace(m, args), args)
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={"exclude_tactics": list(exclude), "timing": False})
    sm = srcore.StaticModule(model, options=opts)
    return sm, "\n".join(e.description for e in sm.partition.engines)


def _mask(shape, seed):
    keep = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.3
    return (~keep).float() * -10000.0


@pytest.mark.parametrize("B, L, d, heads, mask_shape, divide, tactic", [
    (1, 40, 64, 4, (1, 1, 1, 40), True, "mkl"),      # BERT's padding mask, 40 keys: a vector and a tail
    (1, 40, 64, 4, (1, 1, 1, 40), True, "numpy"),
    (2, 17, 48, 3, (2, 1, 1, 17), False, "mkl"),     # a mask per batch entry; the scale multiplies
    (2, 24, 32, 2, (1, 2, 24, 24), True, "numpy"),   # a mask per head and query row
    (2, 12, 32, 4, (2, 1, 1, 12), True, "numba"),    # short rows: the softmax as one block
    (1, 20, 24, 2, (1, 2, 20, 20), False, "numba"),  # rows of 20: still one block
    (1, 70, 16, 2, (1, 1, 1, 70), True, "numba"),    # rows over BLOCK_KEYS: the row softmax
])
def test_bert_attention_is_one_layer_and_matches_torch(B, L, d, heads, mask_shape, divide, tactic):
    from srcore_trt_like.kernels import mkl

    if tactic == "mkl" and mkl.library() is None:
        pytest.skip("no MKL")
    torch.manual_seed(L)
    m = Bert(d, heads, divide, contiguous=tactic == "numba").eval()
    x, bias = torch.randn(B, L, d), _mask(mask_shape, L)
    sm, desc = _engine(m, (x, bias), exclude=[t for t in ("mkl", "mkl_heads_team", "mkl_heads_omp", "numpy", "numba") if t != tactic])
    assert f"attention_heads -> {B}x{L}x{d} [{tactic}]" in desc, desc
    assert desc.count("attention_heads") == 1 and "softmax" not in desc and "permute" not in desc, desc
    with torch.no_grad():
        want = m(x, bias).numpy()
    np.testing.assert_allclose(sm(x.numpy(), bias.numpy()), want, rtol=1e-4, atol=1e-5)


SPLITS = ("mkl_heads_team", "mkl_heads_omp")


@pytest.mark.parametrize("tactic, B, L, d, heads, mask_shape", [
    ("mkl_heads_team", 2, 17, 48, 3, (2, 1, 1, 17)),
    # numba's OpenMP team, the MKL products called from the compiled region (a parallel kernel of its
    # own: full): a mask per batch entry, then one per head and query row
    pytest.param("mkl_heads_omp", 2, 17, 48, 3, (2, 1, 1, 17), marks=pytest.mark.full),
    pytest.param("mkl_heads_omp", 2, 24, 32, 2, (1, 2, 24, 24), marks=pytest.mark.full),
])
def test_heads_split_over_a_team_give_the_one_thread_bits(tactic, B, L, d, heads, mask_shape):
    """``mkl_heads_team`` and ``mkl_heads_omp`` (2 intra-op threads): each (batch, head) claimed by the
    caller or a team worker gives the bits of the ``mkl`` tactic on one thread, and torch's result."""
    from threadpoolctl import threadpool_limits

    from srcore_trt_like.kernels import mkl, threads

    if mkl.library() is None:
        pytest.skip("no MKL")
    torch.manual_seed(3)
    m = Bert(d, heads, False, contiguous=False).eval()
    x, bias = torch.randn(B, L, d), _mask(mask_shape, L)
    others = [t for t in SPLITS if t != tactic]
    with threadpool_limits(2):
        if threads.count() < 2:
            pytest.skip("one intra-op thread here")
        team, desc = _engine(m, (x, bias), exclude=["mkl", "numpy", "numba", "numba_heads", *others])
        one, _ = _engine(m, (x, bias), exclude=["numpy", "numba", "numba_heads", *SPLITS])
    assert f"attention_heads -> {B}x{L}x{d} [{tactic}]" in desc, desc
    got = [team(x.numpy(), bias.numpy()) for _ in range(3)]
    want = one(x.numpy(), bias.numpy())
    assert all(np.array_equal(g, want) for g in got)
    with torch.no_grad():
        np.testing.assert_allclose(want, m(x, bias).numpy(), rtol=1e-4, atol=1e-5)


def test_packed_attention_becomes_the_packed_layer():
    torch.manual_seed(5)
    m = Packed(64, 4).eval()
    x = torch.randn(2, 20, 64)
    sm, desc = _engine(m, (x,))
    assert "attention" in desc and "softmax" not in desc and "strided" not in desc, desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


def test_packed_attention_on_the_heads_kernel_matches_torch():
    B, L, d, heads = 2, 17, 32, 4   # ViT's: 17 keys, heads of 8
    torch.manual_seed(L)
    m = Packed(d, heads).eval()
    x = torch.randn(B, L, d)
    sm, desc = _engine(m, (x,), exclude=["mkl", "mkl_heads_omp", "numba", "numpy"])
    assert f"attention -> {B}x{L}x{d} [numba_heads]" in desc, desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


def test_an_attention_whose_probabilities_are_read_elsewhere_is_not_fused():
    torch.manual_seed(6)
    m = Bert(32, 2, leak=True).eval()
    x, bias = torch.randn(1, 12, 32), _mask((1, 1, 1, 12), 6)
    sm, desc = _engine(m, (x, bias), exclude=["segment"])   # the layers, not a compiled run of them
    assert "attention_heads" not in desc and "softmax" in desc, desc
    with torch.no_grad():
        want = m(x, bias)
    for g, w in zip(sm(x.numpy(), bias.numpy()), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


class Biased(nn.Module):
    """T5's attention: no scaling, a learned relative position bias (1, H, L, L) added to the scores
    (``bias_first``: written ``bias + scores``), or (``bias=False``) the softmax of the bare scores."""

    def __init__(self, d, heads, L, bias=True, bias_first=False):
        super().__init__()
        self.h, self.dh, self.bias_first = heads, d // heads, bias_first
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.rel = nn.Parameter(torch.randn(1, heads, L, L)) if bias else None

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (f(x).view(b, t, self.h, self.dh).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = torch.matmul(q, k.transpose(3, 2))
        if self.rel is not None:
            s = self.rel + s if self.bias_first else s + self.rel
        y = torch.matmul(torch.softmax(s, dim=-1), v)
        return y.transpose(1, 2).reshape(b, t, d) + 1.0


@pytest.mark.parametrize("bias, bias_first", [(True, False), (True, True), (False, False)])
def test_unscaled_attention_with_or_without_an_added_bias_is_one_layer(bias, bias_first):
    torch.manual_seed(7)
    m = Biased(32, 4, 20, bias, bias_first).eval()
    x = torch.randn(2, 20, 32)
    sm, desc = _engine(m, (x,), exclude=["mkl", "mkl_heads_team", "mkl_heads_omp", "numpy"])
    assert "attention_heads -> 2x20x32 [numba]" in desc, desc
    assert "softmax" not in desc and "permute" not in desc, desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


class SDPA(nn.Module):
    """scaled_dot_product_attention on heads of separate projections (a float mask, or causal) or of
    one packed projection taken apart (ViT's block, no mask)."""

    def __init__(self, d, heads, form):
        super().__init__()
        self.h, self.dh, self.form = heads, d // heads, form
        self.qkv = nn.Linear(d, 3 * d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x, bias):
        b, t, d = x.shape
        if self.form == "packed":
            q, k, v = self.qkv(x).reshape(b, t, 3, self.h, self.dh).permute(2, 0, 3, 1, 4).unbind(0)
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            q = self.q(x).view(b, t, self.h, self.dh).transpose(1, 2)
            k = self.k(x).view(b, t, self.h, self.dh).transpose(1, 2)
            v = self.v(x).view(b, t, self.h, self.dh).transpose(1, 2)
            if self.form == "mask":
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3)
            else:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, t, d) + 1.0


F = nn.functional


@pytest.mark.parametrize("form", ["packed", "mask", "causal"])
def test_scaled_dot_product_attention_is_one_attention_layer(form):
    torch.manual_seed(8)
    m, packed = SDPA(32, 4, form).eval(), form == "packed"
    x, bias = torch.randn(2, 10, 32), _mask((2, 1, 1, 10), 8)
    model = srcore.from_torchscript(torch.jit.script(m), (x, bias))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                           engine_options={"timing": False}))
    desc = "\n".join(e.description for e in sm.partition.engines)
    assert not sm.partition.refused and ("attention ->" if packed else "attention_heads ->") in desc, desc
    assert "softmax" not in desc, desc
    with torch.no_grad():
        want = m(x, bias).numpy()
    np.testing.assert_allclose(sm(x.numpy(), bias.numpy()), want, rtol=1e-4, atol=1e-5)


class BoolMaskSDPA(nn.Module):
    """scaled_dot_product_attention with a bool ``attn_mask`` (True: attend): a model input (a padding
    mask broadcast over heads and queries, as Perceiver's) or a constant buffer (``const``)."""

    def __init__(self, const: bool):
        super().__init__()
        self.const = const
        self.register_buffer("keep", torch.rand(1, 1, 4, 10, generator=torch.Generator().manual_seed(2)) > 0.4)

    def forward(self, q, kv, valid):
        mask = self.keep if self.const else valid[:, None, None, :]
        return F.scaled_dot_product_attention(q, kv, kv * 2.0, attn_mask=mask) + 1.0


@pytest.mark.parametrize("const", [False, True])
def test_scaled_dot_product_attention_with_a_bool_mask_runs_in_the_engine(const):
    """False keys are left out (torch's -inf); a batch entry with every key masked gives torch's
    zeros (the input mask's second entry)."""
    g = torch.Generator().manual_seed(9)
    q, kv = torch.randn(2, 2, 4, 8, generator=g), torch.randn(2, 2, 10, 8, generator=g)
    valid = torch.tensor([[True] * 6 + [False] * 4, [False] * 10])
    m = BoolMaskSDPA(const).eval()
    model = srcore.from_torchscript(torch.jit.script(m), (q, kv, valid))
    opts = {"timing": False, "exclude_tactics": ["segment"]}   # (no network compiled whole: seconds of numba)
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"), engine_options=opts))
    assert not sm.partition.refused and len(sm.partition.engines) == 1, sm.partition
    with torch.no_grad():
        want = m(q, kv, valid).numpy()
    np.testing.assert_allclose(sm(q.numpy(), kv.numpy(), valid.numpy()), want, rtol=1e-5, atol=1e-6)


class MHA(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0] + 1.0


def test_multihead_self_attention_fast_path_is_the_packed_layer():
    """A scripted nn.MultiheadAttention in eval runs torch's fused ``_native_multi_head_attention``."""
    torch.manual_seed(9)
    m = MHA(32, 4).eval()
    x = torch.randn(2, 7, 32)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                           engine_options={"timing": False}))
    desc = "\n".join(e.description for e in sm.partition.engines)
    assert not sm.partition.refused and "attention ->" in desc and "softmax" not in desc, desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


def test_multihead_cross_attention_node_is_three_projections_and_attention_heads():
    """The fused op on a query other than key and value (of the same shape, as torch's op requires;
    nn.MultiheadAttention calls it only for self-attention, a graph may not): against torch's op."""
    from srcore.ir import parse_graph

    g = torch.Generator().manual_seed(10)
    w, b = torch.randn(96, 32, generator=g) / 6, torch.randn(96, generator=g) / 6
    pw, pb = torch.randn(32, 32, generator=g) / 6, torch.randn(32, generator=g) / 6
    q, kv = torch.randn(2, 5, 32, generator=g), torch.randn(2, 5, 32, generator=g)
    text = """graph(%q : Float(2, 5, 32), %kv : Float(2, 5, 32)):
  %w : Tensor = prim::Constant[param="w"]()
  %b : Tensor = prim::Constant[param="b"]()
  %pw : Tensor = prim::Constant[param="pw"]()
  %pb : Tensor = prim::Constant[param="pb"]()
  %e : int = prim::Constant[value=32]()
  %h : int = prim::Constant[value=4]()
  %n : NoneType = prim::Constant()
  %f : bool = prim::Constant[value=0]()
  %t : bool = prim::Constant[value=1]()
  %y : Tensor, %wts : Tensor = aten::_native_multi_head_attention(%q, %kv, %kv, %e, %h, %w, %b, %pw, %pb, %n, %f, %t, %n)
  %z : Tensor = aten::relu(%y)
  return (%z)
"""
    params = {k: v.numpy() for k, v in dict(w=w, b=b, pw=pw, pb=pb).items()}
    sm = srcore.StaticModule(parse_graph(text, params=params), options=srcore.Options(
        backends=("trt_like", "cpu"), engine_min_block_size=1, engine_options={"timing": False}))
    desc = "\n".join(e.description for e in sm.partition.engines)
    assert not sm.partition.refused and "attention_heads ->" in desc, desc
    want = torch.relu(torch.ops.aten._native_multi_head_attention(q, kv, kv, 32, 4, w, b, pw, pb, None, False)[0])
    np.testing.assert_allclose(sm(q.numpy(), kv.numpy()), want.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.one_pass
def test_the_heads_kernel_on_strided_projections_gives_sdpa_zeros_for_fully_masked_rows():
    """The kernel on q, k and v as column blocks of one flat qkv, a (B, H, L, S) -inf mask with one
    query row masked everywhere: ``safe`` gives torch SDPA's zeros there, the rest SDPA's values."""
    from srcore_trt_like.kernels.heads import attention_heads

    B, L, E, H = 2, 9, 24, 3
    D = E // H
    rng = np.random.default_rng(7)
    qkv = rng.standard_normal((B, L, 3 * E), dtype=np.float32)
    keep = rng.random((B, H, L, L)) > 0.3
    keep[1, 2, 4] = False
    mask = np.where(keep, 0.0, -np.inf).astype(np.float32)
    out = np.full((B, L, E), np.nan, np.float32)
    f = qkv.reshape(-1)
    attention_heads(f, 0, 3 * E, f, E, 3 * E, f, 2 * E, 3 * E, B, L, L, mask, 1, np.float32(math.sqrt(D)), True, True,
                    H, np.empty((D, L), np.float32), np.empty((L, L), np.float32), np.empty((L, L), np.float32),
                    np.empty(L, np.float32), out)
    q, k, v = (torch.from_numpy(qkv[..., i * E:(i + 1) * E]).reshape(B, L, H, D).transpose(1, 2) for i in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(keep))
    want = want.transpose(1, 2).reshape(B, L, E).numpy()
    assert not np.any(out[1, 4, 2 * D:3 * D]) and np.isfinite(out).all()
    np.testing.assert_allclose(out, np.nan_to_num(want), rtol=1e-5, atol=1e-6)


class MaskedMHA(nn.Module):
    """``nn.MultiheadAttention`` on its fast path (batch-first, eval) with a key padding mask made from
    the lengths, optionally an attention mask too; its weights asked for (the default), never read."""

    def __init__(self, attn_mask):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x, lengths):
        pad = torch.arange(x.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)     # True: a padded key
        y, _ = self.attn(x, x, x, key_padding_mask=pad, attn_mask=self.attn_mask)
        return y + 1.0


class MaskedMHAWeights(MaskedMHA):
    def forward(self, x, lengths):
        pad = torch.arange(x.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)
        y, w = self.attn(x, x, x, key_padding_mask=pad, attn_mask=self.attn_mask)
        return y + 1.0, w


@pytest.mark.parametrize("attn_mask, read_weights", [(None, False), ("causal", False), (None, True)])
def test_masked_multihead_attention_fast_path(attn_mask, read_weights):
    """``_native_multi_head_attention`` with a mask (key padding, or merged with a causal mask) runs in
    the engine; weights asked for but never read (``y, _ = attn(x, x, x)``) are not computed (the
    peephole rule makes ``need_weights`` False), weights that are read keep the node on the cpu
    plugin, with the reason. Against torch eager, other lengths included (a fully padded entry gives
    NaN in torch's fast path, so it must here)."""
    torch.manual_seed(12)
    L = 5
    mask = None if attn_mask is None else torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    m = (MaskedMHAWeights if read_weights else MaskedMHA)(mask).eval()
    x, lengths = torch.randn(3, L, 16), torch.tensor([5, 3, 1])
    model = srcore.from_torchscript(torch.jit.script(m), (x, lengths))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                           engine_options={"timing": False}))
    refused = [r for r in sm.partition.refused if "_native_multi_head_attention" in r.node]
    if read_weights:
        assert refused and "weights are read" in refused[0].reason, sm.partition.format()
    else:
        assert not refused, sm.partition.format()
        assert "attention_heads" in "\n".join(e.description for e in sm.partition.engines)
    for lens in (lengths, torch.tensor([2, 5, 0])):
        with torch.no_grad():
            want = m(x, lens)
        got = sm(x.numpy(), lens.numpy())
        for g, w in zip(got if read_weights else [got], want if read_weights else [want]):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


class MaskedEncoder(nn.Module):
    """torch's eval ``TransformerEncoderLayer`` fast path (``aten::_transformer_encoder_layer_fwd``) with
    a key padding mask made from the lengths at run time, and optionally an attention mask."""

    def __init__(self, d, heads, norm_first, attn_mask):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True, norm_first=norm_first)
        self.attn_mask = attn_mask

    def forward(self, x, lengths):
        pad = torch.arange(x.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)     # True: a padded key
        return self.layer(x, src_mask=self.attn_mask, src_key_padding_mask=pad)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("attn_mask", [None, "causal"])
def test_masked_encoder_layer_fast_path_runs_in_the_engine(norm_first, attn_mask):
    """A key padding mask computed in the model (and an attention mask with it: torch merges them)
    no longer keeps the fused encoder layer out of the engine: three projections and an
    ``attention_heads`` layer reading the mask as a 0 / -inf bias, against torch eager, other
    lengths included (one padded to a single key, one with every key padded: NaN, as torch)."""
    torch.manual_seed(11)
    L = 6
    mask = None if attn_mask is None else torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    m = MaskedEncoder(16, 4, norm_first, mask).eval()
    x, lengths = torch.randn(3, L, 16), torch.tensor([6, 4, 1])
    with torch.no_grad():
        model = srcore.from_torchscript(torch.jit.trace(m, (x, lengths)), (x, lengths))
    assert "aten::_transformer_encoder_layer_fwd" in {n.kind for n in model.graph.nodes}
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                           engine_options={"timing": False}))
    assert not [r for r in sm.partition.refused if "encoder_layer" in r.node], sm.partition.format()
    desc = "\n".join(e.description for e in sm.partition.engines)
    assert "attention_heads" in desc, desc
    for lens in (lengths, torch.tensor([2, 6, 0])):
        with torch.no_grad():
            want = m(x, lens).numpy()
        np.testing.assert_allclose(sm(x.numpy(), lens.numpy()), want, rtol=1e-4, atol=1e-5)


@pytest.mark.full
def test_packed_attention_heads_split_over_the_omp_team_match_one_thread_and_torch():
    """The packed layer's ``mkl_heads_omp`` (2 intra-op threads, tactic pinned, no timing): every
    (batch, head) on the caller or the OpenMP worker, q/k/v read 3E floats apart from the qkv rows;
    the one-thread ``mkl`` tactic's result (its softmax is another compiled pass: to rounding) and torch's."""
    from threadpoolctl import threadpool_limits

    from srcore_trt_like.kernels import mkl, threads

    if mkl.library() is None:
        pytest.skip("no MKL")
    B, L, d, heads = 2, 19, 48, 3
    torch.manual_seed(7)
    m = Packed(d, heads).eval()
    x = torch.randn(B, L, d)
    with threadpool_limits(2):
        if threads.count() < 2:
            pytest.skip("one intra-op thread here")
        split, desc = _engine(m, (x,), exclude=["mkl", "numba", "numpy", "numba_heads"])
        one, one_desc = _engine(m, (x,), exclude=["mkl_heads_omp", "numba", "numpy", "numba_heads"])
    assert f"attention -> {B}x{L}x{d} [mkl_heads_omp]" in desc, desc
    assert f"attention -> {B}x{L}x{d} [mkl]" in one_desc, one_desc
    got = [split(x.numpy()) for _ in range(3)]
    want = one(x.numpy())
    assert all(np.array_equal(g, got[0]) for g in got)
    np.testing.assert_allclose(got[0], want, rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(got[0], m(x).numpy(), rtol=1e-4, atol=1e-5)

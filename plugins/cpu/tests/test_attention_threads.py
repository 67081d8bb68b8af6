"""The fused attention kernels at more than one intra-op thread: the (batch, head) pairs split over
the part pool where timing at load says so (pinned here: tests never depend on timing), numpy's
BLAS held on the calling thread, results equal to one thread's and to torch's."""
from __future__ import annotations

import numpy as np
import pytest
import threadpoolctl

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import ArgInfo, NodeInfo, Specialized  # noqa: E402
from srcore_cpu.kernels import attention as K  # noqa: E402
from srcore_cpu.kernels import parallel as P  # noqa: E402
from srcore_cpu.kernels import row_split as RS  # noqa: E402

#: kernels called directly, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

aten = torch.ops.aten
RNG = np.random.default_rng(7)


def _blas_count():
    ctl = P._blas_controller()
    return None if ctl is None else P._count_fns(ctl)[0]()


@pytest.mark.parametrize("B,H,parts", [(1, 8, 2), (3, 4, 2), (2, 3, 4), (5, 2, 3), (1, 1, 1), (4, 4, 4), (2, 5, 3)])
def test_head_blocks_cover_every_pair_once_in_contiguous_segments(B, H, parts):
    blocks = K._head_blocks(B, H, parts)
    assert len(blocks) == min(parts, B * H)
    seen = np.zeros((B, H), int)
    scores = np.zeros((B, H, 3, 3), np.float32)
    for segs in blocks:
        for bs, hs in segs:
            seen[bs, hs] += 1
            assert scores[bs, hs].flags.c_contiguous    # the compiled softmax reads contiguous rows
    assert (seen == 1).all()
    # contiguous runs of the flattened pairs, in order, sizes within one of each other
    sizes = [sum((bs.stop - bs.start) * (hs.stop - hs.start) for bs, hs in segs) for segs in blocks]
    assert max(sizes) - min(sizes) <= 1


def _layer_node(layer, shape, mask=False, mask_type=None):
    sa = layer.self_attn
    t = [x.detach().numpy() for x in (sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
                                      layer.norm1.weight, layer.norm1.bias, layer.norm2.weight, layer.norm2.bias,
                                      layer.linear1.weight, layer.linear1.bias, layer.linear2.weight,
                                      layer.linear2.bias)]
    E, H = sa.embed_dim, sa.num_heads
    args = dict(embed_dim=E, num_heads=H, qkv_weight=t[0], qkv_bias=t[1], proj_weight=t[2], proj_bias=t[3],
                use_gelu=False, norm_first=layer.norm_first, eps=1e-5, norm_weight_1=t[4], norm_bias_1=t[5],
                norm_weight_2=t[6], norm_bias_2=t[7], ffn_weight_1=t[8], ffn_bias_1=t[9], ffn_weight_2=t[10],
                ffn_bias_2=t[11], mask=None, mask_type=mask_type)
    infos = [ArgInfo("src", TensorType("float32", shape), False, None)]
    for n, v in args.items():
        if n == "mask" and mask:
            infos.append(ArgInfo(n, TensorType(), False, None))
        else:
            infos.append(ArgInfo(n, TensorType(), True, v))
    return NodeInfo("aten::_transformer_encoder_layer_fwd", None, tuple(infos), ())


def _poison_scratch():
    # the layers' per-thread scratch still holds the last call's values: NaN it, so a pair the split
    # leaves out cannot pass on the unsplit call's leftovers
    for buf in K.SHARED_WS.bufs.values():
        if buf.dtype.kind == "f":
            buf.fill(np.nan)


def _build(node, monkeypatch, threads, pays, timed, matcher=K.transformer_encoder_layer_matcher):
    """The node's kernel built at ``threads`` intra-op threads, the split's timing pinned to ``pays``
    (what it was asked to time appended to ``timed``)."""
    monkeypatch.setattr(P, "intra_op_threads", lambda: threads)
    monkeypatch.setattr(RS, "split_pays", lambda one, split, args, timer=None: timed.append(split.what) or pays)
    return matcher(node)


@pytest.mark.parametrize("shape,norm_first", [((1, 40, 32), False), ((3, 24, 32), True)])
def test_encoder_layer_split_over_heads_equals_one_thread_and_torch(monkeypatch, shape, norm_first):
    torch.manual_seed(11)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first).eval()
    node = _layer_node(layer, shape)
    x = RNG.standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        want = layer(torch.from_numpy(x)).numpy()
    monkeypatch.setattr(K, "_SPLIT_MIN_MACS", 1)
    timed: list = []
    one = _build(node, monkeypatch, 1, True, timed)
    assert timed == []                                   # one thread: nothing timed, nothing split
    r1 = one.fn(x, None)
    np.testing.assert_allclose(r1, want, rtol=1e-4, atol=1e-4)
    for pays in (True, False):
        timed.clear()
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            spec = _build(node, monkeypatch, 2, pays, timed)
            assert isinstance(spec, Specialized) and len(timed) == 1 and timed[0].startswith("attention_heads:")
            _poison_scratch()
            r2 = spec.fn(x, None)
            _poison_scratch()
            r2b = spec.fn(x, None)
        np.testing.assert_array_equal(r2, r1)           # the same calls per (batch, head) pair either way
        np.testing.assert_array_equal(r2b, r1)
    # another batch size than the one split at load: the unsplit path
    x2 = RNG.standard_normal((2, 7, 32)).astype(np.float32)
    with torch.no_grad():
        want2 = layer(torch.from_numpy(x2)).numpy()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        np.testing.assert_allclose(spec.fn(x2, None), want2, rtol=1e-4, atol=1e-4)


def test_encoder_layer_split_with_a_key_padding_mask(monkeypatch):
    """The mask's additive bias is sliced with the pairs: an entry with every key padded gives NaN,
    as torch's fused layer."""
    torch.manual_seed(12)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    shape = (3, 9, 32)
    node = _layer_node(layer, shape, mask=True, mask_type=1)
    monkeypatch.setattr(K, "_SPLIT_MIN_MACS", 1)
    timed: list = []
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        spec = _build(node, monkeypatch, 2, True, timed)
        assert timed and spec.args == (0, 18)
        x = RNG.standard_normal(shape).astype(np.float32)
        pad = np.arange(9)[None] >= np.array([9, 4, 0])[:, None]
        got = spec.fn(x, pad)
    with torch.no_grad():
        want = layer(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(pad)).numpy()
    assert np.isnan(want[2]).all() and np.isnan(got[2]).all()
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-4, atol=1e-4)


def test_encoder_layer_runs_numpy_blas_on_the_caller_at_two_threads(monkeypatch):
    """At more than one intra-op thread the layer holds numpy's BLAS at one thread while it runs (its
    unsplit products must not wake OpenBLAS's worker beside the part pool's); at one, it does not."""
    if _blas_count() is None:
        pytest.skip("numpy's BLAS not controllable here")
    torch.manual_seed(13)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    node = _layer_node(layer, (2, 6, 32))
    seen = []
    real = K._compiled_or_numpy

    def spying(dt):
        ln_, sm_ = real(dt)
        return ln_, lambda s, stat: (seen.append(_blas_count()), sm_(s, stat))[1]
    monkeypatch.setattr(K, "_compiled_or_numpy", spying)
    monkeypatch.delenv("SRCORE_CPU_THREADED_BLAS", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    x = RNG.standard_normal((2, 6, 32)).astype(np.float32)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        assert P.blas_on_caller()
        spec = K.transformer_encoder_layer_matcher(node)   # (small: no split built, nothing timed)
        got = spec.fn(x, None)
        assert seen == [1] and _blas_count() == 2
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        seen.clear()
        K.transformer_encoder_layer_matcher(node).fn(x, None)
        assert seen == [1]
    with torch.no_grad():
        np.testing.assert_allclose(got, layer(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-4)


def test_native_mha_fast_path_split_equals_one_thread_and_torch(monkeypatch):
    torch.manual_seed(14)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    params = [p.detach().numpy() for p in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight,
                                           mha.out_proj.bias)]
    shape = (2, 10, 32)
    args = dict(query=None, key=None, value=None, embed_dim=32, num_head=4, qkv_weight=params[0],
                qkv_bias=params[1], proj_weight=params[2], proj_bias=params[3], mask=None, need_weights=False,
                average_attn_weights=True, mask_type=None)
    infos = tuple(ArgInfo(n, TensorType("float32", shape), False, None) if v is None and n in ("query", "key", "value")
                  else ArgInfo(n, TensorType(), True, v) for n, v in args.items())
    node = NodeInfo("aten::_native_multi_head_attention", None, infos, ())
    monkeypatch.setattr(K, "_SPLIT_MIN_MACS", 1)
    x = RNG.standard_normal(shape).astype(np.float32)
    timed: list = []
    mhm = K.native_multi_head_attention_matcher
    r1 = _build(node, monkeypatch, 1, True, timed, mhm).fn(x, x, x, None)[0]
    assert timed == []
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        spec = _build(node, monkeypatch, 2, True, timed, mhm)
        _poison_scratch()
        r2 = spec.fn(x, x, x, None)[0]
    assert timed and timed[0].startswith("attention_heads:")
    np.testing.assert_array_equal(r2, r1)
    with torch.no_grad():
        want = aten._native_multi_head_attention(*(torch.from_numpy(x),) * 3, 32, 4,
                                                 *map(torch.from_numpy, params), None, False)[0].numpy()
    np.testing.assert_allclose(r1, want, rtol=1e-5, atol=1e-5)


def test_sdpa_and_the_generic_fused_kernels_hold_numpy_blas_on_the_caller_at_two_threads(monkeypatch):
    """scaled_dot_product_attention (no fast path of its own) and the fused ops' generic kernels run
    numpy's BLAS on the calling thread at more than one intra-op thread, and equal torch."""
    if _blas_count() is None:
        pytest.skip("numpy's BLAS not controllable here")
    monkeypatch.delenv("SRCORE_CPU_THREADED_BLAS", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    seen = []
    real = K._masked_softmax
    monkeypatch.setattr(K, "_masked_softmax", lambda *a, **k: (seen.append(_blas_count()), real(*a, **k))[1])
    q, k, v = (RNG.standard_normal((2, 4, 48, 16)).astype(np.float32) for _ in range(3))
    node = NodeInfo("aten::scaled_dot_product_attention", None,
                    tuple(ArgInfo(n, TensorType("float32", (2, 4, 48, 16)), False, None) for n in "qkv"), ())
    with torch.no_grad():
        want = torch.nn.functional.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)),
                                                                 is_causal=True).numpy()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        fn = K.scaled_dot_product_attention_matcher(node)
        assert fn is not K.scaled_dot_product_attention
        got = fn(q, k, v, None, 0.0, True)
        assert seen == [1] and _blas_count() == 2
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert K.scaled_dot_product_attention_matcher(node) is K.scaled_dot_product_attention


@pytest.mark.parametrize("shape,norm_first,gelu,threads", [((1, 40, 32), False, False, 2), ((3, 7, 32), True, False, 2),
                                                          ((2, 9, 32), False, True, 4), ((1, 5, 32), True, True, 3)])
def test_encoder_layer_tail_split_by_rows_matches_torch(monkeypatch, shape, norm_first, gelu, threads):
    """Everything after the heads (out-projection, residuals, layer norms, feed-forward) in blocks of
    rows on the part pool: torch's result, with and without a padding mask, for odd row counts and
    more threads than two rows each (then nothing is split); one thread builds nothing."""
    torch.manual_seed(15)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first,
                                             activation="gelu" if gelu else "relu").eval()
    node = _layer_node(layer, shape)
    infos = list(node.args)
    infos[7] = ArgInfo("use_gelu", TensorType(), True, gelu)
    node = NodeInfo(node.op, None, tuple(infos), ())
    x = RNG.standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        want = layer(torch.from_numpy(x)).numpy()
    monkeypatch.setattr(K, "_TAIL_MIN_MACS", 1)
    timed: list = []
    assert _build(node, monkeypatch, 1, True, timed).fn(x, None) is not None and timed == []
    calls = []
    real = P.run_parts
    monkeypatch.setattr(P, "run_parts", lambda fn, parts, t: (calls.append((parts, t)), real(fn, parts, t))[1])
    with threadpoolctl.threadpool_limits(threads, user_api="blas"):
        spec = _build(node, monkeypatch, threads, True, timed)
        rows = shape[0] * shape[1]
        assert any(w.startswith("encoder_tail:") for w in timed) == (rows >= 2 * threads)
        _poison_scratch()
        got = spec.fn(x, None)
        x2 = RNG.standard_normal((2, 3, 32)).astype(np.float32)   # another shape: the unsplit layer
        got2 = spec.fn(x2, None)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert ((threads, threads) in calls) == (rows >= 2 * threads)
    with torch.no_grad():
        np.testing.assert_allclose(got2, layer(torch.from_numpy(x2)).numpy(), rtol=1e-4, atol=1e-4)


def test_encoder_layer_tail_split_with_a_key_padding_mask(monkeypatch):
    torch.manual_seed(16)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    shape = (3, 9, 32)
    node = _layer_node(layer, shape, mask=True, mask_type=1)
    monkeypatch.setattr(K, "_TAIL_MIN_MACS", 1)
    timed: list = []
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        spec = _build(node, monkeypatch, 2, True, timed)
        assert any(w.startswith("encoder_tail:") for w in timed)
        x = RNG.standard_normal(shape).astype(np.float32)
        pad = np.arange(9)[None] >= np.array([9, 4, 0])[:, None]
        got = spec.fn(x, pad)
    with torch.no_grad():
        want = layer(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(pad)).numpy()
    assert np.isnan(want[2]).all() and np.isnan(got[2]).all()
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-4, atol=1e-4)

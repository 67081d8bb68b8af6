"""The com.microsoft ops onnxruntime's transformer optimizer writes (SkipLayerNormalization, Attention,
EmbedLayerNormalization, MultiHeadAttention, SimplifiedLayerNormalization, ...) against onnxruntime's
CPU kernels, on cpu and trt_like + cpu; what is not mapped is refused naming node, op and attribute."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import srcore

ort = pytest.importorskip("onnxruntime")

F, I32 = TensorProto.FLOAT, TensorProto.INT32
B, S, D, N = 2, 5, 8, 2   # batch, sequence, hidden, heads
RNG = np.random.default_rng(7)


def _r(*shape, s=1.0):
    return (RNG.standard_normal(shape) * s).astype(np.float32)


def _c(name, arr):
    return helper.make_tensor(name, TensorProto.INT32 if arr.dtype == np.int32 else F, arr.shape, arr.ravel())


def _ms(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, domain="com.microsoft", name=f"{op.lower()}_{outs[0]}", **kw)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _options(backend):
    if backend == "cpu":
        return srcore.Options(backends=("cpu",))
    return srcore.Options(backends=("trt_like", "cpu"), engine_min_block_size=1, engine_options={"timing": False})


def _check(m, feeds, backend, tol=2e-5):
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    sm = srcore.StaticModule(srcore.from_onnx(m), options=_options(backend))
    got = sm(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == w.dtype and np.asarray(g).shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=tol, atol=tol)
    if backend != "cpu":
        failed = [s for s in sm.partition.segments if s.status == "fallback"]
        assert not failed, "\n".join(f"{s.name}: {s.reason}" for s in failed)


BACKENDS = ("cpu", "trt_like")


def _norms():
    g, b, bias = _r(D), _r(D), _r(D)
    nodes = [
        _ms("SkipLayerNormalization", ["x", "skip", "g", "b", "bias"], ["y1", "", "", "sum1"], epsilon=1e-5),
        _ms("SkipLayerNormalization", ["x", "skip2", "g"], ["y2", "mean2", "isd2"]),
        _ms("SkipSimplifiedLayerNormalization", ["x", "skip", "g", "bias"], ["y3", "", "", "sum3"], epsilon=1e-6),
        _ms("SkipSimplifiedLayerNormalization", ["x", "skip", "g"], ["y4", "mean4", "isd4"]),
        helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y5"], epsilon=1e-6, axis=-1, name="sln"),
        helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y6", "isd6"], name="sln2"),
    ]
    outs = [_vi(n, F, [B, S, D]) for n in ("y1", "sum1", "y2", "y3", "sum3", "y4", "y5", "y6")]
    outs += [_vi(n, F, [B, S, 1]) for n in ("mean2", "isd2", "mean4", "isd4", "isd6")]
    m = _model(nodes, [_vi("x", F, [B, S, D]), _vi("skip", F, [B, S, D]), _vi("skip2", F, [S, D])], outs,
               [_c("g", g), _c("b", b), _c("bias", bias)])
    return m, {"x": _r(B, S, D), "skip": _r(B, S, D), "skip2": _r(S, D)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_skip_and_simplified_layer_norms_match_onnxruntime(backend):
    _check(*_norms(), backend)


def _embed():
    vocab, maxpos = 11, 7
    nodes = [_ms("EmbedLayerNormalization", ["ids", "seg", "we", "pe", "se", "g", "b", "mask"],
                 ["e1", "mi1", "es1"], epsilon=1e-5),
             _ms("EmbedLayerNormalization", ["ids", "", "we", "pe", "", "g", "b"], ["e2", "mi2"], epsilon=1e-5)]
    m = _model(nodes, [_vi("ids", I32, [B, S]), _vi("seg", I32, [B, S]), _vi("mask", I32, [B, S])],
               [_vi("e1", F, [B, S, D]), _vi("mi1", I32, [B]), _vi("es1", F, [B, S, D]), _vi("e2", F, [B, S, D]),
                _vi("mi2", I32, [B])],
               [_c("we", _r(vocab, D)), _c("pe", _r(maxpos, D)), _c("se", _r(2, D)), _c("g", _r(D)), _c("b", _r(D))])
    feeds = {"ids": RNG.integers(0, vocab, (B, S)).astype(np.int32), "seg": RNG.integers(0, 2, (B, S)).astype(np.int32),
             "mask": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)}
    return m, feeds


@pytest.mark.parametrize("backend", BACKENDS)
def test_embed_layer_norm_matches_onnxruntime(backend):
    _check(*_embed(), backend)


def _attention(mask_shape, unidirectional=0, extra=None, past=False, attn_bias=False):
    """One Attention node; ``mask_shape`` None or the shape of an int32 mask input."""
    ins = ["x", "w", "" if attn_bias else "bias", "mask" if mask_shape else "", "past" if past else ""]
    ins += ["ab"] if attn_bias else []
    kw = dict(num_heads=N, unidirectional=unidirectional, **(extra or {}))
    outs = ["y", "present"] if past else ["y"]
    inputs = [_vi("x", F, [B, S, D])]
    feeds = {"x": _r(B, S, D)}
    P = 3
    if mask_shape:
        inputs.append(_vi("mask", I32, list(mask_shape)))
        if len(mask_shape) == 1 and mask_shape[0] == B:
            feeds["mask"] = np.array([3, S], np.int32)
        elif len(mask_shape) == 1:
            feeds["mask"] = np.array([4, S, 1, 0], np.int32)
        else:
            feeds["mask"] = (RNG.random(mask_shape) > 0.3).astype(np.int32)
            feeds["mask"].flat[0] = 0   # the first query's first key padded (causal: nothing else to attend)
    if past:
        inputs.append(_vi("past", F, [2, B, N, P, D // N]))
        feeds["past"] = _r(2, B, N, P, D // N)
    if attn_bias:   # and no QKV bias
        inputs.append(_vi("ab", F, [B, N, S, S]))
        feeds["ab"] = _r(B, N, S, S)
    sizes = kw.get("qkv_hidden_sizes", [D, D, D])
    ovi = [_vi("y", F, [B, S, sizes[2]])] + ([_vi("present", F, [2, B, N, P + S, D // N])] if past else [])
    m = _model([_ms("Attention", ins, outs, **kw)], inputs, ovi,
               [_c("w", _r(D, sum(sizes), s=0.5)), _c("bias", _r(sum(sizes)))])
    return m, feeds


ATTN = {
    "nomask": dict(mask_shape=None),
    "lengths": dict(mask_shape=(B,)),
    "end_start": dict(mask_shape=(2 * B,)),
    "padding2d": dict(mask_shape=(B, S)),
    "mask3d_causal": dict(mask_shape=(B, S, S), unidirectional=1),
    "causal_scale": dict(mask_shape=None, unidirectional=1, extra={"scale": 0.2, "mask_filter_value": -1e4}),
    "past_causal_mask": dict(mask_shape=(B, S + 3), unidirectional=1, past=True),
    "attention_bias_qkv_sizes": dict(mask_shape=(B, S), attn_bias=True, extra={"qkv_hidden_sizes": [D, D, 6]}),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(ATTN))
def test_attention_mask_forms_match_onnxruntime(case, backend):
    if backend == "trt_like" and case != "past_causal_mask":
        pytest.skip("trt_like runs one mask form here (engine builds cost), the BERT below the 1-D one")
    _check(*_attention(**ATTN[case]), backend)


def _mha(mask_shape=None, attn_bias=False, past=False, causal=0):
    L = 4
    ins = ["q", "k", "v", "bias", "kpm" if mask_shape else "", "ab" if attn_bias else "",
           "pk" if past else "", "pv" if past else ""]
    inputs = [_vi("q", F, [B, S, D]), _vi("k", F, [B, L, D]), _vi("v", F, [B, L, D])]
    feeds = {"q": _r(B, S, D), "k": _r(B, L, D), "v": _r(B, L, D)}
    P = 2 if past else 0
    if mask_shape:
        inputs.append(_vi("kpm", I32, list(mask_shape)))
        feeds["kpm"] = np.array([2, L + P], np.int32) if len(mask_shape) == 1 else \
            np.array([[0] + [1] * (L + P - 2) + [0], [1] * (L + P)], np.int32)   # a padded first key
    if attn_bias:
        inputs.append(_vi("ab", F, [1, N, S, L + P]))
        feeds["ab"] = _r(1, N, S, L + P)
    outs, ovi = ["y"], [_vi("y", F, [B, S, D])]
    if past:
        inputs += [_vi("pk", F, [B, N, P, D // N]), _vi("pv", F, [B, N, P, D // N])]
        feeds.update(pk=_r(B, N, P, D // N), pv=_r(B, N, P, D // N))
        outs += ["prk", "prv"]
        ovi += [_vi(n, F, [B, N, P + L, D // N]) for n in ("prk", "prv")]
    node = _ms("MultiHeadAttention", ins, outs, num_heads=N, unidirectional=causal)
    return _model([node], inputs, ovi, [_c("bias", _r(3 * D))]), feeds


MHA = {"plain": {}, "padding2d_bias": dict(mask_shape=(B, 4), attn_bias=True), "lengths": dict(mask_shape=(B,)),
       "past": dict(past=True, mask_shape=(B, 6)), "causal_padding": dict(mask_shape=(B, 4), causal=1)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(MHA))
def test_multi_head_attention_matches_onnxruntime(case, backend):
    if backend == "trt_like" and case != "padding2d_bias":
        pytest.skip("trt_like runs one representative case")
    _check(*_mha(**MHA[case]), backend)


def test_bias_add_is_the_sum():
    """onnxruntime has only a CUDA kernel for BiasAdd: the documented ``X + bias + skip`` is the reference."""
    m = _model([_ms("BiasAdd", ["x", "bias", "skip"], ["y"])], [_vi("x", F, [B, S, D]), _vi("skip", F, [B, S, D])],
               [_vi("y", F, [B, S, D])], [_c("bias", np.arange(D, dtype=np.float32))])
    x, skip = _r(B, S, D), _r(B, S, D)
    got = srcore.StaticModule(srcore.from_onnx(m), options=_options("cpu"))(x=x, skip=skip)
    np.testing.assert_allclose(got, x + np.arange(D, dtype=np.float32) + skip, rtol=1e-6)


def test_gemm_fast_gelu_is_the_tanh_gelu_of_the_product():
    """onnxruntime has no CPU kernel for GemmFastGelu: torch's tanh gelu of ``x @ w + b`` is the reference."""
    import torch

    w, b, x = _r(D, 6), _r(6), _r(B, S, D)
    nodes = [_ms("GemmFastGelu", ["x", "w", "b"], ["y1"]), _ms("GemmFastGelu", ["x", "w"], ["y2"])]
    m = _model(nodes, [_vi("x", F, [B, S, D])], [_vi("y1", F, [B, S, 6]), _vi("y2", F, [B, S, 6])],
               [_c("w", w), _c("b", b)])
    y1, y2 = srcore.StaticModule(srcore.from_onnx(m), options=_options("cpu"))(x=x)
    gelu = torch.nn.functional.gelu
    np.testing.assert_allclose(y1, gelu(torch.from_numpy(x @ w + b), approximate="tanh").numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(y2, gelu(torch.from_numpy(x @ w), approximate="tanh").numpy(), rtol=1e-5, atol=1e-6)


REFUSED = [
    (lambda: _attention(None, extra={"do_rotary": 1}), r"Attention node 'attention_y'.*do_rotary=1"),
    (lambda: _attention(None, extra={"past_present_share_buffer": 1}),
     r"Attention node 'attention_y'.*past_present_share_buffer"),
    (lambda: _attention((B, 1, S, S)), r"Attention node 'attention_y'.*4-D mask_index"),
    (lambda: _attention((3,)), r"Attention node 'attention_y'.*1-D mask_index of length 3 for batch 2"),
    (lambda: _attention(("n",)), r"Attention node 'attention_y'.*1-D mask_index of length n for batch 2"),
    (lambda: _rotary((B, S, D), (1,), dict(num_heads=N, scale=0.5)),
     r"RotaryEmbedding node 'rotaryembedding_y'.*scale"),
]


def _mha_variant(**change):
    m, feeds = _mha()
    node = m.graph.node[0]
    for k, v in change.items():
        if k == "inputs":
            node.input[:] = v
        elif k == "outputs":
            node.output[:] = v
            m.graph.output.append(_vi(v[-1], F, [B, N, S, 4]))
    return m, feeds


REFUSED += [
    (lambda: _mha_variant(inputs=["q", "", "", "bias"]), r"MultiHeadAttention node .*without key and value"),
    (lambda: _mha_variant(outputs=["y", "", "", "qk"]), r"MultiHeadAttention node .*output qk"),
]


@pytest.mark.parametrize("build,match", REFUSED)
def test_unsupported_forms_are_refused_by_name(build, match):
    m, _ = build()
    with pytest.raises(srcore.SrcoreError, match=match):
        srcore.from_onnx(m)


# -- end to end: a small BERT exported by torch, fused by onnxruntime's transformer optimizer -----------
HID, HEADS, VOCAB, MAXPOS = 16, 2, 30, 12


def _bert():
    """A 2-layer BERT (classes built here: torch imported only by the tests that use it)."""
    import math

    import torch

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (torch.nn.Linear(HID, HID) for _ in range(4))
            self.ln1, self.ln2 = torch.nn.LayerNorm(HID, eps=1e-12), torch.nn.LayerNorm(HID, eps=1e-12)
            self.f1, self.f2 = torch.nn.Linear(HID, 4 * HID), torch.nn.Linear(4 * HID, HID)

        def heads(self, x):
            return x.view(x.size(0), x.size(1), HEADS, HID // HEADS).permute(0, 2, 1, 3)

        def forward(self, x, ext):   # the HF BERT layer's ops, which the optimizer's patterns match
            q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
            sc = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HID // HEADS) + ext
            ctx = torch.matmul(sc.softmax(-1), v).permute(0, 2, 1, 3).contiguous()
            a = self.ln1(self.o(ctx.view(ctx.size(0), ctx.size(1), HID)) + x)
            return self.ln2(self.f2(torch.nn.functional.gelu(self.f1(a))) + a)

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.we, self.pe, self.te = (torch.nn.Embedding(n, HID) for n in (VOCAB, MAXPOS, 2))
            self.ln = torch.nn.LayerNorm(HID, eps=1e-12)
            self.layers = torch.nn.ModuleList([Layer() for _ in range(2)])
            self.register_buffer("pos", torch.arange(MAXPOS).unsqueeze(0))

        def forward(self, input_ids, attention_mask, token_type_ids):
            x = self.ln(self.we(input_ids) + self.pe(self.pos[:, :input_ids.size(1)]) + self.te(token_type_ids))
            ext = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
            for layer in self.layers:
                x = layer(x, ext)
            return x

    torch.manual_seed(3)
    return Bert().eval()


@pytest.fixture(scope="module")
def optimized_bert(tmp_path_factory):
    """The exported BERT after ``optimize_model(model_type="bert")``: the path and feeds (the first
    sequence right-padded)."""
    import onnx
    import torch
    from onnxruntime.transformers.optimizer import optimize_model

    d = tmp_path_factory.mktemp("bert")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    ids = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 7, dtype=torch.int64)
    mask[0, 5:] = 0
    tt = torch.zeros(2, 7, dtype=torch.int64)
    tt[:, 4:] = 1
    with torch.no_grad():
        torch.onnx.export(_bert(), (ids, mask, tt), str(d / "b.onnx"), dynamo=False, opset_version=14,
                          input_names=names, output_names=["out"], dynamic_axes={n: {0: "b", 1: "s"} for n in names})
    opt = optimize_model(str(d / "b.onnx"), model_type="bert", num_heads=HEADS, hidden_size=HID, opt_level=0)
    opt.save_model_to_file(str(d / "opt.onnx"))
    ops = {n.op_type for n in onnx.load(str(d / "opt.onnx")).graph.node if n.domain == "com.microsoft"}
    assert ops == {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"}
    return str(d / "opt.onnx"), {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": tt.numpy()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bert_fused_by_the_transformer_optimizer_matches_onnxruntime(optimized_bert, backend):
    """srcore refused the file ('op EmbedLayerNormalization of domain com.microsoft is not supported');
    now it runs it as onnxruntime does, the padded sequence's mask_index included."""
    import onnx

    _check(onnx.load(optimized_bert[0]), optimized_bert[1], backend, tol=1e-5)


def _rotary(x_shape, pos_shape, attrs):
    half = attrs.get("rotary_embedding_dim", x_shape[-1] // N if len(x_shape) == 3 else x_shape[-1]) // 2
    ins = [_vi("x", F, list(x_shape)), _vi("pos", TensorProto.INT64, list(pos_shape))]
    node = _ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], **attrs)
    ang = np.arange(16)[:, None] * 0.3 / (1 + np.arange(half))[None]
    m = _model([node], ins, [_vi("y", F, list(x_shape))],
               [_c("cos", np.cos(ang).astype(np.float32)), _c("sin", np.sin(ang).astype(np.float32))])
    pos = np.array([3]) if pos_shape == (1,) else RNG.integers(0, 16 - S, pos_shape)
    return m, {"x": _r(*x_shape), "pos": pos.astype(np.int64)}


ROTARY = {"3d_offset": ((B, S, D), (1,), dict(num_heads=N)),
          "3d_ids_interleaved": ((B, S, D), (B, S), dict(num_heads=N, interleaved=1)),
          "4d_partial": ((B, N, S, 8), (B, S), dict(rotary_embedding_dim=4, num_heads=N))}


@pytest.mark.parametrize("case", list(ROTARY))
def test_ms_rotary_embedding_matches_onnxruntime(case):
    _check(*_rotary(*ROTARY[case]), "cpu")


def _gpt2():
    """A 2-block GPT-2 as HF's older eager GPT2 wrote it (Conv1D as addmm, the causal ``bias`` buffer
    through ``where``, tanh gelu)."""
    import torch

    class Conv1D(torch.nn.Module):
        def __init__(self, nf, nx):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.2)
            self.bias = torch.nn.Parameter(torch.randn(nf) * 0.1)
            self.nf = nf

        def forward(self, x):
            return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(x.size()[:-1] + (self.nf,))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = torch.nn.LayerNorm(HID), torch.nn.LayerNorm(HID)
            self.c_attn, self.c_proj = Conv1D(3 * HID, HID), Conv1D(HID, HID)
            self.c_fc, self.c_out = Conv1D(4 * HID, HID), Conv1D(HID, 4 * HID)
            self.register_buffer("bias", torch.tril(torch.ones(MAXPOS, MAXPOS, dtype=torch.uint8)).view(1, 1, MAXPOS,
                                                                                                         MAXPOS))
            self.register_buffer("masked_bias", torch.tensor(-1e4))

        def heads(self, x, k=False):
            x = x.view(x.size()[:-1] + (HEADS, HID // HEADS))
            return x.permute(0, 2, 3, 1) if k else x.permute(0, 2, 1, 3)

        def forward(self, x, am):
            q, k, v = self.c_attn(self.ln_1(x)).split(HID, dim=2)
            q, k, v = self.heads(q), self.heads(k, True), self.heads(v)
            w = torch.matmul(q, k) / (float(v.size(-1)) ** 0.5)
            nd, ns = w.size(-2), w.size(-1)
            w = torch.where(self.bias[:, :, ns - nd:ns, :ns].bool(), w, self.masked_bias.to(w.dtype)) + am
            a = torch.matmul(w.softmax(-1), v).permute(0, 2, 1, 3).contiguous()
            x = x + self.c_proj(a.view(a.size()[:-2] + (HID,)))
            return x + self.c_out(torch.nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = torch.nn.Embedding(VOCAB, HID), torch.nn.Embedding(MAXPOS, HID)
            self.h = torch.nn.ModuleList([Block() for _ in range(2)])
            self.ln_f = torch.nn.LayerNorm(HID)

        def forward(self, input_ids, position_ids, attention_mask):
            am = (1.0 - attention_mask[:, None, None, :]) * -10000.0
            x = self.wte(input_ids) + self.wpe(position_ids)
            for b in self.h:
                x = b(x, am)
            return self.ln_f(x)

    torch.manual_seed(4)
    return GPT().eval()


def test_a_gpt2_fused_by_the_transformer_optimizer_matches_onnxruntime(tmp_path):
    """``model_type="gpt2"`` fuses this GPT-2's residual adds and norms into SkipLayerNormalization whose
    ``input_skip_bias_sum`` output feeds the next block, and its gelu into FastGelu (its attention
    pattern stays unfused with this exporter): srcore matches onnxruntime on the saved file."""
    import onnx
    import torch
    from onnxruntime.transformers.optimizer import optimize_model

    names = ["input_ids", "position_ids", "attention_mask"]
    ids = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(2))
    pos, mask = torch.arange(7).repeat(2, 1), torch.ones(2, 7)
    mask[0, :2] = 0
    with torch.no_grad():
        torch.onnx.export(_gpt2(), (ids, pos, mask), str(tmp_path / "g.onnx"), dynamo=False, opset_version=14,
                          input_names=names, output_names=["out"], dynamic_axes={n: {0: "b", 1: "s"} for n in names})
    optimize_model(str(tmp_path / "g.onnx"), model_type="gpt2", num_heads=HEADS, hidden_size=HID,
                   opt_level=0).save_model_to_file(str(tmp_path / "opt.onnx"))
    m = onnx.load(str(tmp_path / "opt.onnx"))
    skips = [n for n in m.graph.node if n.op_type == "SkipLayerNormalization"]
    assert skips and any(len(n.output) == 4 and n.output[3] for n in skips)
    assert any(n.op_type == "FastGelu" for n in m.graph.node)
    _check(m, {"input_ids": ids.numpy(), "position_ids": pos.numpy(), "attention_mask": mask.numpy()}, "cpu",
           tol=1e-5)


def test_mha_with_4d_key_value_matches_onnxruntime():
    """Cross attention on key/value already split into heads ``[B, N, L, H]`` (a decoder's cached
    encoder states), with a key padding mask."""
    L = 3
    node = _ms("MultiHeadAttention", ["q", "k", "v", "", "kpm"], ["y"], num_heads=N)
    m = _model([node], [_vi("q", F, [B, S, D]), _vi("k", F, [B, N, L, D // N]), _vi("v", F, [B, N, L, D // N]),
                        _vi("kpm", I32, [B, L])], [_vi("y", F, [B, S, D])])
    _check(m, {"q": _r(B, S, D), "k": _r(B, N, L, D // N), "v": _r(B, N, L, D // N),
               "kpm": np.array([[1, 1, 0], [1, 1, 1]], np.int32)}, "cpu")

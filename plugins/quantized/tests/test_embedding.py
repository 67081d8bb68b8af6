"""Row-wise quantized embeddings (``quantized::embedding_bag_{byte,4bit,2bit}_rowwise_offsets``, and
``nn.quantized.Embedding`` / ``EmbeddingBag``'s packed ``embedding_byte`` / ``embedding_4bit`` /
``embedding_bag_byte`` / ``embedding_bag_4bit``): the float32 results bit for bit against torch's
fbgemm kernels, models imported eagerly quantized and with FX, scripted and frozen; bad input refused
with a SrcoreError naming the op."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore_quantized.kernels import embedding

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]
EXAMPLES = settings(max_examples=25, deadline=None)
PREPACK = {8: "embedding_bag_byte_prepack", 4: "embedding_bag_4bit_prepack", 2: "embedding_bag_2bit_prepack"}
OP = {8: "embedding_bag_byte_rowwise_offsets", 4: "embedding_bag_4bit_rowwise_offsets",
      2: "embedding_bag_2bit_rowwise_offsets"}


def _bits_equal(got, want):
    """Every float32 bit the same (signed zeros included)."""
    want = want.numpy() if hasattr(want, "numpy") else want
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got, np.float32).view(np.int32), want.view(np.int32))


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@EXAMPLES
@given(bits=st.sampled_from([8, 4, 2]), rows=st.integers(1, 30), dim4=st.integers(1, 12), seed=st.integers(0, 2 ** 16),
       magnitude=st.sampled_from([0.01, 1.0, 300.0]), weighted=st.booleans(), last=st.booleans(),
       index_dtype=st.sampled_from([torch.int64, torch.int32]))
def test_embedding_bag_rowwise_offsets(bits, rows, dim4, seed, magnitude, weighted, last, index_dtype):
    """Random tables, bags (empty ones included), per-sample weights, include_last_offset."""
    rng = np.random.default_rng(seed)
    w = torch.from_numpy((rng.standard_normal((rows, dim4 * 4)) * magnitude).astype(np.float32))
    fused = getattr(torch.ops.quantized, PREPACK[bits])(w)
    n = int(rng.integers(0, 40))
    idx = torch.from_numpy(rng.integers(0, rows, n)).to(index_dtype)
    off = torch.from_numpy(np.sort(rng.integers(0, n + 1, int(rng.integers(1, 7))))).to(index_dtype)
    off[0] = 0
    if last:
        off[-1] = n
    psw = torch.from_numpy(rng.standard_normal(n).astype(np.float32)) if weighted else None
    want = getattr(torch.ops.quantized, OP[bits])(fused, idx, off, False, 0, False, psw, None, last)
    got = getattr(embedding, OP[bits] + "_out")(fused.numpy(), idx.numpy(), off.numpy(), False, 0, False,
                                                None if psw is None else psw.numpy(), None, last)
    _bits_equal(got, want)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_fixed_size_bags_and_pruned_rows():
    """2-D indices without offsets (one bag per row) and pruned tables (a compressed indices mapping,
    -1 for a pruned row; ``[0]`` for none pruned)."""
    g = torch.Generator().manual_seed(5)
    fused = torch.ops.quantized.embedding_bag_byte_prepack(torch.randn(12, 8, generator=g))
    idx = torch.randint(0, 12, (5, 3), generator=g)
    _bits_equal(embedding.embedding_bag_byte_rowwise_offsets_out(fused.numpy(), idx.numpy(), None),
                torch.ops.quantized.embedding_bag_byte_rowwise_offsets(fused, idx, None))
    fused4 = torch.ops.quantized.embedding_bag_4bit_prepack(torch.randn(6, 8, generator=g))
    mapping = torch.tensor([0, -1, 1, 2, -1, 3, 4, 5, -1, 0], dtype=torch.int32)
    idx = torch.randint(0, 10, (17,), generator=g)
    off = torch.tensor([0, 4, 4, 11])
    for m in (mapping, torch.tensor([0], dtype=torch.int32)):
        i = idx if m.numel() > 1 else idx % 6
        want = torch.ops.quantized.embedding_bag_4bit_rowwise_offsets(fused4, i, off, False, 0, True, None, m)
        got = embedding.embedding_bag_4bit_rowwise_offsets_out(fused4.numpy(), i.numpy(), off.numpy(), False, 0, True,
                                                               None, m.numpy())
        _bits_equal(got, want)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_the_fma_is_rounded_once():
    """``embedding._fma`` rounds ``a * q + c`` once, as the fma fbgemm runs: where ``a * q`` is halfway
    between two float32 values and ``c`` tiny, float64 arithmetic alone would land on the midpoint and
    round it to even, the wrong way for the sign of ``c``."""
    u = 2.0 ** -22                                   # float32's step in [2, 4)
    a = np.array([1 + 2.0 ** -23, 1 + 3 * 2.0 ** -23], np.float32)
    q = np.array([3, 3], np.uint8)                   # a * q = 3 + 1.5u and 3 + 4.5u: midpoints
    c = np.array([-(2.0 ** -80), 2.0 ** -80], np.float32)
    assert embedding._fma(a, q, c).tolist() == [3 + u, 3 + 5 * u]
    assert (a.astype(np.float64) * q + c).astype(np.float32).tolist() == [3 + 2 * u, 3 + 4 * u]   # twice rounded


class _Recommender(torch.nn.Module):
    """DLRM-ish: an Embedding (8-bit), an EmbeddingBag with per-sample weights and include_last_offset
    (8-bit), a 4-bit EmbeddingBag; their float outputs compared (a float tail would add float32 rounding
    srcore does not reproduce bit for bit). (A 4-bit Embedding converted so fails in torch
    itself: ``Embedding.from_float`` leaves the module's dtype quint8, so it calls ``embedding_byte`` on
    4-bit rows; see ``test_4bit_embedding``.)"""

    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(20, 6)
        self.b = torch.nn.EmbeddingBag(30, 6, mode="sum", include_last_offset=True)
        self.b4 = torch.nn.EmbeddingBag(30, 6, mode="sum")

    def forward(self, ids, idx, off, psw):
        return self.e(ids), self.b(idx, off, per_sample_weights=psw), self.b4(idx, off[:-1])


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 20, (4, 3), generator=g), torch.randint(0, 30, (13,), generator=g),
            torch.tensor([0, 2, 2, 7, 13]), torch.rand(13, generator=g))


def _eager(net):
    import torch.ao.quantization as tq

    net.e.qconfig = net.b.qconfig = tq.float_qparams_weight_only_qconfig
    net.b4.qconfig = tq.float_qparams_weight_only_qconfig_4bit
    tq.prepare(net, inplace=True)
    return tq.convert(net, inplace=True)


def _fx(net):
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    mapping = (tq.get_default_qconfig_mapping("x86")
               .set_module_name("e", tq.float_qparams_weight_only_qconfig)
               .set_module_name("b", tq.float_qparams_weight_only_qconfig)
               .set_module_name("b4", tq.float_qparams_weight_only_qconfig_4bit))
    prepared = prepare_fx(net, mapping, _inputs(0))
    for seed in range(3):
        prepared(*_inputs(seed))
    return convert_fx(prepared)


@pytest.mark.usefixtures("fbgemm")
@pytest.mark.parametrize("how", ["eager-frozen", "eager-scripted", "fx-frozen"])
def test_models_import_and_match_torch(how):
    """Refused at import before (``EmbeddingPackedParamsBase``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(3)
        net = (_fx if how.startswith("fx") else _eager)(_Recommender().eval())
        m = torch.jit.script(net)
        if how.endswith("frozen"):
            m = torch.jit.freeze(m.eval())
        x = _inputs(9)
        sm = srcore.StaticModule(srcore.from_torchscript(m, x))
        with torch.no_grad():
            want = net(*x)
    ran = {pn.node.kind for pn in sm.top.nodes if pn.fn is not None and pn.fn.backend == "quantized_cpu"}
    assert {"quantized::qembedding_byte", "quantized::embedding_bag_byte_rowwise_offsets",
            "quantized::embedding_bag_4bit_rowwise_offsets"} <= ran, ran
    got = sm(*[t.numpy() for t in x])
    assert len(got) == len(want) == 3
    for a, b in zip(got, want):
        _bits_equal(a, b)


@pytest.mark.parametrize("frozen", [False, True])
def test_4bit_embedding(frozen):
    """``nn.quantized.Embedding(dtype=quint4x2)`` (``quantized::embedding_4bit``) with a 4-bit weight of
    per-row float parameters; 2-D indices."""
    import torch.ao.nn.quantized as nnq

    g = torch.Generator().manual_seed(2)
    e = nnq.Embedding(10, 6, dtype=torch.quint4x2)
    w = torch.quantize_per_channel(torch.randn(10, 6, generator=g), torch.rand(10, generator=g) * 0.2 + 0.01,
                                   torch.randn(10, generator=g) * 3, 0, torch.quint4x2)
    e.set_weight(w)
    m = torch.jit.script(e.eval())
    if frozen:
        m = torch.jit.freeze(m)
    ids = torch.randint(0, 10, (3, 5), generator=g)
    sm = srcore.StaticModule(srcore.from_torchscript(m, (ids,)))
    assert "quantized::qembedding_4bit" in {pn.node.kind for pn in sm.top.nodes}
    _bits_equal(sm(ids.numpy()), e(ids))


def test_a_4bit_embedding_torch_cannot_run_is_refused_at_import():
    """``Embedding.from_float`` with a 4-bit qconfig leaves the module calling ``embedding_byte`` on 4-bit
    rows (torch fails at run time): refused at import, naming both kinds."""
    import torch.ao.quantization as tq

    class Emb(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.e = torch.nn.Embedding(10, 6)

        def forward(self, ids):
            return self.e(ids)

    m = Emb().eval()
    m.e.qconfig = tq.float_qparams_weight_only_qconfig_4bit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.prepare(m, inplace=True)
        tq.convert(m, inplace=True)
        ids = torch.tensor([[1, 2]])
        with pytest.raises(RuntimeError):
            m(ids)
        with pytest.raises(srcore.ConversionError, match="embedding_byte expects embedding_byte packed parameters, "
                                                         "got embedding_4bit ones"):
            srcore.from_torchscript(torch.jit.freeze(torch.jit.script(m)), (ids,))


def test_bad_input_is_refused_naming_the_op():
    """mode != 0 (torch 2.13 sums anyway) fails the load; an index past the table, or offsets not from 0,
    fail the call with a KernelError naming the op, not a numpy IndexError."""
    fused = torch.ops.quantized.embedding_bag_byte_prepack(torch.randn(12, 8))
    with pytest.raises(srcore.SrcoreError, match=r"embedding_bag_byte_rowwise_offsets: index 12 is out of range"):
        embedding.embedding_bag_byte_rowwise_offsets_out(fused.numpy(), np.array([1, 12]), np.array([0]))
    with pytest.raises(srcore.SrcoreError, match=r"offsets must start at 0"):   # torch's kernels disagree there
        embedding.embedding_bag_byte_rowwise_offsets_out(fused.numpy(), np.array([1, 2, 3]), np.array([1, 2]))
    with pytest.raises(srcore.SrcoreError, match=r"qembedding_byte: index -1 is out of range"):
        embedding.qembedding_byte_out(fused.numpy(), np.array([[1, -1]]))

    class Bag(torch.nn.Module):
        def forward(self, w, i, o):
            return torch.ops.quantized.embedding_bag_byte_rowwise_offsets(w, i, o, False, 1)

    i, o = torch.tensor([1, 2, 3]), torch.tensor([0, 2])
    with pytest.raises(srcore.SrcoreError, match=r"mode=1 is not supported"):
        srcore.StaticModule(srcore.from_torchscript(torch.jit.script(Bag()), (fused, i, o)))


def test_torchs_own_rowwise_op_in_a_model():
    """A model calling ``embedding_bag_byte_rowwise_offsets`` on a prepacked buffer itself (how DLRM-style
    code uses fbgemm's tables) runs as written."""
    class Bag(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.ops.quantized.embedding_bag_byte_prepack(torch.randn(40, 16)))

        def forward(self, i, o):
            return torch.ops.quantized.embedding_bag_byte_rowwise_offsets(self.w, i, o, False, 0, False, None, None,
                                                                          False)

    m = torch.jit.freeze(torch.jit.script(Bag().eval()))
    i, o = torch.randint(0, 40, (21,)), torch.tensor([0, 5, 5, 20])
    sm = srcore.StaticModule(srcore.from_torchscript(m, (i, o)))
    _bits_equal(sm(i.numpy(), o.numpy()), m(i, o))

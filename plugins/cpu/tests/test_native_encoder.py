"""torch's fused encoder layer with its products on the native team (``native_encoder.py``), two threads
forced and the load-time choices pinned (tests never depend on timing): against torch's layer over
shapes, both norm placements, ReLU and GELU, a key padding mask, each linear's row or column split;
other inputs to the fallback; the switches that turn it off."""
from __future__ import annotations

import numpy as np
import pytest
import threadpoolctl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import attrs  # noqa: E402
from srcore_cpu.kernels import attention as K  # noqa: E402
from srcore_cpu.kernels import native_encoder as NE  # noqa: E402
from srcore_cpu.kernels import native_team as NT  # noqa: E402
from srcore_cpu.kernels import parallel as P  # noqa: E402
from srcore_cpu.kernels import tactic  # noqa: E402

from test_attention_threads import _layer_node, _poison_scratch  # noqa: E402

pytestmark = [pytest.mark.one_pass,
              pytest.mark.skipif(NT.sgemm_address() is None, reason="numpy's BLAS is not an ILP64 OpenBLAS")]


def _pin(monkeypatch, linear_pick="rows", layer_pick="native", seen=None):
    """Two intra-op threads; every timing's pick fixed (the layer's, each linear's split's; the other
    splits lose); what was timed appended to ``seen``."""
    monkeypatch.setattr(P, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(NE, "MIN_MACS", 1)

    def fastest(cands, args, key=None, **kw):
        if seen is not None:
            seen.append((key[0] if key else None, sorted(cands)))
        for pick in (layer_pick, linear_pick):
            if pick in cands:
                return pick
        return "one" if "one" in cands else sorted(cands)[0]
    monkeypatch.setattr(tactic, "fastest", fastest)


def _layer(E, H, Fh, norm_first, gelu, seed):
    torch.manual_seed(seed)
    return torch.nn.TransformerEncoderLayer(E, H, Fh, batch_first=True, norm_first=norm_first,
                                            activation="gelu" if gelu else "relu").eval()


def _node(layer, shape, gelu, mask=False):
    """The traced layer's node (test_attention_threads' helper) with ``use_gelu`` as torch sets it."""
    node = _layer_node(layer, shape, mask=mask, mask_type=1 if mask else None)
    args = tuple(attrs.evolve(a, value=gelu) if a.name == "use_gelu" else a for a in node.args)
    return attrs.evolve(node, args=args)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(B=st.integers(1, 3), L=st.integers(4, 20), H=st.integers(1, 4), D=st.integers(1, 12),
       Fh=st.integers(1, 80), norm_first=st.booleans(), gelu=st.booleans(),
       linear_pick=st.sampled_from(["rows", "cols"]), seed=st.integers(0, 3))
def test_native_layer_matches_torch(monkeypatch, B, L, H, D, Fh, norm_first, gelu, linear_pick, seed):
    E = H * D
    layer = _layer(E, H, Fh, norm_first, gelu, seed)
    shape = (B, L, E)
    x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    with torch.no_grad():
        want = layer(torch.from_numpy(x)).numpy()
    seen: list = []
    with monkeypatch.context() as mp:
        _pin(mp, linear_pick, "native", seen)
        spec = K.transformer_encoder_layer_matcher(_node(layer, shape, gelu))
    kinds = {k for k, _ in seen}
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        _poison_scratch()
        got = spec.fn(x, None)
        _poison_scratch()
        again = spec.fn(x, None)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(again, got)
    assert "encoder_native" in kinds   # (4 rows or more: every product splits, so the layer is built)


def test_native_layer_is_built_and_kept_at_transformer_block_shapes(monkeypatch):
    """transformer_block's layer (128 tokens, d 256, 4 heads, 1024): built, each linear's two splits
    timed, kept where it timed faster, right; another batch goes to the fallback."""
    layer = _layer(256, 4, 1024, False, False, 1)
    shape = (1, 128, 256)
    x = np.random.default_rng(2).standard_normal(shape, dtype=np.float32)
    seen: list = []
    _pin(monkeypatch, "cols", "native", seen)
    spec = K.transformer_encoder_layer_matcher(_node(layer, shape, False))
    assert [k for k, _ in seen].count("native_layer_linear") == 4 and ("encoder_native", ["layer", "native"]) in seen
    with torch.no_grad():
        want = layer(torch.from_numpy(x)).numpy()
        x2 = np.random.default_rng(3).standard_normal((2, 9, 256), dtype=np.float32)
        want2 = layer(torch.from_numpy(x2)).numpy()
    np.testing.assert_allclose(spec.fn(x, None), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(spec.fn(x2, None), want2, rtol=1e-4, atol=1e-4)


def test_native_layer_with_a_key_padding_mask(monkeypatch):
    """The mask's additive bias on the scores: an entry with every key padded gives NaN, as torch's
    fused layer; the others equal torch's."""
    layer = _layer(32, 4, 64, False, False, 12)
    shape = (3, 9, 32)
    _pin(monkeypatch)
    spec = K.transformer_encoder_layer_matcher(_node(layer, shape, False, mask=True))
    x = np.random.default_rng(4).standard_normal(shape, dtype=np.float32)
    pad = np.arange(9)[None] >= np.array([9, 4, 0])[:, None]
    got = spec.fn(x, pad)
    with torch.no_grad():
        want = layer(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(pad)).numpy()
    assert np.isnan(want[2]).all() and np.isnan(got[2]).all()
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("env", ["SRCORE_CPU_NATIVE_LAYER", "SRCORE_CPU_NATIVE_SPLIT"])
def test_turned_off_or_one_thread_not_built(monkeypatch, env):
    layer = _layer(32, 4, 64, False, False, 5)
    seen: list = []
    _pin(monkeypatch, seen=seen)
    monkeypatch.setenv(env, "0")
    K.transformer_encoder_layer_matcher(_node(layer, (2, 8, 32), False))
    assert not any(k in ("encoder_native", "native_layer_linear") for k, _ in seen)
    monkeypatch.delenv(env)
    monkeypatch.setattr(P, "intra_op_threads", lambda: 1)
    seen.clear()
    K.transformer_encoder_layer_matcher(_node(layer, (2, 8, 32), False))
    assert seen == []

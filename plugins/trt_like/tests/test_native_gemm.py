"""trt_like's GEMM layers split over the core's native team (tactics/native.py: ``native_rows``,
``native_cols``; parts calling numpy's OpenBLAS without the GIL; offered with
``SRCORE_TRT_LIKE_NATIVE_GEMM=1``): against torch over shapes, two threads forced; when the builder offers
them; an engine at two threads on them against torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore.ir.parser import parse_graph
from srcore.plugin import native_team as NT
from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.tactics import native as tactic

pytestmark = pytest.mark.skipif(NT.sgemm_address() is None, reason="numpy's BLAS is not an ILP64 OpenBLAS")


@pytest.fixture(autouse=True)
def _offered(monkeypatch):
    monkeypatch.setenv(tactic.ENV, "1")   # (opt-in: SRCORE_TRT_LIKE_NATIVE_GEMM=1)


def _layer(m, n, k, seed=0, lead=()):
    net = Network()
    x, y = net.new_tensor((*lead, m, k)), net.new_tensor((*lead, m, n))
    w = np.random.default_rng(seed).standard_normal((n, k), dtype=np.float32)
    layer = Layer("gemm", [x], [y], {"weight": w, "bias": None})
    net.layers.append(layer)
    return layer, net


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 50), n=st.integers(1, 120), k=st.integers(1, 90), threads=st.sampled_from([2, 3]),
       lead=st.sampled_from([(), (2,)]), seed=st.integers(0, 99))
def test_both_splits_match_torch(m, n, k, threads, lead, seed):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parallel, "count", lambda: threads)
        mp.setattr(tactic, "MIN_WORK", 1)
        layer, net = _layer(m, n, k, seed, lead)
        cands = {c.name: c for c in tactic.gemm_candidates(layer, net)}
    rows = m * int(np.prod(lead, dtype=int))
    assert ("native_rows" in cands) == (rows >= 2 * threads)
    assert ("native_cols" in cands) == (n // 16 >= 2 * threads)
    x = np.random.default_rng(seed + 1).standard_normal((*lead, m, k), dtype=np.float32)
    want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(layer.attrs["weight"])).numpy()
    for name, c in cands.items():
        out = np.full(want.shape, np.nan, np.float32)
        c.build().fn(x, out)
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=3e-5, err_msg=name)


def test_offered_by_work_and_threads(monkeypatch):
    mid = _layer(128, 256, 256)                        # 8.4 M: bert_encoder's projections
    small = _layer(16, 64, 64)
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert tactic.gemm_candidates(*mid) == []
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert [(c.name, c.blas) for c in tactic.gemm_candidates(*mid)] == [("native_rows", None), ("native_cols", None)]
    monkeypatch.delenv(tactic.ENV)                     # not offered unless asked for
    assert tactic.gemm_candidates(*mid) == []
    monkeypatch.setenv(tactic.ENV, "1")
    assert tactic.gemm_candidates(*small) == []      # (65 K multiply-adds: under MIN_WORK)
    big = _layer(64, 1024, 1024)                       # 67 M: the intra-op policy splits it on its pools
    assert parallel.for_work(64 * 1024 * 1024) > 1 and tactic.gemm_candidates(*big) == []


MLP = """graph(%x : Float(96, 256)):
  %w1 : Float(520, 256) = prim::Constant[param="w1"]()
  %b1 : Float(520) = prim::Constant[param="b1"]()
  %w2 : Float(200, 520) = prim::Constant[param="w2"]()
  %h : Tensor = aten::linear(%x, %w1, %b1)
  %r : Tensor = aten::gelu(%h)
  %y : Tensor = aten::linear(%r, %w2)
  return (%y)
"""


@pytest.mark.parametrize("keep", ["native_rows", "native_cols"])
def test_an_engine_at_two_threads_on_it_matches_torch(monkeypatch, keep):
    monkeypatch.setattr(parallel, "count", lambda: 2)
    rng = np.random.default_rng(2)
    g = parse_graph(MLP)
    params = {"w1": rng.standard_normal((520, 256), dtype=np.float32) / 16,
              "b1": rng.standard_normal(520, dtype=np.float32),
              "w2": rng.standard_normal((200, 520), dtype=np.float32) / 23}
    for node in g.nodes:
        if node.kind == "prim::Constant" and node.attrs.get("param") in params:
            node.attrs["value"] = params[node.attrs["param"]]
    x = rng.standard_normal((96, 256), dtype=np.float32)
    t = {k: torch.from_numpy(v) for k, v in params.items()}
    F = torch.nn.functional
    want = F.linear(F.gelu(F.linear(torch.from_numpy(x), t["w1"], t["b1"])), t["w2"]).numpy()
    other = {"native_rows": "native_cols", "native_cols": "native_rows"}[keep]
    sm = srcore.StaticModule(g, options=srcore.Options(backends=("trt_like", "cpu"), engine_options={
        "exclude_tactics": ["numpy", "mkl_packed", "mkl_split", "numpy_split", "packed_sgemm", "packed_sgemm16",
                            "packed_sgemm_split", "packed_sgemm16_split", other], "timing_cache": False}))
    desc = sm.partition.engines[0].description
    assert desc.count(f"[{keep}]") == 2, desc
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-4)

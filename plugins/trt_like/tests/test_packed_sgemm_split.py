"""The packed-panel SGEMM split over numba's OpenMP team (kernels/sgemm_split.py, tactic ``packed_sgemm_split``
at more than one intra-op thread): against float64 over odd shapes (every row tile, partial panels, row,
panel and k blocks, chunks ending mid-block), split by rows and by columns on 2 and 3 parts with numba's
team forced to 2 threads, the one-thread kernel's bits whatever the split or team; when the builder offers
it; an engine on it against torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore.ir.parser import parse_graph
from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.kernels import sgemm
from srcore_trt_like.kernels import sgemm_split as split
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.tactics import sgemm as tactic
from srcore_trt_like.tactics import table


def _case(m, n, k, seed, lead=()):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((*lead, m, k), dtype=np.float32))


def _check(m, n, k, lanes, parts, by_rows, seed):
    w, x = _case(m, n, k, seed)
    one = np.full((m, n), np.nan, np.float32)
    sgemm.PackedSgemm(w, lanes)(x, one)
    parallel.use(2)           # two threads really run the parts (numba's team of this thread)
    out = np.full((m, n), np.nan, np.float32)
    split.SplitSgemm(w, lanes, parts=parts, by_rows=by_rows)(x, out)
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=0, atol=4 * k * np.finfo(np.float32).eps * np.abs(want).max() + 1e-6)
    np.testing.assert_array_equal(out, one)      # every value the one-thread kernel's sum, in its order


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 60), n=st.integers(1, 140), k=st.integers(1, 300), lanes=st.sampled_from([8, 16]),
       parts=st.sampled_from([2, 3]), by_rows=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_matches_float64_and_the_one_thread_bits(m, n, k, lanes, parts, by_rows, seed):
    _check(m, n, k, lanes, parts, by_rows, seed)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("m,n,k", [(250, 530, 700), (241, 1030, 257), (64, 4096 // 8, 513), (95, 17, 1)])
@pytest.mark.parametrize("by_rows", [True, False])
def test_row_panel_and_k_blocks(m, n, k, by_rows):
    """Past one block of rows (MC), panels (NCP) and k (KC), chunks of rows and panels ending inside them."""
    _check(m, n, k, 8, 2, by_rows, 7)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_the_default_split_and_chunks():
    assert split.split_rows(300, 64) and not split.split_rows(64, 4096)
    assert split.chunk(64, 4096, 8, 2, False) == sgemm.NCP           # panels: at most one packed block
    assert split.chunk(128, 256, 8, 2, False) == 4                   # 16 panels: two claims a part
    assert split.chunk(300, 64, 8, 2, True) % 6 == 0


def _layer(m, n, k):
    net = Network()
    x, y = net.new_tensor((m, k)), net.new_tensor((m, n))
    w = np.random.default_rng(0).standard_normal((n, k), dtype=np.float32)
    layer = Layer("gemm", [x], [y], {"weight": w, "bias": None})
    net.layers.append(layer)
    return layer, net


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_offered_by_work_and_threads(monkeypatch):
    monkeypatch.setattr(tactic._sc, "lanes", lambda features=None: 8)
    monkeypatch.setattr(parallel, "count", lambda: 1)
    big = _layer(64, 1024, 1024)                       # 67 M multiply-adds
    mid = _layer(128, 256, 256)                        # 8.4 M: bert_encoder's projections
    small = _layer(16, 64, 64)
    for layer, net in (big, mid, small):
        assert [c.name for c in tactic.gemm_candidates(layer, net)] == ["packed_sgemm"]
        assert not table.threaded(layer, net)
    monkeypatch.setattr(parallel, "count", lambda: 2)
    cands = tactic.gemm_candidates(*big)
    assert [(c.name, c.blas) for c in cands] == [("packed_sgemm_split", "omp")] and table.threaded(*big)
    for layer, net in (mid, small):            # below the intra-op policy's work: one thread
        assert [c.name for c in tactic.gemm_candidates(layer, net)] == ["packed_sgemm"]
        assert not table.threaded(layer, net)
    monkeypatch.setattr(tactic, "SMALL_SPLIT_WORK", 4_000_000)      # (SRCORE_TRT_LIKE_SMALL_SGEMM_SPLIT=1)
    assert [c.name for c in tactic.gemm_candidates(*mid)] == ["packed_sgemm_split", "packed_sgemm"]
    assert table.threaded(*mid)
    assert [c.name for c in tactic.gemm_candidates(*small)] == ["packed_sgemm"]
    assert not table.threaded(*small)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_the_governed_kernel_alone_and_on_its_team_and_restored(monkeypatch):
    monkeypatch.setattr(tactic._sc, "lanes", lambda features=None: 8)
    monkeypatch.setattr(parallel, "count", lambda: 2)
    monkeypatch.setattr(tactic, "SMALL_SPLIT_WORK", 4_000_000)
    layer, net = _layer(128, 256, 256)
    (cand, _) = tactic.gemm_candidates(layer, net)
    kernel = cand.build()
    x = np.random.default_rng(1).standard_normal((128, 256), dtype=np.float32)
    outs = []
    for hold in (10**9, 0):                  # the governor's pick: the caller alone, then the team
        kernel.keep.governor.hold = hold
        out = np.full((128, 256), np.nan, np.float32)
        before = dict(parallel.COUNTS)
        kernel.fn(x, out)
        assert parallel.COUNTS["solo" if hold else "team"] == before["solo" if hold else "team"] + 1
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], x @ layer.attrs["weight"].T, rtol=1e-4, atol=1e-4)
    again = np.empty_like(outs[0])
    cand.restore(kernel.layout).fn(x, again)     # (a stored plan's packed weight)
    np.testing.assert_array_equal(again, outs[0])


MLP = """graph(%x : Float(96, 256)):
  %w1 : Float(520, 256) = prim::Constant[param="w1"]()
  %b1 : Float(520) = prim::Constant[param="b1"]()
  %w2 : Float(200, 520) = prim::Constant[param="w2"]()
  %h : Tensor = aten::linear(%x, %w1, %b1)
  %r : Tensor = aten::gelu(%h)
  %y : Tensor = aten::linear(%r, %w2)
  return (%y)
"""


def test_an_engine_at_two_threads_on_it_matches_torch(monkeypatch):
    monkeypatch.setattr(parallel, "count", lambda: 2)
    monkeypatch.setattr(tactic, "SMALL_SPLIT_WORK", 4_000_000)      # (layers of 10-13 M multiply-adds)
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
    sm = srcore.StaticModule(g, options=srcore.Options(backends=("trt_like", "cpu"), engine_options={
        "exclude_tactics": ["numpy", "mkl_packed", "mkl_split", "numpy_split", "packed_sgemm", "packed_sgemm16",
                            "native_rows", "native_cols"],
        "timing_cache": False}))
    desc = sm.partition.engines[0].description
    # (either on the team or, where the plan's thread choice found the split losing in sequence, ``@1t``)
    assert desc.count("[packed_sgemm_split") + desc.count("[packed_sgemm16_split") == 2, desc
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_on_the_openmp_pool_beside_mkl(monkeypatch):
    """With MKL the engine's one threaded BLAS, a large layer's candidates on the OpenMP pool keep the split
    (numba's regions and MKL's GNU layer share one libgomp pool)."""
    from srcore_trt_like.tactics import choose

    monkeypatch.setattr(parallel, "count", lambda: 2)
    monkeypatch.setattr(choose, "_one_blas", lambda options: "mkl")
    monkeypatch.setattr(choose, "candidates", lambda layer, net: [
        choose.Candidate("mkl_packed", lambda: None, blas="mkl"),
        choose.Candidate("numpy", lambda: None, blas="openblas"), *tactic.gemm_candidates(layer, net)])
    layer, net = _layer(64, 1024, 1024)
    names = [c.name for c in choose._Pools(net, {}).candidates(layer, choose.POOL)]
    assert "mkl_packed" in names and any(n.startswith("packed_sgemm") and n.endswith("_split") for n in names)
    assert "numpy" not in names

"""Softmax and layer norm rows split over numba's OpenMP team (kernels/rows_split.py, the
``numba_split`` tactic at more than one intra-op thread): torch's results, the same bits alone and
on the team, and when the builder offers it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.tactics import nn, table

pytestmark = pytest.mark.one_pass


def _layer(kind, shape):
    net = Network()
    x, y = net.new_tensor(shape), net.new_tensor(shape)
    rng = np.random.default_rng(4)
    if kind == "softmax":
        attrs = {"dim": len(shape) - 1}
    else:
        attrs = {"size": shape[-1], "eps": 1e-5, "weight": rng.standard_normal(shape[-1]).astype(np.float32),
                 "bias": rng.standard_normal(shape[-1]).astype(np.float32)}
    layer = Layer(kind, [x], [y], attrs)
    net.layers.append(layer)
    return layer, net


def _torch(kind, layer, x):
    t = torch.from_numpy(x)
    if kind == "softmax":
        return torch.softmax(t, -1).numpy()
    a = layer.attrs
    return torch.nn.functional.layer_norm(t, (a["size"],), torch.from_numpy(a["weight"]),
                                          torch.from_numpy(a["bias"]), a["eps"]).numpy()


@pytest.mark.parametrize("kind", ["softmax", "layer_norm"])
@pytest.mark.parametrize("shape", [(3, 7, 33), (1, 4, 128, 128), (5, 1)])
def test_split_rows_match_torch_with_the_same_bits_alone_and_on_the_team(monkeypatch, kind, shape):
    monkeypatch.setattr(parallel, "count", lambda: 2)
    monkeypatch.setattr(nn, "ROW_WORK", parallel.PARALLEL_MIN_WORK)      # offered at these small sizes
    layer, net = _layer(kind, shape)
    (cand,) = nn.rows_split(layer, net)
    assert (cand.name, cand.blas) == ("numba_split", "omp")
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32) * 3
    kernel = cand.build()
    outs = []
    for hold in (10**9, 0):                  # the governor's pick: the caller alone, then the team
        kernel.keep.hold = hold
        out = np.full(shape, np.nan, np.float32)
        before = dict(parallel.COUNTS)
        kernel.fn(x, out)
        assert parallel.COUNTS["solo" if hold else "team"] == before["solo" if hold else "team"] + 1
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[1], _torch(kind, layer, x), rtol=1e-5, atol=1e-5)


def test_offered_above_one_thread_on_large_layers_of_several_rows(monkeypatch):
    big = (4, 1 << 19)                      # 2 M elements: ~0.6 ms of softmax
    assert 4 * (1 << 19) * nn.ROW_WORK >= parallel.PARALLEL_MIN_WORK
    layer, net = _layer("softmax", big)
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert nn.rows_split(layer, net) == [] and not table.threaded(layer, net)
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert [c.name for c in nn.rows_split(layer, net)] == ["numba_split"] and table.threaded(layer, net)
    small, small_net = _layer("softmax", (4, 128, 128))       # bert's: 0.15 ms, stays whole
    one_row, one_net = _layer("layer_norm", (1, 1 << 21))
    not_last, nl_net = _layer("softmax", big)
    not_last.attrs["dim"] = 0
    for lay, n in ((small, small_net), (one_row, one_net), (not_last, nl_net)):
        assert nn.rows_split(lay, n) == []


@pytest.mark.full      # compiles a parallel region of its own (~4 s)
def test_claims_hand_out_each_part_exactly_once():
    """The split regions' counter (kernels/atomics.py): two threads claiming 20,000 parts of a region
    take each exactly once (a plain increment would hand some out twice)."""
    from numba import njit, prange

    from srcore_trt_like.kernels.atomics import claim

    @njit(parallel=True)
    def region(seen, nt):
        nxt = np.zeros(1, np.int64)
        for t in prange(nt):
            i = claim(nxt)
            while i < seen.shape[0]:
                seen[i] += 1
                i = claim(nxt)
    parallel.use(2)
    seen = np.zeros(20_000, np.int64)
    region(seen, 2)
    assert (seen == 1).all()

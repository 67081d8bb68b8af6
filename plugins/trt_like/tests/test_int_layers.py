"""A detector's integer tail in one engine (masks combined and negated, ranks by a cumsum of
bools made int64, one-hot class ids, floor ``//`` and ``%``, integer compares, casts, flip and
roll) against torch: layer by layer (the numpy tactics) and as the compiled segment's generated
code (run as Python here: its numba compile is left to the parity zoo, so no kernel is compiled
for this file)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import srcore
from srcore_trt_like.tactics import segment
from _trt_segment import segment_as_python as _as_python

pytestmark = pytest.mark.one_pass   # engines do not depend on the executor or the memory planner

TRT = ("trt_like", "cpu")


class IntTail(torch.nn.Module):
    def forward(self, s, ids, m1, m2):
        keep = ~(m1 & m2)
        both, odd = m1 | m2, m1 ^ m2
        rank = torch.cumsum(keep.long(), 1) - 1
        onehot = F.one_hot(ids % 3, 3) * keep.long().unsqueeze(-1)
        q = ids // 4
        r = torch.remainder(ids, rank + 2)
        fd = torch.floor_divide(ids, rank + 2)
        big = (ids > rank) & torch.logical_not(odd)
        lin = ids * 5 + rank - 2 * q
        return (keep, both, odd, rank, onehot, q, r, fd, big, ids.eq(3), torch.cumsum(both, 1),
                s.to(torch.int64), ids.to(torch.bool), lin, ids.sub(rank, alpha=2), 3 - ids,
                torch.maximum(ids, rank), torch.flip(onehot, [1, -1]), torch.roll(rank, 2, 1), torch.flip(s, [0]))


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-9, 9, (2, 8)).astype(np.float32), rng.integers(-9, 10, (2, 8)).astype(np.int64),
            rng.random((2, 8)) < 0.5, rng.random((2, 8)) < 0.5)


def _build(mode: str, module: torch.nn.Module, example) -> srcore.StaticModule:
    model = srcore.from_torchscript(torch.jit.script(module), example)
    if mode == "numpy":
        options = {"timing": False, "exclude_tactics": ("segment",)}
        return srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=options))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(segment, "compiled", _as_python)
        return srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False}))


@pytest.fixture(scope="module", params=["numpy", "segment"])
def tail(request):
    return request.param, _build(request.param, IntTail(), tuple(torch.from_numpy(x) for x in _inputs(0)))


def test_the_integer_tail_is_one_engine(tail):
    mode, sm = tail
    assert len(sm.partition.engines) == 1 and not sm.partition.refused, sm.partition.format()
    assert ("segment -> " in sm.partition.format()) == (mode == "segment"), sm.partition.format()


@pytest.mark.parametrize("seed", [1, 2])
def test_the_integer_tail_matches_torch(tail, seed):
    xs = _inputs(seed)
    want = IntTail()(*(torch.from_numpy(x) for x in xs))
    got = tail[1](*xs)
    for k, (g, w) in enumerate(zip(got, want)):
        w = w.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=f"output {k}")


class OneHot(torch.nn.Module):
    def forward(self, ids):
        return F.one_hot(ids.abs() % 8, 4)


@pytest.mark.parametrize("mode", ["numpy", "segment"])
def test_a_class_id_out_of_range_raises_naming_the_node(mode):
    ids = torch.full((2, 8), 7)
    with pytest.raises(RuntimeError):   # torch refuses it too
        OneHot()(ids)
    sm = _build(mode, OneHot(), (torch.zeros(2, 8, dtype=torch.int64),))
    with pytest.raises(srcore.SrcoreError) as err:
        sm(ids.numpy())
    assert "one_hot" in str(err.value), str(err.value)

"""The index-family layers (topk, argmax / argmin, argsort, max / min along a dim, amax / amin, the
count, any and all of a mask, not, int64 gather, squeeze) against torch, compiled whole (ONE segment
for the module) and layer by layer (the numpy tactics, segment excluded), on values hypothesis
draws with ties and NaNs.

torch leaves the order of equal elements in ``topk`` and in the default (unstable) ``sort`` /
``argsort`` unspecified, and its CPU kernels do not keep them in input order; the engine does
(``stable=True``): the indices are checked against torch's stable sort, and torch's own indices
are checked to name the same values."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import srcore

pytestmark = pytest.mark.one_pass   # engines do not depend on the executor or the memory planner

TRT = ("trt_like", "cpu")
K = 4


class IndexOps(torch.nn.Module):
    def forward(self, x, ids, z):
        # x: (3, 9) float; ids: (3, 5) int64; z: (2, 48) float (lines of >= 8k: topk's cut)
        top, ti = torch.topk(x, 4, dim=-1)
        low, li = torch.topk(x, 2, dim=0, largest=False)
        am = torch.argmax(x, dim=-1, keepdim=True)
        an = torch.argmin(x, dim=0)
        af = torch.argmax(x)
        order = torch.argsort(x, dim=1)
        iorder = torch.argsort(ids, dim=-1, descending=True)
        picked = torch.gather(ids, 1, iorder[:, :2])           # an int64 gather
        first = torch.gather(ti, 1, torch.argmax(top, -1, keepdim=True)).squeeze(1)
        keep = x > 0.5
        count = (~keep).sum(-1)
        mx, mi = torch.max(x, 1)
        mn, ni = torch.min(x, -2, keepdim=True)
        return (top, ti, low, li, am, an, af, order, iorder, picked, first, count, x.amax(-1),
                x.amin(dim=(0, 1), keepdim=True), first.unsqueeze(0), mx, mi, mn, ni, keep.any(-1),
                keep.all(0, keepdim=True), keep.any(), *torch.topk(z, 3), *torch.topk(z, 5, largest=False))


STABLE = {1: ("topk", -1, True, K), 3: ("topk", 0, False, 2), 7: ("argsort", 1, False, None)}


def _reference(x, ids, z):
    out = list(IndexOps()(x, ids, z))
    for k, (_, dim, descending, n) in STABLE.items():
        v, i = torch.sort(x, dim=dim, descending=descending, stable=True)
        torch_values = out[k - 1] if n else torch.gather(x, dim, out[k])
        # torch's own indices name the values the stable order has there (NaN where NaN)
        sl = (slice(None), slice(0, n)) if dim in (1, -1) else (slice(0, n),)
        np.testing.assert_array_equal(torch.gather(x, dim, out[k]).numpy(), v[sl].numpy())
        np.testing.assert_array_equal(torch_values.numpy(), v[sl].numpy())
        out[k] = i[sl]
    out[8] = torch.sort(ids, dim=-1, descending=True, stable=True)[1]
    out[9] = torch.gather(ids, 1, out[8][:, :2])
    first = torch.gather(out[1], 1, torch.argmax(out[0], -1, keepdim=True)).squeeze(1)
    out[10], out[14] = first, first.unsqueeze(0)
    for k, n, descending in ((23, 3, True), (25, 5, False)):
        v, i = torch.sort(z, dim=-1, descending=descending, stable=True)
        np.testing.assert_array_equal(out[k - 1].numpy(), v[:, :n].numpy())
        np.testing.assert_array_equal(torch.gather(z, 1, out[k]).numpy(), v[:, :n].numpy())
        out[k] = i[:, :n]
    return out


EXAMPLE = (torch.randn(3, 9), torch.randint(0, 4, (3, 5)), torch.randn(2, 48))


def _module(**engine_options):
    model = srcore.from_torchscript(torch.jit.script(IndexOps().eval()), EXAMPLE)
    return srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False,
                                                                                           **engine_options}))


@pytest.fixture(scope="module")
def modules():
    return _module(), _module(exclude_tactics=("segment",))


def test_the_index_ops_are_one_engine_compiled_whole(modules):
    whole, layers = modules
    for sm in modules:
        assert len(sm.partition.engines) == 1 and not sm.partition.refused, sm.partition.format()
    assert "segment -> " in whole.partition.format(), whole.partition.format()
    assert "segment -> " not in layers.partition.format(), layers.partition.format()


def _check(got, want):
    for k, (g, w) in enumerate(zip(got, want)):
        w = w.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=f"output {k}")


SPECIAL = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, float("nan"), float("inf"), -float("inf")])


@settings(max_examples=40, deadline=None)
@given(x=hnp.arrays(np.float32, (3, 9), elements=st.one_of(SPECIAL, st.floats(-4, 4, width=32))),
       ids=hnp.arrays(np.int64, (3, 5), elements=st.integers(-3, 3)),
       # long lines: NaN-free (the cut) with many ties, or with a NaN somewhere (no cut)
       z=hnp.arrays(np.float32, (2, 48), elements=st.one_of(st.sampled_from([0.0, -0.0, 1.0, 2.0, float("inf")]),
                                                            st.floats(-4, 4, width=32))),
       nan_at=st.none() | st.integers(0, 47))
def test_index_ops_against_torch(modules, x, ids, z, nan_at):
    if nan_at is not None:
        z[1, nan_at] = np.nan
    want = _reference(torch.from_numpy(x), torch.from_numpy(ids), torch.from_numpy(z))
    for sm in modules:
        with np.errstate(all="ignore"):
            _check(sm(x, ids, z), want)


def test_nonzero_stays_outside_the_engine():
    """``nonzero`` has a data-dependent shape: the cpu plugin runs it, the rest is an engine."""

    class NonZero(torch.nn.Module):
        def forward(self, x):
            m = torch.argmax(x, -1) + torch.argmin(x, -1)
            return torch.nonzero(x > 0.0), m, x.amax(-1)

    x = torch.randn(3, 5)
    model = srcore.from_torchscript(torch.jit.script(NonZero()), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False}))
    text = sm.partition.format()
    assert "aten::nonzero" in text.split("outside engines", 1)[-1], text
    for g, w in zip(sm(x.numpy()), NonZero()(x)):
        np.testing.assert_array_equal(g, w.numpy())

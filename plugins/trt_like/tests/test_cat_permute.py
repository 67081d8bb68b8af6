"""A ``permute`` (and the ``reshape`` of it) that only a ``cat`` reads, folded into the cat's copy
(``builder/fusion.py`` fuse_cat_permute, ``tactics/data.py`` cat): an SSD-style head's
``permute(0, 2, 3, 1).reshape(N, -1, K)`` per level (the compiled channels-last copy), a permute of
another kind (numpy into the slice seen in the permuted shape) and permutes that must stay (returned,
or read twice), against torch, and through a saved plan; laid out alone and compiled in segments
(``tactics/segment.py``: a folded permute's slice of the cat, softmax over short rows)."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn
TRT = ("trt_like", "cpu")


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Conv2d(6, 10, 3, padding=1)
        self.box = nn.Conv2d(6, 8, 1)

    def forward(self, a, b):
        n = a.shape[0]
        cls = torch.cat([self.cls(f).permute(0, 2, 3, 1).contiguous().view(n, -1, 5) for f in (a, b)], 1)
        box = torch.cat([self.box(a).permute(0, 2, 3, 1).reshape(n, -1, 4),
                         b[:, :4].permute(0, 2, 3, 1).reshape(n, -1, 4)], 1)
        # a permute of another kind (H to last), and one whose result is also returned
        other = torch.cat([self.box(b).permute(0, 1, 3, 2), self.box(b)], 3)
        kept = self.cls(b).permute(0, 2, 3, 1)
        return torch.softmax(cls, -1), box, other, torch.cat([kept, kept], 1), kept


def _engine(sm) -> list[str]:
    return [line.strip() for line in sm.partition.engines[0].description.splitlines()[1:]]


@pytest.mark.parametrize("exclude", [(), ("segment",)])
def test_permutes_fold_into_their_cats_and_match_torch(tmp_path, exclude):
    torch.manual_seed(0)
    m = Head().eval()
    xs = (torch.randn(2, 6, 4, 6), torch.randn(2, 6, 3, 3))
    model = srcore.from_torchscript(torch.jit.script(m), xs)
    # timing off: segments are kept whenever found (with timing, a loaded machine may keep the layers)
    opts = {"exclude_tactics": exclude, "timing": False}
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=opts))
    layers = _engine(sm)
    if exclude:
        # the three folded cats' permutes are gone; the returned one stays (one permute layer)
        assert sum(line.startswith("permute") for line in layers) == 1, layers
    else:
        # the folded cats and the softmax after the convs are compiled (tactics/segment.py): a cat
        # copies each of its pieces in its own call laid out alone, enough for a run beside NCHW16c
        assert not any(line.startswith(("cat", "softmax")) for line in layers), layers
    with torch.no_grad():
        want = m(*xs)
    for _ in range(2):   # (the second call: the same arena buffers)
        got = sm(*(x.numpy() for x in xs))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
    path = tmp_path / "head.srm"
    sm.save(path)
    again = srcore.StaticModule(srcore.load(path), options=srcore.Options(backends=TRT, engine_options=opts))
    assert "loaded from the serialized engine" in again.partition.engines[0].description
    for g, w in zip(again(*(x.numpy() for x in xs)), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)

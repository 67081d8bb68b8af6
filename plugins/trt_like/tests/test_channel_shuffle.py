"""The fused channel shuffle (``builder/shuffle.py``) against torch: ShuffleNetV2's units (cat,
view / transpose / view, chunk), other group counts and chunk sizes, and the shapes the pass must
only partly fuse (a cat or a shuffle output read elsewhere, an engine output)."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore_trt_like.builder.shuffle import shuffle_perm

torch = pytest.importorskip("torch")
nn = torch.nn


def shuffle(x: torch.Tensor, g: int) -> torch.Tensor:
    n, c, h, w = x.size()
    return x.view(n, g, c // g, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


def _engine(m, *xs):
    model = srcore.from_torchscript(torch.jit.script(m), xs)
    # the layers, not a compiled run of them (tactics/segment.py takes small all-copy networks)
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={"exclude_tactics": ["segment"]})
    sm = srcore.StaticModule(model, options=opts)
    return sm, "\n".join(e.description for e in sm.partition.engines)


class Units(nn.Module):
    """A stride-2 ShuffleNetV2 unit (two branches) and two stride-1 ones (chunk, cat, shuffle)."""

    def __init__(self, c=16):
        super().__init__()
        self.b1 = nn.Sequential(nn.Conv2d(c, c, 3, 2, 1, groups=c), nn.Conv2d(c, c, 1), nn.ReLU())
        self.b2 = nn.Sequential(nn.Conv2d(c, c, 1), nn.ReLU(), nn.Conv2d(c, c, 3, 2, 1, groups=c))
        self.r = nn.ModuleList(nn.Sequential(nn.Conv2d(c, c, 1), nn.ReLU(), nn.Conv2d(c, c, 3, 1, 1, groups=c),
                                             nn.Conv2d(c, c, 1), nn.ReLU()) for _ in range(2))

    def forward(self, x):
        y = shuffle(torch.cat((self.b1(x), self.b2(x)), 1), 2)
        for b in self.r:
            a, z = y.chunk(2, dim=1)
            y = shuffle(torch.cat((a, b(z)), 1), 2)
        return y.mean((2, 3))


def test_shufflenet_units_fuse_into_channel_gathers_and_match_torch():
    torch.manual_seed(0)
    m = Units().eval()
    x = torch.randn(2, 16, 10, 10)
    sm, desc = _engine(m, x)
    # the chunks are the gathers' outputs
    assert desc.count("channel_gather") == 3 and not any(k in desc for k in ("permute", "cat ->", "strided")), desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


class Copies(nn.Module):
    """cat -> shuffle in ``g`` groups -> split into ``sizes``: a pure copy, so the engine's planes
    must equal torch's exactly; ``also`` reads the shuffled tensor or the cat elsewhere too."""

    def __init__(self, g, sizes, also="none"):
        super().__init__()
        self.g, self.also = g, also
        self.bounds = np.cumsum([0, *sizes]).tolist()

    def forward(self, x, y):
        c = torch.cat((x, y * 2.0), 1)
        s = shuffle(c, self.g)
        parts = [s[:, self.bounds[i]:self.bounds[i + 1]] + 0.0 for i in range(len(self.bounds) - 1)]
        if self.also == "shuffled":
            parts.append(torch.relu(s))
        elif self.also == "cat":
            parts.append(c * 3.0)
        elif self.also == "output":
            parts.append(s)
        return torch.cat([p.flatten() for p in parts])


@pytest.mark.parametrize("g, cx, cy, sizes, also, n", [
    (2, 6, 6, [6, 6], "none", 1),
    (3, 4, 8, [5, 7], "none", 2),            # chunks that cut across the groups
    (4, 8, 4, [3, 4, 5], "none", 2),
    (2, 5, 3, [4, 4], "shuffled", 1),        # the shuffle's output read by a relu too: the chunks stay
    (3, 6, 3, [4, 5], "cat", 2),               # the cat read elsewhere: it stays, the shuffle is one copy
    (2, 4, 4, [2, 6], "output", 1),          # the shuffled tensor an engine output
])
def test_channel_shuffle_copies_every_plane_where_torch_does(g, cx, cy, sizes, also, n):
    m = Copies(g, sizes, also).eval()
    x, y = torch.randn(n, cx, 3, 5), torch.randn(n, cy, 3, 5)
    sm, desc = _engine(m, x, y)
    assert "channel_gather" in desc and "permute" not in desc, desc
    assert desc.count("cat ->") == 1 + (also == "cat"), desc   # (the flattened parts' cat, and the kept one)
    # the slices are the gather's outputs unless something else reads the shuffled tensor
    assert ("strided" in desc) == (also in ("shuffled", "output")), desc
    with torch.no_grad():
        want = m(x, y).numpy()
    np.testing.assert_array_equal(sm(x.numpy(), y.numpy()), want)


def test_shuffle_perm_is_torchs_view_transpose_view():
    for C, g in [(8, 2), (12, 3), (12, 4), (6, 6)]:
        x = torch.arange(C, dtype=torch.float32).reshape(1, C, 1, 1)
        np.testing.assert_array_equal(shuffle_perm(C, g), shuffle(x, g).reshape(C).numpy().astype(np.int64))


def test_a_saved_engine_with_channel_gathers_loads_without_rebuilding(tmp_path, monkeypatch):
    torch.manual_seed(1)
    m = Units(8).eval()
    x = torch.randn(1, 8, 6, 6)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu")))
    path = tmp_path / "units.engine.srm"
    assert sm.save(path) == ["trt_like_engine_0"]
    from srcore_trt_like import engine

    monkeypatch.setattr(engine, "make_plan", lambda *a, **k: pytest.fail("a stored plan was rebuilt"))
    again = srcore.StaticModule(srcore.load(path), backends=("trt_like", "cpu"))
    assert "channel_gather" in "\n".join(e.description for e in again.partition.engines)
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(again(x.numpy()), want, rtol=1e-4, atol=1e-5)

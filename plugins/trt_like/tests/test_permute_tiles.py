"""The ``transpose_tiles`` tactic of a float32 ``permute`` that is a batch of matrix transposes
(``tactics/data.py`` batched_transpose, ``kernels/layout_copy.py`` transpose_tiles): which
permutes it takes, its copy against numpy's transposed copy over shapes and tile edges, and in an
engine (a detection head's decoding permute, NCHW -> NHWC of a 32x32 map) against torch."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore_trt_like.kernels.layout_copy import transpose_tiles
from srcore_trt_like.tactics.data import batched_transpose

torch = pytest.importorskip("torch")
nn = torch.nn
TRT = ("trt_like", "cpu")


def test_which_permutes_are_batched_transposes():
    assert batched_transpose((0, 1, 3, 4, 2), (1, 3, 25, 32, 32)) == (3, 25, 1024)   # a YOLO head's
    assert batched_transpose((0, 2, 3, 1), (2, 64, 7, 9)) == (2, 64, 63)              # NCHW -> NHWC
    assert batched_transpose((0, 3, 1, 2), (2, 7, 9, 64)) == (2, 63, 64)              # NHWC -> NCHW
    assert batched_transpose((1, 0), (5, 7)) == (1, 5, 7)
    assert batched_transpose((2, 0, 1), (2, 3, 4)) == (1, 6, 4)
    assert batched_transpose((0, 2, 1, 3), (2, 1, 5, 3)) is None       # a size-1 dim moved: a copy
    assert batched_transpose((1, 0, 2), (2, 3, 4)) is None             # rows kept whole: not this kind
    assert batched_transpose((0, 1, 2), (2, 3, 4)) is None
    assert batched_transpose((2, 1, 0), (2, 3, 4)) is None


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=2, max_size=5), data=st.data())
def test_the_tiled_copy_is_numpys_transposed_copy(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    bmn = batched_transpose(tuple(perm), tuple(shape))
    if bmn is None:
        return
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    x.reshape(-1)[:: 7] = np.nan
    out = np.full(x.transpose(perm).shape, 7.0, np.float32)
    transpose_tiles(x, out, *bmn)
    np.testing.assert_array_equal(out, x.transpose(perm))


@pytest.mark.parametrize("m,n", [(25, 1024), (16, 64), (17, 65), (1, 3), (33, 129)])
def test_tile_edges(m, n):
    x = np.arange(3 * m * n, dtype=np.float32).reshape(3, m, n)
    out = np.empty((3, n, m), np.float32)
    transpose_tiles(x, out, 3, m, n)
    np.testing.assert_array_equal(out, x.transpose(0, 2, 1))


class Decode(nn.Module):
    """A YOLO head's view + permute, and an NCHW -> NHWC permute of a 32x32 map."""

    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(8, 3 * 7, 1)

    def forward(self, x):
        p = self.head(x)
        b, _, h, w = p.shape
        p = p.view(b, 3, 7, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        return p * 2.0, x.permute(0, 2, 3, 1) + 1.0


def test_an_engine_on_the_tiled_permute_matches_torch():
    torch.manual_seed(0)
    m = Decode().eval()
    x = torch.randn(2, 8, 32, 32)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    with torch.no_grad():
        want = m(x)
    for exclude, tactic in ((("numpy", "segment"), "transpose_tiles"), (("transpose_tiles", "segment"), "numpy")):
        opts = {"exclude_tactics": exclude}
        sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=opts))
        layers = [line.strip() for e in sm.partition.engines for line in e.description.splitlines()[1:]]
        assert sum(line.startswith("permute") and f"[{tactic}]" in line for line in layers) == 2, layers
        for _ in range(2):
            got = sm(x.numpy())
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6)


def test_every_batched_transpose_of_small_ranks_is_found():
    """Every permute that moves one run of dims past the run after it is taken."""
    for nd in (2, 3, 4):
        shape = tuple(range(2, 2 + nd))
        for a, b in itertools.combinations(range(nd), 2):   # dims [0, a) stay, [a, b) and [b, nd) swap
            perm = (*range(a), *range(b, nd), *range(a, b))
            assert batched_transpose(perm, shape) is not None, perm


class SmallPermutes(nn.Module):
    def forward(self, x):
        a = torch.sigmoid(x).permute(0, 2, 3, 1) * 2.0     # NCHW -> NHWC: a batch of transposes
        b = (x + 1.0).permute(0, 2, 1, 3) - 0.5             # rows kept whole: a loop nest
        c = x.permute(0, 3, 1, 2) * 3.0                     # the segment's (read-only) argument
        return a, b, c


def test_a_compiled_segment_transposes_through_the_tiles(monkeypatch):
    from srcore_trt_like.tactics import segment

    sources = []
    generate = segment.generate_source

    def spy(layer, net):
        sources.append(generate(layer, net))
        return sources[-1]
    monkeypatch.setattr(segment, "generate_source", spy)
    m = SmallPermutes().eval()
    x = torch.randn(2, 9, 5, 11)
    x[0, 1, 2, 3] = float("nan")
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False}))
    assert "segment -> " in sm.partition.format(), sm.partition.format()
    assert sum(src.count("transpose_tiles(t") for src in sources) == 2, sources
    with torch.no_grad():
        want = m(x)
    for _ in range(2):
        got = sm(x.numpy())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(lead=st.integers(1, 3), c=st.integers(1, 30), s=st.integers(1, 70), before=st.integers(0, 9),
       after=st.integers(0, 9))
def test_a_transpose_into_a_cats_slice(lead, c, s, before, after):
    """``transpose_into``: each NCHW piece written NHWC into its slice of a row of the cat's output
    (``tactics/data.py`` cat, a folded permute), the values around it untouched."""
    from srcore_trt_like.kernels.layout_copy import transpose_into

    x = np.random.default_rng(c * s).standard_normal((lead, c, s)).astype(np.float32)
    rest = before + s * c + after
    out = np.full((lead, rest), 7.0, np.float32)
    transpose_into(x, out, lead, c, s, rest, before)
    want = np.full((lead, rest), 7.0, np.float32)
    want[:, before:before + s * c] = x.transpose(0, 2, 1).reshape(lead, -1)
    np.testing.assert_array_equal(out, want)


def test_the_tactic_on_a_strided_array_copies_as_numpy():
    from srcore_trt_like.builder.network import Network
    from srcore_trt_like.tactics.data import permute_tiles

    net = Network()
    x = net.new_tensor((2, 9, 17), "x")
    net.inputs.append(x)
    net.add("permute", [x], (2, 17, 9), perm=(0, 2, 1))
    run = permute_tiles(net.layers[-1], net)
    base = np.random.default_rng(1).standard_normal((2, 9, 34)).astype(np.float32)
    out = np.empty((2, 17, 9), np.float32)
    run(base[:, :, ::2], out)
    np.testing.assert_array_equal(out, base[:, :, ::2].transpose(0, 2, 1))


def test_the_benchmark_prints_every_case(capsys):
    from benchmarks import permute_copy

    permute_copy.main(["--rounds", "1", "--calls", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(permute_copy.CASES) and all(c[0] in "\n".join(lines) for c in permute_copy.CASES)

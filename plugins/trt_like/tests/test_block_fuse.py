"""A mobile net's inverted-residual blocks as one ``block_omp`` step (``tactics/block_fuse.py``) at 2
intra-op threads: the blocks found (with and without expand, squeeze-excite and residual, strides 1 and 2,
3x3 and 5x5), their result the layer-by-layer plan's bits and torch's on the team of 2 and on the caller
alone, a stored plan restored with its blocks, and the blocks left out at one thread or when excluded."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore_trt_like.kernels import threads as parallel

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402


class SE(nn.Module):
    def __init__(self, c):
        super().__init__()
        r = max(8, c // 4)
        self.fc1, self.fc2 = nn.Conv2d(c, r, 1), nn.Conv2d(r, c, 1)

    def forward(self, x):
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(x, 1)))))


class Block(nn.Module):
    """MobileNetV3's inverted residual (``benchmarks/families.py``'s, written out here)."""

    def __init__(self, cin, k, exp, cout, se, hs, stride):
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
        if se:
            layers.append(SE(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


def _net(cin, blocks, seed):
    """A stem (NCHW in, NCHW16c after), the blocks, a 1x1 head (NCHW16c in, NCHW out): every block's
    convs NCHW16c on both sides."""
    torch.manual_seed(seed)
    layers = [nn.Conv2d(3, cin, 3, 1, 1), nn.Hardswish()]
    c = cin
    for k, exp, cout, se, hs, s in blocks:
        layers.append(Block(c, k, exp, cout, se, hs, s))
        c = cout
    layers.append(nn.Conv2d(c, 8, 1))
    m = nn.Sequential(*layers).eval()
    with torch.no_grad():   # (norm statistics of a trained net, not the identity)
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.3, 0.3)
    return m


def _engine(model, exclude=(), timing=False):
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={
        "nchwc": True, "timing": timing, "exclude_tactics": list(exclude)})
    sm = srcore.StaticModule(model, options=opts)
    return sm, "\n".join(e.description for e in sm.partition.engines)


@pytest.fixture
def two_threads():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(2):
        if parallel.count() < 2:
            pytest.skip("one intra-op thread here")
        yield


def _check(m, x, blocks, monkeypatch):
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    one, _ = _engine(model, ["block_omp"])
    sm, desc = _engine(model)
    assert desc.count("[block_omp]") == blocks, desc
    want = one(x.numpy())
    for team in (2, 1):   # the regions on the team, then on the caller alone: the same bits
        monkeypatch.setattr(parallel.Governor, "team", lambda self, team=team: team)
        for _ in range(2):
            np.testing.assert_array_equal(sm(x.numpy()), want)
    with torch.no_grad():
        np.testing.assert_allclose(want, m(x).numpy(), rtol=1e-4, atol=1e-4)
    return model, desc


def test_mobilenet_v3_blocks_are_one_step_each_with_the_layers_bits(two_threads, monkeypatch):
    """No expand with SE (24 channels: two blocks), expand without SE (stride 2 then residual), expand with
    SE and hardswish (5x5, residual): four blocks, each the layer-by-layer plan's bits and torch's. The first
    block of 16 channels (one channel block: region 1 would leave a part idle) stays layer by layer."""
    m = _net(24, [(3, 24, 24, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
                  (5, 96, 40, True, True, 1)], seed=3)
    _check(m, torch.randn(2, 3, 21, 18), 4, monkeypatch)
    m = _net(16, [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2)], seed=4)
    _, desc = _check(m, torch.randn(1, 3, 15, 15), 1, monkeypatch)
    assert "squeeze_excite" in desc, desc


@st.composite
def _blocks(draw):
    cin = draw(st.sampled_from([8, 16, 24]))
    exp = draw(st.sampled_from([24, cin + 16, 3 * cin, 40, 72]))   # (two channel blocks or more; 24: no expand)
    k, s = draw(st.sampled_from([3, 5])), draw(st.sampled_from([1, 2]))
    cout = draw(st.sampled_from([cin, 16, 40]))
    se, hs = draw(st.booleans()), draw(st.booleans())
    if exp == cin and not se:   # (depthwise + project: two layers, not a block)
        se = True
    H, W = draw(st.integers(3, 17)), draw(st.integers(3, 17))
    return cin, (k, exp, cout, se, hs, s), (draw(st.integers(1, 2)), 3, H, W), draw(st.integers(0, 999))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_blocks())
def test_any_block_gives_the_layers_bits_and_torchs_result(case, two_threads, monkeypatch):
    """Hypothesis over blocks: expand or not, SE or not, residual (stride 1, cin == cout) or not, 3x3 / 5x5,
    strides 1 / 2, odd plane sizes (bands of rows of unequal height), 1-2 images."""
    cin, block, shape, seed = case
    m = _net(cin, [block], seed)
    _check(m, torch.randn(*shape), 1, monkeypatch)


def test_a_stored_plan_keeps_its_blocks(two_threads, tmp_path, monkeypatch):
    """Saved with its engine's plan (``srcore build``'s path) and loaded: the block comes back as a
    ``block_omp`` step (the tactic table's row) without a rebuild, with the same bits."""
    from srcore_trt_like import engine

    m = _net(16, [(5, 48, 16, True, True, 1)], seed=7)
    x = torch.randn(1, 3, 13, 11)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm, desc = _engine(model)
    assert "[block_omp]" in desc, desc
    want = sm(x.numpy())
    path = tmp_path / "m.engine.srm"
    assert sm.save(path)

    def fail(*a, **k):
        raise AssertionError("a stored plan was rebuilt")
    monkeypatch.setattr(engine, "make_plan", fail)
    back = srcore.StaticModule(srcore.load(path), options=srcore.Options(
        backends=("trt_like", "cpu"), engine_options={"nchwc": True, "timing": False, "exclude_tactics": []}))
    desc = "\n".join(e.description for e in back.partition.engines)
    assert desc.count("[block_omp]") == 1, desc
    np.testing.assert_array_equal(back(x.numpy()), want)


def test_left_out_at_one_thread_and_when_excluded(monkeypatch):
    """One intra-op thread: no block step (the regions would run one part after the other); excluded by
    name: none either."""
    from threadpoolctl import threadpool_limits

    m = _net(16, [(3, 48, 16, True, True, 1)], seed=1)
    x = torch.randn(1, 3, 9, 9)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    with threadpool_limits(1):
        _, desc = _engine(model)
        assert "block_omp" not in desc, desc
    with threadpool_limits(2):
        if parallel.count() < 2:
            pytest.skip("one intra-op thread here")
        _, desc = _engine(model, ["block_omp"])
        assert "block_omp" not in desc and "squeeze_excite" in desc, desc


def test_concurrent_callers_each_have_their_own_buffers(two_threads):
    """A ``RuntimePool``'s callers run the block at once: each thread its own expanded and depthwise
    buffers, every result the one-caller result."""
    from concurrent.futures import ThreadPoolExecutor

    m = _net(16, [(3, 64, 24, True, True, 2)], seed=11)
    xs = [torch.randn(1, 3, 12, 10) for _ in range(4)]
    model = srcore.from_torchscript(torch.jit.script(m), (xs[0],))
    sm, desc = _engine(model)
    assert "[block_omp]" in desc, desc
    want = [sm(x.numpy()) for x in xs]
    pool = srcore.RuntimePool(sm, size=2)
    with ThreadPoolExecutor(2) as ex:
        for _ in range(3):
            got = list(ex.map(lambda x: pool.run(x.numpy()), xs))
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)

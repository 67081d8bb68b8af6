"""The fused squeeze-excite layer against torch: any channel counts and reduction ratios, relu /
SiLU / hardswish / no activation inside, hardsigmoid or sigmoid as the gate, batch 1 and 2; and
the blocks the pattern must leave alone."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
F = torch.nn.functional

nn = torch.nn
INNER = {"relu": nn.ReLU, "silu": nn.SiLU, "hardswish": nn.Hardswish, "none": nn.Identity}
GATE = {"hardsigmoid": nn.Hardsigmoid, "sigmoid": nn.Sigmoid}


class SE(torch.nn.Module):
    def __init__(self, c, r, inner, gate, bias=True, leak=False, pool="adaptive"):
        super().__init__()
        self.pre = torch.nn.Conv2d(3, c, 3, padding=1)
        self.fc1 = torch.nn.Conv2d(c, r, 1, bias=bias)
        self.fc2 = torch.nn.Conv2d(r, c, 1)
        self.inner, self.gate, self.leak = INNER[inner](), GATE[gate](), leak
        self.pool = pool

    def forward(self, x):
        x = self.pre(x)
        if self.pool == "adaptive":
            p = F.adaptive_avg_pool2d(x, 1)
        elif self.pool == "mean":     # EfficientNet's form
            p = x.mean((2, 3), keepdim=True)
        else:                         # a mean over other dims: not a squeeze
            p = x.mean((1, 3), keepdim=True).mean(2, keepdim=True).expand(-1, x.shape[1], -1, -1)
        y = x * self.gate(self.fc2(self.inner(self.fc1(p))))
        return y + p if self.leak else y        # leak: the pooled tensor read twice, no fusion


def _engine(m, x):
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu")))
    return sm, "\n".join(e.description for e in sm.partition.engines)


@pytest.mark.parametrize("c, r, inner, gate, n, bias", [
    (16, 4, "relu", "hardsigmoid", 1, True),
    (24, 8, "silu", "sigmoid", 2, True),
    (40, 10, "hardswish", "hardsigmoid", 1, False),
    (12, 12, "none", "sigmoid", 2, True),
])
def test_squeeze_excite_is_one_layer_and_matches_torch(c, r, inner, gate, n, bias):
    torch.manual_seed(c)
    m = SE(c, r, inner, gate, bias).eval()
    x = 2 * torch.randn(n, 3, 9, 7)
    sm, desc = _engine(m, x)
    assert desc.count("squeeze_excite") == 1 and "adaptive_avg_pool2d" not in desc, desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


def test_a_block_whose_pooled_tensor_is_read_elsewhere_is_not_fused():
    torch.manual_seed(1)
    m = SE(8, 2, "relu", "hardsigmoid", leak=True).eval()
    x = torch.randn(1, 3, 6, 6)
    sm, desc = _engine(m, x)
    assert "squeeze_excite" not in desc and "adaptive_avg_pool2d" in desc, desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


def test_calls_on_two_threads_at_once_each_get_their_own_gates():
    """The pooled means were one buffer per layer and the kernels release the GIL: two calls at
    once mixed their gates. Each thread's results must be torch's for its own input."""
    import threading

    torch.manual_seed(3)
    m = SE(64, 16, "relu", "hardsigmoid").eval()
    xs = [3 * torch.randn(1, 3, 40, 40) for _ in range(2)]
    model = srcore.from_torchscript(torch.jit.script(m), (xs[0],))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                           engine_options={"timing": False}))
    assert "squeeze_excite" in sm.partition.engines[0].description
    with torch.no_grad():
        wants = [m(x).numpy() for x in xs]
    bad = []

    def call(i):
        x = xs[i].numpy()
        for _ in range(150):
            got = sm(x)
            if not np.allclose(got, wants[i], rtol=1e-4, atol=1e-5):
                bad.append(i)
                return
    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, f"calls on threads {sorted(set(bad))} got another call's gates"


@pytest.mark.parametrize("n", [1, 2])
def test_a_spatial_mean_squeezes_as_the_pool_does(n):
    """``x.mean((2, 3), keepdim=True)`` (EfficientNet's squeeze) fuses like the adaptive pool; a mean
    over other dims does not."""
    torch.manual_seed(n)
    m = SE(20, 5, "silu", "sigmoid", pool="mean").eval()
    x = 2 * torch.randn(n, 3, 7, 9)
    sm, desc = _engine(m, x)
    assert desc.count("squeeze_excite") == 1 and "mean" not in desc.replace("squeeze_excite", ""), desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)
    other = SE(8, 2, "relu", "sigmoid", pool="channels").eval()
    sm, desc = _engine(other, x)
    assert "squeeze_excite" not in desc, desc
    with torch.no_grad():
        want = other(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


class GlobalMean(torch.nn.Module):
    def __init__(self, keep):
        super().__init__()
        self.conv, self.keep = torch.nn.Conv2d(3, 20, 3, padding=1), keep

    def forward(self, x):
        return self.conv(x).mean((2, 3), keepdim=self.keep) * 2.0


@pytest.mark.parametrize("keep", [False, True])
def test_a_global_spatial_mean_runs_on_the_compiled_pool(keep):
    """``x.mean((2, 3))`` (EfficientNet's, GhostNet's, ConvNeXt's global pool, kept dims or not) is
    the compiled per-plane mean in the engine, with torch's values."""
    torch.manual_seed(5)
    m = GlobalMean(keep).eval()
    x = torch.randn(2, 3, 7, 9)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    # (the first candidate, not the timing's pick: the compiled one is listed first)
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                           engine_options={"timing": False,
                                                                           "exclude_tactics": ["segment"]}))
    desc = "\n".join(e.description for e in sm.partition.engines)
    assert "mean -> " in desc and " [numba]" in desc.split("mean -> ")[1].splitlines()[0], desc
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-5, atol=1e-6)

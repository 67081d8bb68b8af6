"""A VQ-VAE's loss terms inside one trt_like engine, against torch: TorchScript's ``F.mse_loss``
(``broadcast_tensors`` of equal shapes, gone by the peephole rule, then ``aten::mse_loss`` as a
squared difference and its mean or sum), ``x.sum()`` and ``x.mean()`` over all dims."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
F = torch.nn.functional


class Losses(torch.nn.Module):
    def __init__(self, reduction: str):
        super().__init__()
        self.reduction = reduction

    def forward(self, z, q):
        z = torch.relu(z)
        loss = F.mse_loss(q, z.detach(), reduction=self.reduction) + 0.25 * F.mse_loss(z, q.detach(),
                                                                                        reduction=self.reduction)
        p = torch.sigmoid(q)
        return loss, torch.exp(-(p * torch.log(p)).sum()), z.mean() * 2.0


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_and_full_reductions_in_one_engine_match_torch(reduction):
    torch.manual_seed(7)
    m = Losses(reduction).eval()
    args = (torch.randn(2, 4, 3, 3), torch.randn(2, 4, 3, 3))
    model = srcore.from_torchscript(torch.jit.script(m), args)
    sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                           engine_options={"timing": False}))
    report = sm.partition
    assert len(report.engines) == 1 and not report.refused, report.format()
    with torch.no_grad():
        want = m(*args)
    for got, w in zip(sm(*(a.numpy() for a in args)), want):
        assert np.shape(got) == tuple(w.shape)
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-5, atol=1e-6)


def test_mse_loss_of_operands_that_broadcast_runs_outside_the_engine_as_torch():
    class M(torch.nn.Module):
        def forward(self, a, b):
            return F.mse_loss(torch.relu(a), b)

    args = (torch.randn(2, 3), torch.randn(1, 3))
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(M()), args),
                             options=srcore.Options(backends=("trt_like", "cpu"), engine_options={"timing": False}))
    with torch.no_grad():
        want = M()(*args).numpy()
    np.testing.assert_allclose(sm(*(a.numpy() for a in args)), want, rtol=1e-6)
    assert "aten::broadcast_tensors is not in the engine's op table" in sm.partition.format()


def test_layer_profile_of_an_engine_with_a_0d_input_runs_each_layer():
    """(``srcore bench --per-op`` profiles each engine on the inputs it saw; a 0-d one, a VQ-VAE's
    perplexity, was made 1-d and its kernel refused it.)"""
    class M(torch.nn.Module):
        def forward(self, s, x):
            return torch.exp(-s) * torch.relu(x) + 1.0

    args = (torch.tensor(0.5), torch.randn(2, 3))
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(M()), args),
                             options=srcore.Options(backends=("trt_like", "cpu"), engine_options={"timing": False}))
    xs = tuple(a.numpy() for a in args)
    np.testing.assert_allclose(sm(*xs), M()(*args).numpy(), rtol=1e-6)
    metrics = sm.benchmark_individual_ops(xs, warmup=1, runs=2)
    layers = [label for n in metrics.nodes for label, _ in n.layers]
    assert layers and all(" -> " in label for label in layers), metrics.nodes

"""from_torchscript on modules that are frozen already (torch.jit.freeze, torch.jit.save'd files,
torch.jit.optimize_for_inference with its oneDNN-layout nodes): taken as they are, checked
against torch. The parity suites run every model this way too (tests/parity)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import srcore  # noqa: E402

pytestmark = pytest.mark.torch


class _ConvBnMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean(dim=(2, 3)))


def _model():
    torch.manual_seed(0)
    m = _ConvBnMlp().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    return m


def _check(model, m, shapes=((2, 3, 8, 8),)):
    sm = srcore.StaticModule(model)
    for shape in shapes:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = m(x).numpy()
        np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-5, atol=1e-5)


def test_a_frozen_module_and_its_saved_file_convert_without_freezing_again(tmp_path, monkeypatch):
    """A frozen module has no ``training`` attribute: reading it was a raw AttributeError, and
    freezing it again is not the importer's business. Both in memory and from a file."""
    m = _model()
    frozen = torch.jit.freeze(torch.jit.script(m))
    path = tmp_path / "frozen.pt"
    torch.jit.save(frozen, str(path))

    def no_second_freeze(*a, **k):
        raise AssertionError("a frozen module was frozen again")
    monkeypatch.setattr(torch.jit, "freeze", no_second_freeze)
    x = torch.randn(2, 3, 8, 8)
    for src in (frozen, str(path)):
        model = srcore.from_torchscript(src, (x,), dynamic_dims={"x": {0: "batch"}})
        assert model.params, "the frozen constants are parameters"
        _check(model, m, shapes=((2, 3, 8, 8), (5, 3, 8, 8)))


def test_a_frozen_module_with_training_preserved_converts():
    """``preserved_attrs=["training"]`` keeps the attribute: the module still counts as frozen
    enough to freeze again in eval mode (torch allows it), and converts."""
    m = _model()
    frozen = torch.jit.freeze(torch.jit.script(m), preserved_attrs=["training"])
    _check(srcore.from_torchscript(frozen, (torch.randn(2, 3, 8, 8),)), m)


def test_an_unfrozen_module_in_training_mode_is_frozen_in_eval_mode():
    m = _model().train()
    model = srcore.from_torchscript(torch.jit.script(m), (torch.randn(2, 3, 8, 8),))
    assert m.training, "the caller's module keeps its mode"
    _check(model, m.eval())


class _SharedAndInPlace(nn.Module):
    """What optimize_for_inference turns into oneDNN nodes: convs, hardswish / hardtanh / clamp /
    hardsigmoid (in place), a layer norm, a scalar multiply, a squeeze-excite gate (a broadcast
    multiply that oneDNN runs in place on a broadcast copy), and a conv output read twice."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 1)
        self.c3 = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.ln = nn.LayerNorm([8, 6, 6])
        self.se1 = nn.Conv2d(8, 4, 1)
        self.se2 = nn.Conv2d(4, 8, 1)
        self.c4 = nn.Conv1d(8, 8, 3)

    def forward(self, x):
        y = nn.functional.hardswish(self.c1(x))
        z = torch.clamp(self.c2(y), -0.5, 0.75)
        w = nn.functional.hardtanh(self.c3(z), -1.0, 2.0) * 2.0 + self.c2(y)
        s = torch.sigmoid(self.se2(torch.relu(self.se1(nn.functional.adaptive_avg_pool2d(w, 1)))))
        w = nn.functional.hardsigmoid(w * s)
        v = self.c4(self.ln(w).flatten(2))
        return v, y.sum()


def test_optimize_for_inference_modules_lower_to_aten():
    torch.manual_seed(1)
    m = _SharedAndInPlace().eval()
    x = torch.randn(2, 3, 6, 6)
    optimized = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(m)))
    torch_kinds = {n.kind() for n in optimized.graph.nodes()}
    if not any("mkldnn" in k.lower() for k in torch_kinds):
        pytest.fail(f"optimize_for_inference made no oneDNN nodes here (torch built without oneDNN?): {torch_kinds}")
    model = srcore.from_torchscript(optimized, (x,))
    kinds = {n.kind for n in model.graph.all_nodes()}
    assert not any("mkldnn" in k.lower() for k in kinds), kinds
    sm = srcore.StaticModule(model)
    for _ in range(2):
        x = torch.randn(2, 3, 6, 6)
        with torch.no_grad():
            want = m(x)
        got = sm(x.numpy())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)

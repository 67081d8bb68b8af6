"""from_torchscript: a constant ``Tensor[]`` (nn.LSTM's ``_flat_weights`` after freezing, or one read
through prim::GetAttr) becomes one parameter per tensor and a prim::ListConstruct of them."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402


class _Gru(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(3, 4, num_layers=2)

    def forward(self, x):
        return self.rnn(x)[0]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("traced", [False, True])
def test_constant_tensor_list_becomes_parameters(traced):
    torch.manual_seed(0)
    m = _Gru().eval()
    x = torch.randn(2, 1, 3)
    model = srcore.from_torchscript(torch.jit.trace(m, x) if traced else m, (x,))
    (gru,) = [n for n in model.graph.all_nodes() if n.kind == "aten::gru"]
    lc = gru.inputs[2].node
    assert lc.kind == "prim::ListConstruct" and len(lc.inputs) == 8
    want = [p.detach().numpy() for p in m.rnn._flat_weights]
    for v, w in zip(lc.inputs, want):
        assert v.node.kind == "prim::Constant"
        name = v.node.attrs["param"]
        np.testing.assert_array_equal(model.params[name], w)
        if not traced:  # named after the frozen attribute's path
            assert name.startswith("rnn._flat_weights.")
    assert len({v.node.attrs["param"] for v in lc.inputs}) == 8


class _ListAttr(torch.nn.Module):
    """A Tensor[] attribute that freezing keeps as prim::GetAttr (it is mutated elsewhere, not folded)."""

    def __init__(self):
        super().__init__()
        self.ws = [torch.ones(2), torch.full((2,), 3.0)]

    def forward(self, x):
        return torch.cat(self.ws, x.dim() - 1) * x  # the dim is not constant: the list stays a value


def test_tensor_list_attribute_runs():
    m = _ListAttr().eval()
    x = torch.randn(4)
    model = srcore.from_torchscript(m, (x,))
    got = srcore.StaticModule(model)(x.numpy())
    np.testing.assert_allclose(got, m(x).numpy(), rtol=1e-6)

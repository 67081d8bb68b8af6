"""TorchScript dicts keyed by tensors (``Dict[Tensor, Tensor]``): torch finds tensor keys by identity,
so two equal tensors are two keys and a key is found only through the same tensor. Reference: torch."""
from __future__ import annotations

from typing import Dict

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")


class TensorKeys(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor):
        d: Dict[torch.Tensor, torch.Tensor] = {}
        d[x] = x * 2
        d[y] = y + 1                # y equals x in value: still a key of its own
        e = {x: x - 1}
        n = len(d)
        hit = y in e                # found by identity only: False
        out = d[x] + d[y] + e[x]
        if hit:
            out = out * 0
        return out, n


def test_tensor_keyed_dicts_follow_torch():
    x = torch.arange(6.0).reshape(2, 3)
    y = x.clone()
    scripted = torch.jit.script(TensorKeys())
    ref_out, ref_n = scripted(x, y)
    sm = srcore.StaticModule(srcore.from_torchscript(scripted, (x, y)))
    for _ in range(2):   # the second call reuses the planned buffers
        out, n = sm(x.numpy(), y.numpy())
        np.testing.assert_array_equal(out, ref_out.numpy())
        assert n == ref_n == 2

"""The seed's partitioning rules on trt_like (../shared/seeds/trtorch-automatic-fallback.txt):
dependency resolution of ``x.size(0)`` chains, the conv-conv-logsigmoid-conv segmentation at every
``min_block_size``, forced fallback by module, and reasons that name what was refused."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import srcore
from srcore.partition import ENGINE_KIND

# the partition and the engines do not depend on the executor or the memory planner
pytestmark = pytest.mark.one_pass

TRT = ("trt_like", "cpu")


def compute_kinds(graph):
    return [n.kind for n in graph.nodes if n.kind != "prim::Constant"]


class Flatten(torch.nn.Module):
    """A small CNN whose flatten is ``y.reshape(y.size(0), -1)``: with a symbolic batch the
    ``size``/``ListConstruct`` chain split the engine in two, both under min_block_size."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2)
        self.fc = torch.nn.Linear(8 * 3 * 3, 5)

    def forward(self, x):
        y = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.fc(y.reshape(y.size(0), -1))


def test_a_size_chain_keeps_the_cnn_in_one_engine():
    torch.manual_seed(0)
    m = Flatten().eval()
    model = srcore.from_torchscript(torch.jit.script(m), (torch.randn(2, 3, 8, 8),),
                                    dynamic_dims={"x": {0: "batch"}})
    sm = srcore.StaticModule(model, backends=TRT)
    assert compute_kinds(sm.graph) == [ENGINE_KIND], sm.partition.format()
    assert not sm.partition.refused
    for batch in (1, 3):
        x = torch.randn(batch, 3, 8, 8)
        with torch.no_grad():
            want = m(x).numpy()
        np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)
    assert sm.partition.engines[0].description.count("plan for inputs") == 2


class ConvLogSig(torch.nn.Module):
    """The seed's test model: conv1 - conv2 - an op the engine does not take - conv3 (the seed's
    log_sigmoid, which trt_like now converts, is ``i0`` here)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.conv3 = torch.nn.Conv2d(4, 2, 3, padding=1)

    def forward(self, x):
        return self.conv3(torch.i0(self.conv2(self.conv1(x))))


@pytest.fixture(scope="module")
def conv_logsig():
    torch.manual_seed(1)
    m = ConvLogSig().eval()
    x = torch.randn(1, 3, 9, 9)
    with torch.no_grad():
        want = m(x).numpy()
    return srcore.from_torchscript(torch.jit.script(m), (x,)), x.numpy(), want


@pytest.mark.parametrize("min_block,statuses,engines,on_cpu", [
    (1, ["engine", "engine"], [["aten::conv2d", "aten::conv2d"], ["aten::conv2d"]], 1),
    (2, ["engine", "too small"], [["aten::conv2d", "aten::conv2d"]], 2),      # seed item 4
    (3, ["too small", "too small"], [], 4),                                  # seed item 1c
])
def test_conv_conv_logsigmoid_conv(conv_logsig, min_block, statuses, engines, on_cpu):
    model, x, want = conv_logsig
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_min_block_size=min_block))
    report = sm.partition
    assert [s.status for s in report.segments] == statuses, report.format()
    assert [list(s.ops) for s in report.engines] == engines
    assert sum(1 for k in compute_kinds(sm.graph) if k != ENGINE_KIND) == on_cpu
    (r,) = report.refused
    assert r.node.endswith("aten::i0") and r.reason.startswith("not supported by trt_like: aten::i0")
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-5)


def test_forced_fallback_of_a_module(conv_logsig):
    model, x, want = conv_logsig
    scopes = [n.meta.get("scope") for n in model.graph.nodes if n.kind == "aten::conv2d"]
    assert scopes == ["conv1(Conv2d)", "conv2(Conv2d)", "conv3(Conv2d)"]    # recorded by the frontend
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_min_block_size=1,
                                                           engine_fallback_modules=("conv2",)))
    assert [list(s.ops) for s in sm.partition.engines] == [["aten::conv2d"], ["aten::conv2d"]]
    assert sorted(r.reason for r in sm.partition.refused)[0] == \
        "in module conv2, listed in Options.engine_fallback_modules"
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-5)
    every = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_fallback_modules=("Conv2d",)))
    assert not every.partition.engines

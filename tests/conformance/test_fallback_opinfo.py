"""The torch fallback kernel against torch itself, on OpInfo samples: its argument and result
conversions (numpy <-> tensors, dtype codes, lists, optional tensors, tuples, in-place writes).

For an aten overload, the fallback's matcher binds ``torch.ops.aten.<op>`` at load; the harness of
test_opinfo.py then runs each sample through that callable, with srcore's calling convention (numpy
arrays, dtype codes, lists), and compares with torch called directly. By default, hand-written samples
of a representative set of ops (every kind of argument and result; no ``op_db`` import); with
``SRCORE_TEST_ALL_FALLBACK=1``, OpInfo's samples of every declared aten overload torch has.
"""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")

from conformance.test_opinfo import conformance, run_sample  # noqa: E402
from srcore.plugin import Kernel, NodeInfo  # noqa: E402
from srcore.plugin.manager import get_plugin_manager  # noqa: E402

#: independent of the executor and the memory planner (kernels are called directly)
pytestmark = pytest.mark.one_pass

class Sample:
    def __init__(self, input, *args, **kwargs):
        self.input, self.args, self.kwargs = input, args, kwargs


def _t(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype)


X, Y = _t(3, 4), _t(3, 4, seed=1)
IDX = torch.tensor([[0, 3], [1, 1], [2, 0]])
#: (op, sample): ScalarType, optional tensors and scalars, int[] given as one int, Tensor[] and Tensor?[],
#: tuple results, in-place writes, bool and integer tensors
CASES = [
    ("aten::softmax.int", Sample(X, 1, dtype=torch.float64)),
    ("aten::sum.dim_IntList", Sample(X, [0, 1], True, dtype=torch.float64)),
    ("aten::sum.dim_IntList", Sample(X, 1)),
    ("aten::cumsum", Sample(_t(3, 4, dtype=torch.int64), 1)),
    ("aten::topk", Sample(X, 2, 1)),
    ("aten::where.self", Sample(X > 0, X, Y)),
    ("aten::clamp", Sample(X, min=-0.5, max=0.5)),
    ("aten::clamp", Sample(X, max=0.25)),
    ("aten::cat", Sample([X, Y], 0)),
    ("aten::relu_", Sample(X.clone())),
    ("aten::add.Tensor", Sample(X, Y, alpha=2)),
    ("aten::max.dim", Sample(X, 1, True)),
    ("aten::to.dtype", Sample(X, torch.int64)),
    ("aten::layer_norm", Sample(X, [4], _t(4, seed=2), None, 1e-5)),
    ("aten::index_select", Sample(X, 1, torch.tensor([3, 0]))),
    ("aten::index.Tensor", Sample(X, [None, torch.tensor([1, 2])])),
    ("aten::flip", Sample(X, [0])),
    ("aten::gather", Sample(X, 1, IDX)),
    ("aten::addmm", Sample(_t(3, 5), X, _t(4, 5, seed=3), beta=0.5, alpha=2.0)),
    ("aten::logical_not", Sample(X > 0)),
]


def fallback_kernels(ops):
    """A Kernel per op whose impl is what the torch fallback's matcher binds for it."""
    from srcore_cpu.torch_fallback import match

    declared = get_plugin_manager().registry.declared
    out = []
    for op in ops:
        schema = declared[op][0]
        fn = match(NodeInfo(op, schema, (), ()))
        if fn is not None:
            out.append(Kernel(op, "cpu", "fallback", ("*",), fn))
    return out


def _check(results):
    tried = {op: r for op, r in results.items() if r["attempted"]}
    bad = {op: r["failures"] for op, r in tried.items() if r["passed"] != r["attempted"]}
    assert not bad, bad
    return tried


@pytest.mark.parametrize("op, sample", CASES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(CASES)])
def test_representative_ops_through_the_fallback_match_torch(op, sample):
    (kernel,) = fallback_kernels([op])
    overload = getattr(getattr(torch.ops.aten, op.split("::")[1].split(".")[0]), (op.split(".") + ["default"])[1])
    assert run_sample(kernel, overload, sample) == ("pass", "")


def test_the_comparison_catches_a_wrong_conversion():
    """Not vacuous: a fallback that drops the ScalarType argument, or does not write in place, fails."""
    import attrs
    import numpy as np

    (softmax,) = fallback_kernels(["aten::softmax.int"])
    dropped = attrs.evolve(softmax, impl=lambda x, dim, dtype=None: softmax.impl(x, dim, None))
    assert run_sample(dropped, torch.ops.aten.softmax.int, Sample(X, 1, dtype=torch.float64))[0] == "fail"
    (relu_,) = fallback_kernels(["aten::relu_"])
    copying = attrs.evolve(relu_, impl=lambda x: relu_.impl(np.array(x)))
    assert run_sample(copying, torch.ops.aten.relu_.default, Sample(X.clone()))[0] == "fail"


@pytest.mark.slow
@pytest.mark.skipif(not (os.environ.get("SRCORE_TEST_ALL_FALLBACK") or os.environ.get("SRCORE_TESTS_FULL") == "1"),
                    reason="opt-in: SRCORE_TEST_ALL_FALLBACK=1 or SRCORE_TESTS_FULL=1")
def test_every_declared_aten_op_through_the_fallback_matches_torch():
    ops = [q for q in get_plugin_manager().registry.declared if q.startswith("aten::")]
    tried = _check(conformance(fallback_kernels(ops)))
    print(f"{len(tried)} aten overloads with OpInfo samples pass through the torch fallback")

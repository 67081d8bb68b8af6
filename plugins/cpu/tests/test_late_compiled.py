"""Small nodes choosing at their first call between numpy's kernel and the compiled one
(``late_compiled.py``): no numba, no choice (numpy, nothing built); numba loaded, the timing's
winner (pinned here: tests never depend on timing), and either way torch's values, for group norm,
instance norm, native group norm, softmax and log-softmax; a model whose small nodes would be the
only reason for numba does not import it (a fresh process)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from srcore.testing import node_info  # noqa: E402
from srcore_cpu.kernels import late_compiled as LC  # noqa: E402
from srcore_cpu.kernels import norm as NK  # noqa: E402
from srcore_cpu.kernels import softmax as SK  # noqa: E402
from srcore_cpu.kernels import tactic as TA  # noqa: E402

F = torch.nn.functional
T = torch.from_numpy
rng = np.random.default_rng(0)


@pytest.fixture
def pin(monkeypatch):
    """``pin(name)``: the timing's winner is ``name`` (``"numpy"``/``"compiled"``); numba counts as loaded.
    Returns the list of candidate sets timed."""
    timed = []

    def fix(name, loaded=True):
        monkeypatch.setattr(LC, "numba_loaded", lambda: loaded)
        monkeypatch.setattr(TA, "fastest", lambda cands, args, **kw: (timed.append(sorted(cands)), name)[1])
        return timed
    return fix


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
def test_without_numba_the_numpy_kernel_is_kept_and_nothing_is_built(pin):
    timed = pin("compiled", loaded=False)
    built = []
    k = LC.late(lambda x, out=None: x + 1, lambda: built.append(1), lambda: (np.zeros(3),))
    assert k.tactic is None
    assert k(np.ones(2)).tolist() == [2.0, 2.0]
    assert k.tactic == "numpy" and not built and not timed


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("winner", ["numpy", "compiled"])
def test_with_numba_the_timed_winner_is_kept(pin, winner):
    timed = pin(winner)
    k = LC.late(lambda x: x + 1, lambda: (lambda x: x + 2), lambda: (np.zeros(3),))
    assert k(np.ones(1)).tolist() == ([2.0] if winner == "numpy" else [3.0])
    assert k(np.ones(1)).tolist() == ([2.0] if winner == "numpy" else [3.0])
    assert k.tactic == winner and timed == [["compiled", "numpy"]]   # timed once


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
def test_a_compiled_kernel_that_fails_to_build_keeps_numpy(pin):
    pin("compiled")

    def build():
        raise RuntimeError("no compiler here")
    k = LC.late(lambda x: x + 1, build, lambda: (np.zeros(3),))
    assert k(np.ones(1)).tolist() == [2.0] and k.tactic == "numpy"


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
def test_off_switch_returns_the_numpy_kernel(monkeypatch):
    monkeypatch.setenv("SRCORE_CPU_LATE_COMPILED", "0")
    fn = lambda x: x   # noqa: E731
    assert LC.late(fn, lambda: None, lambda: ()) is fn


GN_SMALL = [((2, 8, 7, 9), 1), ((2, 6, 5, 3), 3), ((3, 4, 7), 2), ((1, 12, 2, 2), 12)]


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("winner", ["numpy", "compiled"])
@pytest.mark.parametrize("shape,groups", GN_SMALL)
def test_small_group_norm_matches_torch_either_way(pin, winner, shape, groups):
    pin(winner)
    t = TensorType("float32", shape)
    answer = NK.group_norm_matcher(node_info("aten::group_norm", input=t, num_groups=groups, weight=t, bias=t,
                                             eps=1e-5, cudnn_enabled=False, outputs=(t,)))
    assert isinstance(answer, Specialized) and answer.args == (0, 2, 3)
    x = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)
    w, b = rng.standard_normal(shape[1]).astype(np.float32), rng.standard_normal(shape[1]).astype(np.float32)
    want = F.group_norm(T(x), groups, T(w), T(b)).numpy()
    np.testing.assert_allclose(answer.fn(x, w, b), want, rtol=1e-5, atol=1e-5)
    out = np.full(shape, np.nan, np.float32)
    assert answer.fn(x, None, None, out=out) is out
    np.testing.assert_allclose(out, F.group_norm(T(x), groups).numpy(), rtol=1e-5, atol=1e-5)
    assert answer.fn.tactic == winner
    # float64 at run time (the node said float32): numpy's kernel, torch's values
    np.testing.assert_allclose(answer.fn(x.astype(np.float64), w, b), want, rtol=1e-5, atol=1e-5)


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("winner", ["numpy", "compiled"])
def test_small_native_group_norm_statistics_either_way(pin, winner):
    pin(winner)
    shape, groups = (2, 6, 4, 3), 3
    t = TensorType("float32", shape)
    answer = NK.native_group_norm_matcher(node_info("aten::native_group_norm", input=t, weight=t, bias=t, N=2, C=6,
                                                    HxW=12, group=groups, eps=1e-5, outputs=(t, t, t)))
    x = rng.standard_normal(shape).astype(np.float32)
    w, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    got = answer.fn(x, w, b, 2, 6, 12)
    want = torch.ops.aten.native_group_norm(T(x), T(w), T(b), 2, 6, 12, groups, 1e-5)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-5, atol=1e-5)
    assert answer.fn.tactic == winner


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("winner", ["numpy", "compiled"])
def test_small_instance_norm_either_way(pin, winner):
    pin(winner)
    shape = (2, 3, 5, 4)
    t = TensorType("float32", shape)
    answer = NK.instance_norm_matcher(node_info("aten::instance_norm", input=t, weight=t, bias=t, running_mean=None,
                                                running_var=None, use_input_stats=True, momentum=0.1, eps=1e-5,
                                                cudnn_enabled=False, outputs=(t,)))
    x = (rng.standard_normal(shape) - 4).astype(np.float32)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    want = F.instance_norm(T(x), weight=T(w), bias=T(b)).numpy()
    np.testing.assert_allclose(answer.fn(x, w, b), want, rtol=1e-5, atol=1e-5)
    assert answer.fn.tactic == winner


SM_CASES = [(2, 3, 11), (4, 33), (5, 1), (3, 7, 16), (1, 100)]


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("winner", ["numpy", "compiled"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", SM_CASES)
def test_small_softmax_and_log_softmax_match_torch_either_way(pin, winner, log, shape):
    pin(winner)
    t = TensorType("float32", shape)
    op = "aten::log_softmax.int" if log else "aten::softmax.int"
    answer = (SK.log_softmax_matcher if log else SK.softmax_matcher)(node_info(op, self=t, dim=-1, dtype=None,
                                                                               outputs=(t,)))
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x.reshape(-1)[0] = -100.0   # an exponent below exp_neg's floor
    want = (F.log_softmax if log else F.softmax)(T(x), -1).numpy()
    got = answer.fn(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert answer.fn.tactic == winner
    buf = x.copy()
    assert answer.fn(buf, out=buf) is buf   # in place
    np.testing.assert_allclose(buf, want, rtol=1e-5, atol=1e-6)


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
def test_compiled_log_softmax_special_values_match_torch():
    from srcore_cpu.kernels.jit_softmax import LogSoftmax

    x = np.array([[1.0, 2.0, np.nan, 0.0], [-np.inf] * 4, [-np.inf, 0.0, 1.0, -np.inf], [3.0, -200.0, 1e30, 1.0],
                  [np.inf, 1.0, 2.0, 3.0]], np.float32)
    out = np.empty_like(x)
    LogSoftmax()(x, out)
    np.testing.assert_allclose(out, F.log_softmax(T(x), -1).numpy(), rtol=1e-6, atol=1e-6)
    wide = (rng.standard_normal((3, 1000)) * 10).astype(np.float32)   # the vector lanes and a tail
    out = np.empty_like(wide)
    LogSoftmax()(wide, out)
    np.testing.assert_allclose(out, F.log_softmax(T(wide), -1).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
def test_softmax_over_another_dim_or_unknown_shape_is_not_late():
    t = TensorType("float32", (2, 3, 11))
    a = SK.softmax_matcher(node_info("aten::softmax.int", self=t, dim=1, dtype=None, outputs=(t,)))
    assert not hasattr(a.fn, "choose")
    f64 = TensorType("float64", (2, 3))
    a = SK.softmax_matcher(node_info("aten::softmax.int", self=f64, dim=-1, dtype=None, outputs=(f64,)))
    assert not hasattr(a.fn, "choose")


CHILD = """
import json, sys
import numpy as np, torch
import srcore
m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GroupNorm(2, 8), torch.nn.LogSoftmax(-1)).eval()
x = torch.randn(3, 6)
sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)), options=srcore.Options(backends=("cpu",)))
with torch.no_grad():
    np.testing.assert_allclose(sm(x.numpy()), m(x).numpy(), rtol=1e-5, atol=1e-5)
print(json.dumps("numba" in sys.modules))
"""


def test_a_model_of_small_nodes_does_not_import_numba():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) is False


def test_a_model_with_numba_loaded_runs_its_small_nodes_compiled_when_faster(pin):
    import srcore

    pin("compiled")
    m = torch.nn.Sequential(torch.nn.GroupNorm(2, 8), torch.nn.Flatten(), torch.nn.LogSoftmax(-1)).eval()
    x = torch.randn(2, 8, 3, 3) * 2 + 1
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)), options=srcore.Options(backends=("cpu",)))
    with torch.no_grad():
        np.testing.assert_allclose(sm(x.numpy()), m(x).numpy(), rtol=1e-5, atol=1e-5)
    tactics = {pn.node.kind: getattr(pn.fn.fn, "tactic", None) for b in sm.blocks for pn in b.nodes
               if pn.fn is not None and hasattr(pn.fn, "fn")}
    assert tactics["aten::group_norm"] == "compiled" and tactics["aten::log_softmax"] == "compiled"


ACTS = [("aten::silu", {}, F.silu), ("aten::sigmoid", {}, torch.sigmoid),
        ("aten::gelu", {"approximate": "none"}, F.gelu),
        ("aten::gelu", {"approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh")),
        ("aten::hardsigmoid", {}, F.hardsigmoid), ("aten::hardswish", {}, F.hardswish),
        ("aten::leaky_relu", {"negative_slope": 0.2}, lambda x: F.leaky_relu(x, 0.2)),
        ("aten::hardtanh", {"min_val": -0.5, "max_val": 2.0}, lambda x: F.hardtanh(x, -0.5, 2.0)),
        ("aten::relu6", {}, F.relu6)]


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("winner", ["numpy", "compiled"])
@pytest.mark.parametrize("op,consts,ref", ACTS)
def test_small_activations_match_torch_either_way(pin, winner, op, consts, ref):
    from srcore_cpu.kernels import pointwise_match as PM

    pin(winner)
    shape = (3, 5, 6)
    t = TensorType("float32", shape)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x[0, 0, :3] = (np.nan, 1e30, -1e30)   # (torch's vectorized GELU gives NaN for inf, ours inf: not asked here)
    want = ref(T(x)).numpy()
    for inplace in (False, True):
        answer = PM.pointwise_matcher(node_info(op + ("_" if inplace else ""), self=t, **consts, outputs=(t,)))
        assert isinstance(answer, Specialized) and answer.args == (0,)
        y = x.copy()
        got = answer.fn(y)
        if inplace:
            assert got is y
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        if not inplace:
            assert answer.fn.tactic == winner


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("winner", ["numpy", "compiled"])
@pytest.mark.parametrize("shape,ns", [((4, 8), (8,)), ((2, 3, 5), (3, 5)), ((6, 1), (1,))])
def test_small_layer_norm_matches_torch_either_way(pin, winner, shape, ns):
    pin(winner)
    t = TensorType("float32", shape)
    answer = NK.layer_norm_matcher(node_info("aten::layer_norm", input=t, normalized_shape=list(ns), weight=t, bias=t,
                                             eps=1e-5, cudnn_enable=False, outputs=(t,)))
    assert isinstance(answer, Specialized) and answer.args == (0, 2, 3)
    x = (rng.standard_normal(shape) * 3 + 7).astype(np.float32)
    w, b = rng.standard_normal(ns).astype(np.float32), rng.standard_normal(ns).astype(np.float32)
    want = F.layer_norm(T(x), ns, T(w), T(b)).numpy()
    np.testing.assert_allclose(answer.fn(x, w, b), want, rtol=1e-5, atol=1e-5)
    out = np.full(shape, np.nan, np.float32)
    assert answer.fn(x, None, None, out=out) is out
    np.testing.assert_allclose(out, F.layer_norm(T(x), ns).numpy(), rtol=1e-5, atol=1e-5)
    assert answer.fn.tactic == winner


@pytest.mark.one_pass   # matchers and kernels called directly, no executor or planner: not in the second pass
def test_the_candidates_are_timed_on_the_threads_own_clock(monkeypatch):
    """Both run on the calling thread: its CPU clock at any thread count (no wall-clock retry pauses)."""
    seen = []
    monkeypatch.setattr(LC, "numba_loaded", lambda: True)
    monkeypatch.setattr(TA, "fastest", lambda cands, args, **kw: (seen.append(kw.get("clock")), "numpy")[1])
    k = LC.late(lambda x: x, lambda: (lambda x: x), lambda: (np.zeros(2),))
    k(np.zeros(2))
    assert seen == ["cpu"]

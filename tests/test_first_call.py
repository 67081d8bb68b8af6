"""No call pays for a build (issue 16 item 4): a model of static shapes runs, in its first call after
``StaticModule(...)`` returns, the very functions a steady call runs, already specialised by the
interpreter (``Options.warm_up``), on every path the caller can take: ``sm(x)``, the thread's runtime,
a branch the zeros of the warm-up never take, a prepared-cache entry to hand over. Counted (the profile
of the calls, the bytecode's state), never timed."""
from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest

import srcore
from srcore.ir.parser import parse_graph
from srcore.model import Model
from srcore.runtime import prepared_cache
from srcore.runtime import static_module

from _shared import pointwise_chain, pointwise_chain_ref

CHAIN = pointwise_chain(16).replace("Float(batch, 16)", "Float(2, 16)")
#: a data-dependent branch: zeros take ``block1``, the test's positive inputs ``block0``
BRANCH = """graph(%x : Float(2, 8)):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %s : Tensor = aten::sum(%x, %none)
  %pos : Tensor = aten::gt(%s, %zero)
  %c : bool = aten::Bool(%pos)
  %y : Tensor = prim::If(%c)
    block0():
      %t : Tensor = aten::tanh(%x)
      %u : Tensor = aten::mul(%t, %x)
      -> (%u)
    block1():
      %v : Tensor = aten::sigmoid(%x)
      %w : Tensor = aten::sub(%v, %x, %one)
      -> (%w)
  return (%y)
"""
X = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
EXECUTORS = ("codegen", "interpreter")
_ADAPTIVE = hasattr(pointwise_chain.__code__, "_co_code_adaptive")   # CPython 3.11+


@pytest.fixture(autouse=True)
def whole_warm_up(monkeypatch):
    """The warm-up's every run, whatever this machine's speed (its budget is time)."""
    monkeypatch.setattr(static_module, "WARM_UP_BUDGET", float("inf"))


def _quickened(code) -> bool:
    return not _ADAPTIVE or code._co_code_adaptive != code.co_code


def profile(call, *args):
    """``(result, [(kind, function, quickened at entry)])``: the Python and C functions ``call(*args)``
    ran, in order; a Python function's bytecode state as it was entered (before its own warm-up count)."""
    seen = []

    def hook(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code is not _OWN:
                seen.append(("py", f"{code.co_filename}:{code.co_firstlineno}:{code.co_name}", _quickened(code)))
        elif event == "c_call":
            seen.append(("c", getattr(arg, "__qualname__", repr(arg)), True))

    sys.setprofile(hook)
    try:
        out = call(*args)
    finally:
        sys.setprofile(None)
    return out, [s for s in seen if s[1] != "setprofile"]


_OWN = profile.__code__


def names(calls):
    return [c[:2] for c in calls]


def cold(calls, steady):
    """The Python functions of ``calls`` not quickened yet that a steady call finds quickened (a numba
    dispatcher reports its compiled call to a profiler as a frame of its Python function, which the
    interpreter never runs, so never quickens)."""
    warm = {c[1] for c in steady if c[2]}
    return [c[1] for c in calls if not c[2] and c[1] in warm]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_first_call_runs_what_a_steady_call_runs_already_specialised(executor):
    sm = srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)), srcore.Options(executor=executor))
    assert "warm_up" in sm.load_stages
    y1, first = profile(sm, X)
    _, second = profile(sm, X)
    for _ in range(10):
        sm(X)
    y, steady = profile(sm, X)
    np.testing.assert_allclose(y1, pointwise_chain_ref(X), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(y1, y)
    assert names(first) == names(steady) and names(second) == names(steady)
    assert not any("_call_slow" in n or "_prepare" in n for _, n in names(first))
    assert cold(first, steady) == [], "functions of the first call not yet quickened by the warm-up"


def test_the_runtime_of_the_loading_thread_is_as_warm_as_the_module():
    sm = srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)))
    rt = sm.runtime()
    _, first = profile(rt, X)
    for _ in range(10):
        rt(X)
    _, steady = profile(rt, X)
    assert names(first) == names(steady) and cold(first, steady) == []


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_branch_the_zeros_never_take_is_warm_too(executor):
    sm = srcore.StaticModule(Model.from_graph(parse_graph(BRANCH)), srcore.Options(executor=executor))
    x = np.abs(np.random.default_rng(1).standard_normal((2, 8))).astype(np.float32) + 0.1   # block0
    y, first = profile(sm, x)
    np.testing.assert_allclose(y, np.tanh(x) * x, rtol=1e-6, atol=1e-6)
    for _ in range(10):
        sm(x)
    _, steady = profile(sm, x)
    assert names(first) == names(steady)
    assert cold(first, steady) == [], "the branch zeros do not take was not warmed"
    np.testing.assert_allclose(sm(-x), 1 / (1 + np.exp(x)) + x, rtol=1e-6, atol=1e-6)   # block1


def test_the_warm_up_is_bounded_by_its_budget(monkeypatch):
    runs = []
    real = static_module._other_values
    monkeypatch.setattr(static_module, "WARM_UP_BUDGET", 0.0)
    monkeypatch.setattr(static_module, "_other_values", lambda d: runs.append(1) or real(d))
    srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)))
    assert runs == []   # the two runs on zeros, nothing more
    monkeypatch.setattr(static_module, "WARM_UP_BUDGET", float("inf"))
    srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)))
    assert runs == [1]   # made once, used every other run


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "chain.srm"
    srcore.save(Model.from_graph(parse_graph(CHAIN)), path)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(root))
    monkeypatch.delenv("SRCORE_NO_PREPARED_CACHE", raising=False)
    return root


def test_a_prepared_cache_entry_is_handed_over_by_the_first_call_only(model_file, cache, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    sm = srcore.StaticModule(srcore.load(model_file), srcore.Options(prepared_cache=True))
    assert sm.prepared_cache == "miss"
    _, first = profile(sm, X)
    prepared_cache.wait_for_writes()
    _, second = profile(sm, X)
    for _ in range(10):
        sm(X)
    _, steady = profile(sm, X)
    assert any("_keep_prepared" in n for _, n in names(first))
    assert not any("_prepare" in n and "_keep_prepared" not in n for _, n in names(first)), "prepared twice"
    assert names(second) == names(steady)   # the fast path from the second call on
    assert len(list((cache / "prepared").glob("*/*.srm"))) == 1
    again = srcore.StaticModule(srcore.load(model_file), srcore.Options(prepared_cache=True))
    assert again.prepared_cache == "hit"
    _, first = profile(again, X)
    for _ in range(10):
        again(X)
    _, steady = profile(again, X)
    assert names(first) == names(steady) and cold(first, steady) == []


def test_nothing_to_hand_over_where_nothing_is_written(model_file, cache, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)   # PYTHONDONTWRITEBYTECODE: the cache is read only
    sm = srcore.StaticModule(srcore.load(model_file), srcore.Options(prepared_cache=True))
    assert sm.prepared_cache == "miss"
    y, first = profile(sm, X)
    for _ in range(10):
        sm(X)
    _, steady = profile(sm, X)
    assert names(first) == names(steady) and cold(first, steady) == []
    np.testing.assert_allclose(y, pointwise_chain_ref(X), rtol=1e-6, atol=1e-6)
    assert not (cache / "prepared").exists() or not list((cache / "prepared").glob("*/*.srm"))


def test_no_warm_up_leaves_the_first_call_cold():
    """The counter-check: without the warm-up the same probe sees the first call's cold functions."""
    sm = srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)), srcore.Options(warm_up=False))
    _, first = profile(sm, X)
    for _ in range(10):
        sm(X)
    _, steady = profile(sm, X)
    if _ADAPTIVE:
        assert cold(first, steady)


def test_the_writer_waits_from_the_load_and_ends_with_a_module_never_called(model_file, cache, monkeypatch):
    import gc

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    sm = srcore.StaticModule(srcore.load(model_file), srcore.Options(prepared_cache=True))
    writer = sm._writer.thread
    assert writer.is_alive() and writer.daemon   # started by the load: the first call only sets its event
    del sm
    gc.collect()
    writer.join(30)
    assert not writer.is_alive()
    assert not (cache / "prepared").exists() or not list((cache / "prepared").glob("*/*.srm"))


@pytest.mark.parametrize("backend", ["trt_like", "openvino"])
def test_with_an_engine_backend_too(backend):
    if backend not in srcore.get_plugin_manager().registry.engine_builders:
        pytest.skip(f"no {backend} plugin")
    # timing off: the engine is kept whatever its time against the cpu plugin's on this machine
    sm = srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)), srcore.Options(engine_options={"timing": False}),
                             backends=(backend, "cpu"))
    assert sm.partition.engines, f"the chain should run in a {backend} engine"
    y1, first = profile(sm, X)
    for _ in range(10):
        sm(X.copy())
    # a new array, as the first call's was: an openvino engine binds an input array it has not read before
    # (``set_input_tensor``, every call of a caller who passes a new array each time)
    y, steady = profile(sm, X.copy())
    np.testing.assert_allclose(y1, pointwise_chain_ref(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y1, y)
    assert names(first) == names(steady) and cold(first, steady) == []

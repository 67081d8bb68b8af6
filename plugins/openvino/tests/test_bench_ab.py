"""benchmarks.openvino_ab's arithmetic: ratios are taken per round, then their median (so a slow
phase of the machine, which hits both runners of a round, cancels out)."""
from __future__ import annotations

import itertools

import pytest

from benchmarks.openvino_ab import markdown, paired_ratios

pytestmark = pytest.mark.one_pass


def test_ratios_are_medians_of_per_round_ratios():
    # round 2 is a slow phase for everyone: per-round ratios stay 1.02 and 0.5
    times = {"openvino": [1.02, 10.2, 1.02], "ov_onnx": [1.0, 10.0, 1.0], "ort": [2.0, 20.0, 2.0],
             "trt_like": [1.5, 15.0, 1.5], "srcore_codegen_standard": [3.0, 30.0, 3.0]}
    r = paired_ratios(times)
    assert r["openvino/ov_onnx"] == pytest.approx(1.02)
    assert r["fastest_srcore"] == "openvino" and r["fastest_srcore/ort"] == pytest.approx(0.51)
    assert r["trt_like/ort"] == pytest.approx(0.75)
    assert "openvino_bf16/ov_onnx_bf16" not in r


def test_markdown_table():
    report = {"models": [{"model": "mlp_tiny", "threads": 1, "ratios": {"openvino/ov_onnx": 1.02,
                                                                         "fastest_srcore": "trt_like",
                                                                         "fastest_srcore/ort": 0.75},
                          "runners": {"openvino": {"status": "ok", "median_us": 12.34},
                                      "ov_onnx": {"status": "ok", "median_us": 1234.5},
                                      "openvino_bf16": {"status": "skipped", "note": "no bf16"}}}]}
    text = markdown(report)
    assert "| mlp_tiny | 1 | 12.3 µs | 1.23 ms | – | 1.020x | 0.75x (trt_like) |" in text, text


def test_markdown_shows_bf16_times_with_their_error():
    report = {"models": [{"model": "resnet_small", "threads": 1, "ratios": {},
                          "runners": {"openvino_bf16": {"status": "ok", "median_us": 2500.0, "max_rel_err": 2.5e-3},
                                      "openvino": {"status": "ok", "median_us": 9000.0, "max_rel_err": 1e-6}}}]}
    assert "| resnet_small | 1 | 9.00 ms | 2.50 ms (2.5e-03) | – | – |" in markdown(report), markdown(report)


def test_a_wrong_runner_is_shown_not_timed_and_the_sets_cover_the_families():
    from benchmarks.openvino_ab import SETS, tolerance
    from benchmarks.families import FAMILIES

    assert set(FAMILIES) <= set(SETS["all"]) and set(SETS["families"]) == set(FAMILIES)
    assert tolerance("openvino") == 1e-3 and tolerance("openvino_bf16") > tolerance("openvino")
    report = {"models": [{"model": "unet_small", "threads": 1, "ratios": {},
                          "runners": {"openvino": {"status": "wrong", "max_rel_err": 0.25},
                                      "ov_onnx": {"status": "ok", "median_us": 10.0}}}]}
    assert "| unet_small | 1 | wrong (2.5e-01) | 10.0 µs | – | – |" in markdown(report), markdown(report)


def test_benchmarks_run_cells_do_not_time_a_wrong_openvino_answer(monkeypatch, tmp_path):
    import numpy as np

    import benchmarks.cell as cell

    ref = np.ones((2, 3), np.float32)
    monkeypatch.setattr(cell, "load_inputs", lambda art: (["x"], [ref]))
    monkeypatch.setattr(cell, "load_refs", lambda art: [ref])
    monkeypatch.setattr(cell, "preimport", lambda runner: None)
    for runner, answer, status in (("openvino", ref * 1.01, "wrong"), ("openvino", ref, "ok"),
                                   ("eager", ref * 1.01, "ok")):   # peers record their error only
        monkeypatch.setattr(cell, "load_runner", lambda *a, y=answer: (lambda: y))
        res = cell.run_cell("m", runner, 1, tmp_path, True)
        assert res["status"] == status and ("best_round_median_us" in res) == (status == "ok"), res


_CONV_RELU_POOL = """graph(%x : Float(1, 2, 64, 64)):
  %w : Tensor = prim::Constant[param="w"]()
  %n : NoneType = prim::Constant()
  %one : int[] = prim::Constant[value=[1, 1]]()
  %zero : int[] = prim::Constant[value=[0, 0]]()
  %g : int = prim::Constant[value=1]()
  %k : int[] = prim::Constant[value=[2, 2]]()
  %c : bool = prim::Constant[value=0]()
  %a : Tensor = srcore::conv2d_relu(%x, %w, %n, %one, %one, %one, %g)
  %y : Tensor = aten::max_pool2d(%a, %k, %k, %zero, %one, %c)
  return (%y)
"""


def test_nan_cost_variants_build_what_they_say_and_restore_the_converters():
    """benchmarks.openvino_nan_cost: ``pool_unchecked`` drops the max pool's NaN mask, ``relu_plain``
    fuses OpenVINO's Relu (a NaN into the relu comes out 0), ``checked`` is the default engine without
    its unchecked model for bounded finite inputs, and the shipped converters are back after each
    (the default keeps torch's NaN)."""
    import numpy as np
    import torch

    import srcore
    from benchmarks.openvino_nan_cost import variant
    from srcore_openvino import finite
    from srcore_openvino.convert import attention, conv, matrix

    w = np.ones((2, 2, 3, 3), np.float32) / 9
    g = srcore.parse_graph(_CONV_RELU_POOL, params={"w": w})
    x = np.random.default_rng(0).standard_normal((1, 2, 64, 64)).astype(np.float32)
    x[0, 0, 4, 4] = np.nan
    t = torch.from_numpy(x)
    want = torch.nn.functional.max_pool2d(torch.relu(torch.nn.functional.conv2d(t, torch.from_numpy(w), padding=1)),
                                          2, 2).numpy()
    shipped = [(m, a, getattr(m, a)) for m in (conv, matrix, attention)
               for a in ("relu", "nan_checks") if hasattr(m, a)] + [(finite, "input_bound", finite.input_bound)]
    built = {}
    for name in ("pool_unchecked", "relu_plain", "checked", "default"):
        with variant(name):
            sm = srcore.StaticModule(g, options=srcore.Options(backends=("openvino", "cpu"), engine_options={
                "timing": False, "cache_dir": None}))
        (seg,) = sm.partition.segments
        assert seg.status == "engine", sm.partition.format()
        built[name] = (seg.engine.n_ops, sm(x))
        assert (seg.engine.finite_bound is None) == (name != "default"), name
        assert all(getattr(m, a) is f for m, a, f in shipped), name
    ops = {k: v[0] for k, v in built.items()}
    assert ops["pool_unchecked"] < ops["default"] and ops["relu_plain"] == ops["default"] == ops["checked"], ops
    got = built["default"][1]
    assert np.isnan(want).any() and np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)   # NaN where torch has it, as assert_allclose checks
    # relu_plain: the NaN becomes 0 in the conv's relu; pool_unchecked: the pool skips the NaNs
    assert not np.isnan(built["relu_plain"][1]).any() and not np.isnan(built["pool_unchecked"][1]).any()


def test_above_one_thread_each_runner_has_a_child_of_its_own():
    from benchmarks.openvino_ab import per_runner, rotations

    assert not per_runner("auto", 1) and per_runner("auto", 2) and per_runner("per-runner", 1)
    assert not per_runner("one", 2)
    # three runners: the six orders, each runner first twice and after each other runner
    orders = list(rotations(["a", "b", "c"], 6))
    assert sorted(map(tuple, orders)) == sorted(itertools.permutations("abc"))
    seq = [r for o in orders for r in o]
    assert {r: sorted({p for p, q in zip(seq, seq[1:]) if q == r} - {r}) for r in "abc"} == \
        {"a": ["b", "c"], "b": ["a", "c"], "c": ["a", "b"]}
    # two: each goes first in half the rounds, and follows the other and itself
    orders = list(rotations(["a", "b"], 8))
    assert [o[0] for o in orders].count("a") == 4 and all(sorted(o) == ["a", "b"] for o in orders)
    seq = [r for o in orders for r in o]
    assert {(p, q) for p, q in zip(seq, seq[1:])} == {("a", "b"), ("b", "a"), ("a", "a"), ("b", "b")}
    assert list(rotations(["a"], 3)) == [["a"]] * 3 and list(rotations([], 2)) == [[], []]


def test_a_runner_child_answers_turns_on_stdin(monkeypatch, capsys):
    """``serve``: one reply after loading (the check's report, the size of a call), then one per
    turn asked on stdin, each a median of its timed calls after at least one untimed call; ``quit``
    ends it."""
    import io
    import json

    import benchmarks.openvino_ab as ab

    calls = []
    monkeypatch.setattr(ab, "load_inputs", lambda art: (["x"], []))
    monkeypatch.setattr(ab, "load_refs", lambda art: [])
    monkeypatch.setattr(ab, "load_checked", lambda *a: (lambda: calls.append(1), {"status": "ok"}, {}))
    ticks = iter(range(0, 10**9, 7))   # every clock reading 7 ns after the last: each call takes 7 ns
    monkeypatch.setattr(ab.time, "perf_counter_ns", lambda: next(ticks))
    monkeypatch.setattr(ab.sys, "stdin", io.StringIO('{"cmd": "time", "n": 3, "settle": 0.0}\n{"cmd": "time", "n": 5}\n'
                                                     '{"cmd": "quit"}\n{"cmd": "time", "n": 100}\n'))
    assert ab.serve("m", "ort", 2, None, cpu_time=False) == 0
    replies = [json.loads(ln[len(ab.REPLY):]) for ln in capsys.readouterr().out.splitlines()
               if ln.startswith(ab.REPLY)]
    assert replies[0]["report"] == {"status": "ok"} and replies[0]["per_call"] > 0
    assert [r["t"] for r in replies[1:]] == pytest.approx([7e-9, 7e-9])
    n_warm = len(calls) - (1 + 3) - (1 + 5)   # each turn: one untimed call, then n timed
    assert n_warm >= 2, n_warm


def test_one_process_turns_time_steady_calls_after_the_caches_refill(monkeypatch):
    """``measure_model`` (every runner in one process): a runner's first calls after another
    runner's turn are slow (its data left the caches). Each turn starts with ``TURN_SETTLE_S`` of
    untimed calls and times at least ``MIN_CALLS``, sized by the median of calls on the timing
    clock: both runners are measured at their steady speed (sized by one call right after the
    other runner's warm-up, a turn was one call, all of it refill: 3x)."""
    import benchmarks.openvino_ab as ab

    now, prev, streak = [0], [None], [0]
    steady = {"openvino": 1_000_000, "ov_onnx": 800_000}   # ns a call

    def runner(name):
        def call():
            streak[0] = streak[0] + 1 if prev[0] == name else 1
            prev[0] = name
            now[0] += steady[name] * (3 if streak[0] <= 3 else 1)   # three calls refill the caches
        return call

    monkeypatch.setattr(ab.time, "process_time_ns", lambda: now[0])
    monkeypatch.setattr(ab.time, "perf_counter_ns", lambda: now[0])
    monkeypatch.setattr(ab.time, "perf_counter", lambda: now[0] * 1e-9)
    monkeypatch.setattr(ab, "load_inputs", lambda art: ([], []))
    monkeypatch.setattr(ab, "load_refs", lambda art: [])
    monkeypatch.setattr(ab, "load_checked", lambda model, r, *a: (runner(r), {"status": "ok"}, {}))
    for cpu_time in (True, False):
        res = ab.measure_model("m", ["openvino", "ov_onnx"], 1, None, rounds=4, round_s=0.004, cpu_time=cpu_time)
        assert res["runners"]["openvino"]["median_us"] == pytest.approx(1000.0)
        assert res["runners"]["ov_onnx"]["median_us"] == pytest.approx(800.0)
        assert res["ratios"]["openvino/ov_onnx"] == pytest.approx(1.25)
    # a call's size is a median: one call that waited for a core does not size the turns
    def readings(ms):   # a start and an end reading per call
        t = 0
        for d in ms:
            yield t
            t += d * 1_000_000
            yield t
    clock = readings([1.0, 1.1, 10.0, 0.9, 1.0]).__next__
    assert ab.per_call(lambda: None, clock) == pytest.approx(1e-3)
    assert ab.n_calls_for(1.0, 0.05) == ab.MIN_CALLS


def test_per_runner_children_take_turns_and_ratios_pair_their_rounds(monkeypatch):
    """``measure_per_runner`` with stand-in children: a skipped runner gets no turn, every other
    runner one turn a round that starts with ``settle`` seconds of untimed calls (no pause: an idle
    gap slowed srcore's engine), and ratios pair each round's turns."""
    import argparse

    import benchmarks.openvino_ab as ab

    slow = {"openvino": [1.1, 11.0, 1.1], "ov_onnx": [1.0, 10.0, 1.0], "ort": [2.0, 20.0, 2.0]}
    turns, closed = [], []

    class Child:
        def __init__(self, model, runner, threads, args):
            self.runner = runner

        def reply(self):
            if self.runner == "ov_onnx_bf16":
                return {"report": {"status": "skipped", "note": "no bf16"}, "per_call": None}
            return {"report": {"status": "ok"}, "per_call": 0.01}

        def turn(self, n, settle):
            turns.append((self.runner, n, settle))
            k = sum(1 for r, _, _ in turns if r == self.runner) - 1
            return slow[self.runner][k]

        def close(self):
            closed.append(self.runner)

    monkeypatch.setattr(ab, "RunnerChild", Child)
    monkeypatch.setattr(ab.time, "sleep", lambda s: pytest.fail("a pause between turns"))
    args = argparse.Namespace(runners="openvino,ov_onnx,ov_onnx_bf16,ort", rounds=3, round_seconds=0.05, settle=0.25)
    res = ab.measure_per_runner("m", 2, args)
    assert [r for r, _, _ in turns] == ["openvino", "ov_onnx", "ort", "ort", "ov_onnx", "openvino",
                                     "ov_onnx", "ort", "openvino"]
    assert {(n, settle) for _, n, settle in turns} == {(5, 0.25)}
    assert sorted(closed) == ["openvino", "ort", "ov_onnx", "ov_onnx_bf16"]
    assert res["runners"]["ov_onnx_bf16"]["status"] == "skipped" and res["children"] == "per runner"
    assert res["ratios"]["openvino/ov_onnx"] == pytest.approx(1.1)
    assert res["ratios"]["openvino/ort"] == pytest.approx(0.55)
    assert res["runners"]["ort"]["best_round_us"] == pytest.approx(2e6)

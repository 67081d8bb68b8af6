"""``benchmarks.families_ab`` above 1 thread: every runner in a child of its own (``openvino_ab``'s
``RunnerChild``), on stand-in children and a stand-in runner."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.one_pass   # a benchmark harness: independent of the executor and planner

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package of the checkout, not installed
    sys.path.insert(0, str(ROOT))

import benchmarks.openvino_ab as ab  # noqa: E402
from benchmarks import families_ab  # noqa: E402


class Child:
    """A stand-in ``RunnerChild``: scripted turn medians (s) or clean-call records per runner."""

    log: list = []

    def __init__(self, model, runner, threads, args, env=None):
        self.runner, self.env = runner, env
        Child.log.append(("start", runner, threads, env))

    def reply(self):
        if self.runner == "ov_onnx_bf16":
            return {"report": {"status": "skipped", "note": "no bf16"}, "per_call": None}
        if self.runner == "bad":
            return {"report": {"status": "wrong", "max_rel_err": 0.5}, "per_call": None}
        return {"report": {"status": "ok"}, "per_call": 0.001}

    def turn(self, n, settle):
        Child.log.append(("turn", self.runner, n, settle))
        k = sum(1 for e in Child.log if e[0] == "turn" and e[1] == self.runner)
        return {"eager": 4e-3, "ort": 2e-3, "trt_like": 3e-3}[self.runner] * (1 + (k % 2))

    def clean_turn(self, n, settle):
        Child.log.append(("clean", self.runner, n, settle))
        wall = {"eager": 4000, "ort": 2000, "trt_like": 3000}[self.runner]
        # the 2nd call waited 50 % of its time: not clean, and the 3rd after it is not warm
        return [(wall, 0, None), (wall * 5, wall * 3, 0), (wall, 0, 0)] + [(wall, 0, 0)] * (n - 3)

    def close(self):
        Child.log.append(("close", self.runner))


@pytest.fixture
def children(monkeypatch, tmp_path):
    Child.log = []
    monkeypatch.setattr(ab, "RunnerChild", Child)
    monkeypatch.setattr("benchmarks.prepare.prepare", lambda name, out: None)
    return Child.log


def test_above_one_thread_each_runner_turns_in_its_own_child(children, tmp_path):
    """Rotating rounds of turns, each after ``settle`` s of untimed calls; a skipped runner gets none;
    a suffix is passed as its variable in the child's environment; every child is closed."""
    (row,) = families_ab.measure(["m"], ["eager", "ov_onnx_bf16", "ort", "trt_like+nomkl"], 3, tmp_path,
                                 threads=2, settle=0.1)
    starts = [e for e in children if e[0] == "start"]
    assert starts[3] == ("start", "trt_like", 2, {"SRCORE_CPU_MKL": "0"}) and starts[0][3] == {}
    turns = [e[1] for e in children if e[0] == "turn"]
    assert turns == ["eager", "ort", "trt_like", "ort", "trt_like", "eager", "trt_like", "eager", "ort"]
    assert {(e[2], e[3]) for e in children if e[0] == "turn"} == {(50, 0.1)}   # ~50 ms of a 1 ms call
    assert sorted(e[1] for e in children if e[0] == "close") == ["eager", "ort", "ov_onnx_bf16", "trt_like"]
    # best turn: 1x of the scripted time (odd turns are 2x)
    assert row["eager_us"] == pytest.approx(4000) and row["trt_like+nomkl_us"] == pytest.approx(3000)
    assert row["trt_like+nomkl/ort"] == pytest.approx(1.5) and "ov_onnx_bf16_us" not in row


def test_clean_turns_keep_the_warm_clean_calls_of_each_child(children, tmp_path):
    (row,) = families_ab.measure(["m"], ["ort", "trt_like"], 2, tmp_path, threads=2, clean_min=10)
    clean = [e for e in children if e[0] == "clean"]
    assert {e[2] for e in clean} == {100}          # ~0.1 s of a 1 ms call a turn
    # per turn of 100: the first is never kept, the 2nd waited, the 3rd is cold -> 97 kept
    assert row["ort_clean"] == [194, 200] and row["ort_us"] == pytest.approx(2.0)
    assert row["trt_like/ort"] == pytest.approx(1.5)


def test_a_wrong_child_stops_the_measurement_and_children_close(children, tmp_path):
    with pytest.raises(AssertionError, match="bad: wrong output"):
        families_ab.measure(["m"], ["ort", "bad"], 2, tmp_path, threads=2)
    assert [e[1] for e in children if e[0] == "close"] == ["ort", "bad"]


def test_a_runner_child_answers_a_clean_turn_with_each_call_and_its_wait(monkeypatch, capsys):
    """``serve`` with ``clean``: the turn's calls as ``(wall, waited, gap waited)`` read in the
    child, the first without a gap."""
    import benchmarks.clean_calls as cc

    monkeypatch.setattr(ab, "load_inputs", lambda art: (["x"], []))
    monkeypatch.setattr(ab, "load_refs", lambda art: [])
    monkeypatch.setattr(ab, "load_checked", lambda *a: (lambda: None, {"status": "ok"}, {}))
    ticks = iter(range(0, 10**9, 10))
    delay = iter(range(0, 10**9, 3))           # each read of the threads' delays: 3 ns more waited
    monkeypatch.setattr(cc._clock, "WALL_CLOCK", lambda: next(ticks))
    monkeypatch.setattr(cc._clock, "thread_delays", lambda: {"1": next(delay)})
    monkeypatch.setattr(ab.sys, "stdin", io.StringIO('{"cmd": "time", "n": 3, "settle": 0.0, "clean": true}\n'
                                                     '{"cmd": "quit"}\n'))
    assert ab.serve("m", "ort", 2, None, cpu_time=False) == 0
    replies = [json.loads(ln[len(ab.REPLY):]) for ln in capsys.readouterr().out.splitlines()
               if ln.startswith(ab.REPLY)]
    assert replies[1]["records"] == [[10, 3, None], [10, 3, 3], [10, 3, 3]]

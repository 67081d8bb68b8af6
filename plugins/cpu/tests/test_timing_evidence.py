"""Timing evidence across builds (:mod:`srcore_cpu.kernels.evidence`): a 2-thread split-or-not choice
is made on each candidate's least time over every timing of the same problem, so a build whose split
rounds all waited for a core does not flip the choice an undisturbed build made. The timings here are
faked (the conftest gives each test its own evidence file)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from srcore_cpu.kernels import evidence, mkl_gemm, row_split, tactic

pytestmark = pytest.mark.one_pass


def test_pooled_keeps_each_candidates_least_time_over_timings():
    k = evidence.key_of("x", (2, 3), "float32")
    assert evidence.pooled(k, {"split": 1.0, "one": 2.0}) == {"split": 1.0, "one": 2.0}
    # a disturbed timing: the split waited for a core in every round
    assert evidence.pooled(k, {"split": 3.0, "one": 1.9}) == {"split": 1.0, "one": 1.9}
    # another problem has its own evidence
    assert evidence.pooled(evidence.key_of("x", (2, 4), "float32"), {"split": 3.0, "one": 1.9}) == \
        {"split": 3.0, "one": 1.9}
    evidence.flush()
    data = json.loads(evidence.path().read_text())
    assert data["evidence"][k] == {"times": {"split": 1.0, "one": 1.9}, "builds": 2}


def test_a_corrupt_or_foreign_evidence_file_is_ignored_and_rewritten():
    p = evidence.path()
    p.parent.mkdir(parents=True, exist_ok=True)
    for junk in ("{not json", json.dumps({"version": evidence.VERSION - 1, "evidence": {"k": {"times": {"a": 0.1},
                                                                                            "builds": 1}}}),
                 json.dumps({"version": evidence.VERSION, "evidence": {"k": {"times": "x"}}})):
        p.write_text(junk)
        assert evidence.pooled("k", {"a": 0.5}) == {"a": 0.5}
        evidence.flush()
        assert json.loads(p.read_text())["evidence"]["k"]["times"] == {"a": 0.5}


def test_the_file_is_read_once_and_written_at_most_every_flush_interval(monkeypatch):
    """A load times ~25 problems: the file is not read and rewritten at each, yet another process's
    evidence written meanwhile is seen and kept."""
    reads, writes = [], []
    real_read = evidence._read
    monkeypatch.setattr(evidence, "_read", lambda p: reads.append(p) or real_read(p))
    real_replace = evidence.os.replace
    monkeypatch.setattr(evidence.os, "replace", lambda a, b: writes.append(b) or real_replace(a, b))
    now = [100.0]
    monkeypatch.setattr(evidence.time, "monotonic", lambda: now[0])
    for i in range(10):
        evidence.pooled(evidence.key_of("p", i), {"split": 1.0 + i, "one": 2.0})
    # the first timing wrote (nothing was pending for a second); the other nine wait for the interval
    assert len(writes) == 1 and len(reads) == 1      # the merge before that write (no file yet before)
    # another process replaces the file: its evidence is read once and pooled with this one's
    other = json.loads(evidence.path().read_text())
    other["evidence"][evidence.key_of("p", 3)] = {"times": {"split": 0.5}, "builds": 4}
    evidence.path().write_text(json.dumps(other))
    assert evidence.pooled(evidence.key_of("p", 3), {"split": 9.0, "one": 2.0}) == {"split": 0.5, "one": 2.0}
    assert len(reads) == 2 and len(writes) == 1
    now[0] += evidence.FLUSH_EVERY_S
    evidence.pooled(evidence.key_of("p", 11), {"split": 1.0})
    assert len(writes) == 2
    data = json.loads(evidence.path().read_text())["evidence"]
    assert len(data) == 11                            # every problem timed here reached the file
    # the other process's 4 builds, this process's two timings of the problem
    assert data[evidence.key_of("p", 3)] == {"times": {"split": 0.5, "one": 2.0}, "builds": 6}


def test_pending_evidence_is_written_at_exit(tmp_path):
    """A process that ends within the flush interval still leaves its timings (``atexit``)."""
    import subprocess
    import sys

    code = ("from pathlib import Path; from srcore_cpu.kernels import evidence as e; "
            f"e.path = lambda: Path({str(tmp_path / 't.json')!r}); "
            "[e.pooled(e.key_of('p', i), {'split': 1.0}) for i in range(3)]")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert len(json.loads((tmp_path / "t.json").read_text())["evidence"]) == 3


def test_evidence_off_by_environment(monkeypatch):
    monkeypatch.setenv("SRCORE_CPU_TIMING_EVIDENCE", "0")
    assert evidence.pooled("k", {"a": 1.0}) == {"a": 1.0}
    assert evidence.pooled("k", {"a": 2.0}) == {"a": 2.0}
    assert not evidence.path().exists()


def test_keys_name_shapes_and_dtypes_of_arrays_not_values():
    a, b = np.zeros((4, 8), np.float32), np.ones((4, 8), np.float32)
    assert evidence.key_of("ln", (a, 1e-5)) == evidence.key_of("ln", (b, 1e-5))
    assert evidence.key_of("ln", (a, 1e-5)) != evidence.key_of("ln", (a.astype(np.float64), 1e-5))
    assert evidence.key_of("ln", (a, 1e-5)) != evidence.key_of("ln", (a, 1e-6))


def test_split_vs_blas_decides_on_pooled_times_wall_only(monkeypatch):
    """The split won an undisturbed build; a later build where every split round waited for a core
    still gets the split (its least time), and the threaded-BLAS side is pooled the same way."""
    seq = iter([(1.0, 1.5), (2.4, 1.4), (2.4, 1.4)])
    monkeypatch.setattr(tactic, "_split_vs_blas", lambda *a, **k: next(seq))
    assert tactic.split_vs_blas(None, None, key=("mm", (8, 8))) == (1.0, 1.5)
    assert tactic.split_vs_blas(None, None, key=("mm", (8, 8))) == (1.0, 1.4)
    assert tactic.split_vs_blas(None, None) == (2.4, 1.4)     # no key: this timing alone


def test_mkl_split_choice_stays_across_a_disturbed_build(monkeypatch):
    """mkl_gemm's 2-thread choice (the split kept unless 3 % slower) on pooled times: a build whose
    split rounds were all slowed by load does not move the linear to one thread."""
    seq = iter([(1.0, 1.2), (1.9, 1.2)])
    monkeypatch.setattr(tactic, "_split_vs_blas", lambda *a, **k: next(seq))
    key = ("mkl_gemm", 128, 256, 256, True, 2)
    assert mkl_gemm._faster(None, None, reps=1, rounds=3, threads=2, key=key)
    assert mkl_gemm._faster(None, None, reps=1, rounds=3, threads=2, key=key)
    seq = iter([(1.9, 1.2)])
    assert not mkl_gemm._faster(None, None, reps=1, rounds=3, threads=2)   # its own rounds alone: one thread


def test_row_split_pays_pools_by_kind_shapes_and_threads(monkeypatch):
    from srcore_cpu.kernels import parallel

    monkeypatch.setattr(parallel, "intra_op_threads", lambda: 2)
    times = iter([{"one": 2.0, "split": 1.2}, {"one": 2.0, "split": 3.0}, {"one": 2.0, "split": 3.0}])
    monkeypatch.setattr(tactic, "timings", lambda cands, args, **kw: next(times))
    monkeypatch.setattr(tactic, "default_clock", lambda: "wall")
    x, y = np.zeros((64, 32), np.float32), np.zeros((64, 32), np.float32)

    def split(x, out):   # (its qualname is the kind)
        return out
    assert row_split.split_pays(lambda x, out: out, split, (x, y))
    assert row_split.split_pays(lambda x, out: out, split, (x, y))          # disturbed: pooled, still split
    z = np.zeros((64, 16), np.float32)
    assert not row_split.split_pays(lambda x, out: out, split, (z, z))      # another shape: its own timing


def test_at_one_thread_nothing_is_pooled(monkeypatch):
    seq = iter([{"one": 1.0, "split": 2.0}, {"one": 3.0, "split": 2.0}])
    monkeypatch.setattr(tactic, "timings", lambda cands, args, **kw: next(seq))
    assert tactic.fastest({}, (), clock="cpu", key=("k",)) == "one"
    assert tactic.fastest({}, (), clock="cpu", key=("k",)) == "split"
    assert not evidence.path().exists()


def test_a_disturbed_loser_is_not_cut_after_one_round_on_the_wall_clock(monkeypatch):
    """Wall clock: a candidate CLEAR-times slower after the first round is cut only when that round
    was clean; a split whose first calls waited for a core keeps its rounds (and wins on them)."""
    from srcore.plugin import clock

    state = {"wall": 0, "delay": 0}
    monkeypatch.setattr(clock, "WALL_CLOCK", lambda: state["wall"])
    monkeypatch.setattr(clock, "thread_delays", lambda: {"0": state["delay"]})
    slept = []
    monkeypatch.setattr(tactic.time, "sleep", slept.append)
    n = {"split": 0, "one": 0}

    def split():
        n["split"] += 1
        wait = 300_000 if n["split"] <= 2 else 0    # warm-up and first round: waited for a core
        state["wall"] += 60_000 + wait
        state["delay"] += wait

    def one():
        n["one"] += 1
        state["wall"] += 100_000
    assert tactic.fastest({"one": one, "split": split}, (), rounds=4, budget_s=1.0, clock="wall") == "split"
    assert n["split"] == 1 + 4 and slept == []   # warm-up + its 4 rounds; no retry after pauses needed


def test_evidence_is_kept_apart_per_cpu_plugin_setting(monkeypatch):
    """A split on numba's OpenMP team (``SRCORE_CPU_OMP_TEAM=1``) costs what it costs there: its
    timings are not pooled with the Python team's."""
    tag = evidence.machine_tag()
    monkeypatch.setenv("SRCORE_CPU_OMP_TEAM", "1")
    assert evidence.machine_tag() != tag
    monkeypatch.delenv("SRCORE_CPU_OMP_TEAM")
    assert evidence.machine_tag() == tag

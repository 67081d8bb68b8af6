"""The timing cache keeps winners per machine, thread setting and code: a kernel edit re-times."""
from __future__ import annotations

import pytest

from srcore_trt_like.tactics import timing_cache

pytestmark = pytest.mark.one_pass


@pytest.fixture
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(timing_cache, "_tags", {})
    monkeypatch.setattr(timing_cache, "_caches", {})
    return tmp_path


def test_a_winner_is_served_back_from_the_file(cache_dir, monkeypatch):
    cache = timing_cache.get()
    cache.store("layer-1", "simd_direct")
    cache.save()
    monkeypatch.setattr(timing_cache, "_caches", {})
    assert timing_cache.get().lookup("layer-1") == "simd_direct"


def test_winners_timed_against_other_code_are_not_reused(cache_dir, monkeypatch):
    cache = timing_cache.get()
    cache.store("layer-1", "depthwise_channels_last")
    cache.save()
    # what the kernels' source stamps would give after an edit of any srcore or trt_like module
    real = timing_cache.sources_fingerprint
    monkeypatch.setattr(timing_cache, "sources_fingerprint", lambda sources: "edited-" + real(sources))
    monkeypatch.setattr(timing_cache, "_tags", {})
    monkeypatch.setattr(timing_cache, "_caches", {})
    assert timing_cache.get().path != cache.path
    assert timing_cache.get().lookup("layer-1") is None


def test_the_evidence_keeps_each_candidates_least_time_over_builds(cache_dir, monkeypatch):
    """A layer timed in several builds is decided on each candidate's best time so far (a slower
    reading is the load's), and the evidence survives the file."""
    cache = timing_cache.get()
    assert cache.merge("layer-1", {"a": 1.0, "b": 2.0}) == ({"a": 1.0, "b": 2.0}, 1)
    cache.save()
    monkeypatch.setattr(timing_cache, "_caches", {})
    cache = timing_cache.get()
    assert cache.merge("layer-1", {"a": 1.5, "b": 0.8}) == ({"a": 1.0, "b": 0.8}, 2)
    # a candidate new to the layer, or one that failed (inf), counts from this build on
    best, builds = cache.merge("layer-1", {"a": 3.0, "b": float("inf"), "c": 0.5})
    assert (best, builds) == ({"a": 1.0, "b": 0.8, "c": 0.5}, 3)
    assert cache.lookup("layer-1") is None        # evidence is not a winner


def test_malformed_evidence_is_ignored(cache_dir):
    path = timing_cache.get().path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"winners": {"k": "x"}, "evidence": {"k": {"times": {"a": "fast"}, "builds": 1}, '
                    '"j": {"times": {"a": 0.25}, "builds": 2}, "m": 7}}')
    cache = timing_cache.TimingCache(path)
    assert cache.lookup("k") == "x" and list(cache.evidence) == ["j"]
    assert cache.merge("j", {"a": 0.5}) == ({"a": 0.25}, 3)

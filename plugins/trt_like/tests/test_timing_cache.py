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

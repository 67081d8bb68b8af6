"""srcore._gcpause: a load (srcore.load, StaticModule) runs with the cyclic collector off, and leaves it
as it found it (enabled, or disabled by the program)."""
from __future__ import annotations

import gc
import threading
from pathlib import Path

import numpy as np
import pytest

import srcore
from srcore._gcpause import paused

pytestmark = pytest.mark.one_pass

DIGITS = Path(__file__).resolve().parents[1] / "examples" / "digits" / "digits.srm"


@pytest.fixture
def restore_gc():
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
def test_a_load_runs_with_the_collector_off_and_leaves_it_as_it_was(monkeypatch, restore_gc, enabled):
    from srcore.format import srm
    from srcore.runtime.static_module import StaticModule

    states = []
    for owner in (srm, StaticModule):
        def wrapped(*a, _orig=owner._load, **k):
            states.append(gc.isenabled())
            return _orig(*a, **k)
        monkeypatch.setattr(owner, "_load", wrapped)
    gc.enable() if enabled else gc.disable()
    sm = srcore.StaticModule(srcore.load(DIGITS))
    assert states == [False, False] and gc.isenabled() is enabled
    assert sm(np.zeros((1, 1, 8, 8), np.float32)).shape == (1, 10)


def test_nested_and_concurrent_pauses_enable_it_once_the_last_ends(restore_gc):
    gc.enable()
    started, release = threading.Event(), threading.Event()

    def other():
        with paused():
            started.set()
            release.wait(10)
    t = threading.Thread(target=other)
    with paused():
        with paused():
            assert not gc.isenabled()
        t.start()
        started.wait(10)
    assert not gc.isenabled()   # the other thread's pause is still on
    release.set()
    t.join(10)
    assert gc.isenabled()


def test_a_load_leaves_no_young_collection_behind_and_a_programs_freeze_alone(restore_gc):
    """What the load allocated joins the oldest generation when the pause ends: no young collection walks
    it right after (the first thing allocated after a pause that deferred collections would trigger one);
    objects the program froze stay frozen."""
    seen = []

    def probe(phase, info):
        if phase == "start":
            seen.append(info["generation"])
    gc.enable()
    gc.collect()
    gc.callbacks.append(probe)
    try:
        sm = srcore.StaticModule(srcore.load(DIGITS))
        after = [[i] for i in range(50)]   # allocations after the load
    finally:
        gc.callbacks.remove(probe)
    assert seen == [] and len(after) == 50 and sm is not None
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        srcore.StaticModule(srcore.load(DIGITS))
        # (objects the load frees leave the permanent generation: the count may fall a little, but a
        # pause that unfroze, even to promote, would leave it at 0)
        assert frozen // 2 < gc.get_freeze_count() <= frozen and gc.isenabled()
    finally:
        gc.unfreeze()

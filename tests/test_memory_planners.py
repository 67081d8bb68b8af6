"""Property tests of the memory planners: no two live tensors overlap, bounds hold."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from srcore.memory.planner import (ALIGNMENT, Lifetime, TensorRequest, align, check_plan, lower_bound,
                                   make_planner, no_reuse_bytes)
from srcore.memory.precomputed_offsets import GreedyBySizePlanner
from srcore.memory.standard_resizing import StorageGroupPlanner, grow


@st.composite
def requests(draw, max_tensors=30):
    n = draw(st.integers(0, max_tensors))
    out = []
    for k in range(n):
        start = draw(st.integers(0, 40))
        length = draw(st.integers(0, 15))
        nbytes = draw(st.integers(0, 5000))
        out.append(TensorRequest(k, Lifetime(start, start + length), nbytes))
    return out


@settings(max_examples=300, deadline=None)
@given(requests())
def test_greedy_by_size_never_overlaps_live_tensors(reqs):
    plan = GreedyBySizePlanner().plan(reqs)
    check_plan(reqs, plan)
    assert lower_bound(reqs) <= plan.total_bytes <= no_reuse_bytes(reqs)


@settings(max_examples=300, deadline=None)
@given(requests())
def test_storage_groups_never_overlap_live_tensors(reqs):
    plan = StorageGroupPlanner().plan(reqs)
    check_plan(reqs, plan)
    assert lower_bound(reqs) <= plan.total_bytes <= no_reuse_bytes(reqs)
    # members of one group never live at the same time
    by_key = {r.key: r for r in reqs}
    for group in plan.groups:
        members = sorted((by_key[k] for k in group), key=lambda r: r.lifetime.start)
        for a, b in zip(members, members[1:]):
            assert a.lifetime.end < b.lifetime.start


@settings(max_examples=200, deadline=None)
@given(requests(), st.integers(1, 4))
def test_grow_keeps_groups_and_fits_bigger_sizes(reqs, factor):
    plan = StorageGroupPlanner().plan(reqs)
    bigger = [TensorRequest(r.key, r.lifetime, r.nbytes * factor) for r in reqs]
    grown = grow(plan, bigger)
    if factor == 1 or not any(r.nbytes for r in reqs):
        assert grown is None
    else:
        assert grown is not None and grown.groups == plan.groups
        check_plan(bigger, grown)


def test_hand_derived_chain():
    # a -> b -> c -> d, each used only by the next: two slots suffice
    reqs = [TensorRequest(i, Lifetime(i, i + 1), 1000) for i in range(4)]
    for planner in (GreedyBySizePlanner(), StorageGroupPlanner()):
        plan = planner.plan(reqs)
        assert plan.total_bytes == 2 * align(1000)
        assert lower_bound(reqs) == 2 * align(1000)
    assert no_reuse_bytes(reqs) == 4 * align(1000)


def test_alignment_and_unknown_planner():
    assert align(1) == ALIGNMENT and align(ALIGNMENT) == ALIGNMENT and align(0) == 0
    import pytest

    from srcore import SrcoreError

    with pytest.raises(SrcoreError, match="unknown memory_planner_algorithm"):
        make_planner("nope")

"""Property tests of the memory planners: no two live tensors overlap, bounds hold.

The oracle is ``_plan_oracle`` (byte by byte, position by position), not the product's
``check_plan``; a second group of tests shows that ``check_plan`` rejects what the oracle rejects.
"""
from __future__ import annotations

import pytest
from _plan_oracle import assert_plan_sound, plan_violations
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from srcore.memory.planner import (ALIGNMENT, Lifetime, TensorRequest, align, check_plan, lower_bound,
                                   make_planner, no_reuse_bytes)
from srcore.memory.precomputed_offsets import GreedyBySizePlanner
from srcore.memory.standard_resizing import StorageGroupPlanner, grow

#: the planners are built here by name: the suite's executor and planner settings change nothing
pytestmark = pytest.mark.one_pass


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
    assert_plan_sound(reqs, plan)
    assert lower_bound(reqs) <= plan.total_bytes <= no_reuse_bytes(reqs)


@settings(max_examples=300, deadline=None)
@given(requests())
def test_storage_groups_never_overlap_live_tensors(reqs):
    plan = StorageGroupPlanner().plan(reqs)
    assert_plan_sound(reqs, plan)
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
        assert_plan_sound(bigger, grown)


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
    from srcore import SrcoreError

    with pytest.raises(SrcoreError, match="unknown memory_planner_algorithm 'nope'; choose one of "
                       "standard_resizing, precomputed_offsets$"):
        make_planner("nope")


# -- the product's check_plan rejects bad plans (the oracle above decides what is bad) -----------
def _req(key, start, end, nbytes):
    return TensorRequest(key, Lifetime(start, end), nbytes)


def _plan(offsets, total):
    from srcore.memory.planner import Plan

    return Plan(dict(offsets), total, "hand")


def test_check_plan_rejects_live_tensors_sharing_bytes():
    reqs = [_req(0, 0, 3, 128), _req(1, 2, 5, 128)]
    # b starts inside a while both are alive at positions 2..3
    bad = _plan({0: 0, 1: 64}, 192)
    assert plan_violations(reqs, bad.offsets, bad.total_bytes)
    with pytest.raises(ValueError, match="overlap"):
        check_plan(reqs, bad)
    # lifetimes touching at one position still count as alive together
    touching = [_req(0, 0, 2, 64), _req(1, 2, 4, 64)]
    with pytest.raises(ValueError, match="overlap"):
        check_plan(touching, _plan({0: 0, 1: 0}, 64))
    # the same bytes at disjoint times, and adjacent bytes at the same time, are fine
    check_plan([_req(0, 0, 1, 128), _req(1, 2, 5, 128)], _plan({0: 0, 1: 0}, 128))
    check_plan(reqs, _plan({0: 0, 1: 128}, 256))


def test_check_plan_rejects_out_of_slab_and_misaligned_tensors():
    reqs = [_req(0, 0, 1, 100)]
    with pytest.raises(ValueError, match="outside the slab"):
        check_plan(reqs, _plan({0: 64}, 128))          # ends at 164
    with pytest.raises(ValueError, match="misaligned"):
        check_plan(reqs, _plan({0: 32}, 256))
    check_plan(reqs, _plan({0: 64}, 164))


@st.composite
def random_plans(draw):
    reqs = []
    for k in range(draw(st.integers(0, 6))):       # small, so that both verdicts are common
        start = draw(st.integers(0, 6))
        reqs.append(_req(k, start, start + draw(st.integers(0, 3)), draw(st.integers(0, 200))))
    offsets = {r.key: ALIGNMENT * draw(st.integers(0, 12)) for r in reqs}
    need = max((offsets[r.key] + r.nbytes for r in reqs), default=0)
    total = draw(st.sampled_from([need, max(0, need - draw(st.integers(1, 200))), need + 64]))
    return reqs, offsets, total


@settings(max_examples=200, deadline=None)
@given(random_plans())
def test_check_plan_agrees_with_the_byte_oracle(case):
    from srcore.memory.planner import Plan

    reqs, offsets, total = case
    bad = plan_violations(reqs, offsets, total)
    note(f"oracle: {bad}")
    event("bad plan" if bad else "good plan")
    if bad:
        with pytest.raises(ValueError):
            check_plan(reqs, Plan(offsets, total, "random"))
    else:
        check_plan(reqs, Plan(offsets, total, "random"))


# -- hand-derived plans: which gap, which group (soundness alone does not pin the algorithm) ------
def test_greedy_by_size_takes_the_smallest_gap_that_fits_even_an_exact_one():
    # placed largest first (ties: earlier start, then key): 0 at 0..512, 1 at 512..768, 2 at 768..960,
    # 3 at 960..1088, 4 at 1088..1216. Tensor 5 (positions 5..9) overlaps only 0, 2 and 4 in time,
    # so it sees the gaps 512..768 (256 B) and 960..1088 (128 B): the smaller one fits exactly.
    reqs = [_req(0, 0, 9, 512), _req(1, 0, 1, 256), _req(2, 0, 9, 192), _req(3, 0, 1, 128),
            _req(4, 0, 9, 128), _req(5, 5, 9, 128)]
    plan = GreedyBySizePlanner().plan(reqs)
    assert plan.offsets == {0: 0, 1: 512, 2: 768, 3: 960, 4: 1088, 5: 960}
    assert plan.total_bytes == 1216 and plan.algorithm == "precomputed_offsets"
    # a tensor bigger than every gap goes after the highest tensor alive with it, not after all
    more = reqs[:5] + [_req(5, 5, 9, 128), _req(6, 5, 9, 100), _req(7, 2, 3, 1000)]
    plan = GreedyBySizePlanner().plan(more)
    assert plan.offsets[7] == 0 and plan.offsets[0] == 1024   # 7 is largest: first, at 0; 0 goes above it
    assert_plan_sound(more, plan)


def test_greedy_by_size_ties_break_by_start_then_key():
    # equal sizes, disjoint except for one shared position each: the earlier start is placed first
    reqs = [_req(2, 4, 6, 64), _req(1, 0, 4, 64), _req(0, 4, 8, 64)]
    plan = GreedyBySizePlanner().plan(reqs)
    assert plan.offsets == {1: 0, 0: 64, 2: 128}


def test_storage_groups_best_fit_then_the_largest_free_slot():
    # by start, then key. 3 (90 B) finds groups {0} (100 B) and {1} (300 B) free: the smallest that
    # holds it, {0}. 4 (400 B) finds only {1} free, too small: it joins it (slot grows to 400).
    # 5 (500 B) finds both free, neither holds it: the largest, {1, 4}. 6 (60 B) fits {0, 3}.
    # At 6 all three slots are free (100, 500, 50): 7 (100 B) fits the 100 B slot exactly; 8 (40 B)
    # then fits 500 or 50: the smaller, the third group. 9 (600 B) fits none: the largest, the second.
    reqs = [_req(0, 0, 1, 100), _req(1, 0, 1, 300), _req(2, 0, 5, 50), _req(3, 2, 3, 90),
            _req(4, 2, 3, 400), _req(5, 4, 5, 500), _req(6, 4, 5, 60), _req(7, 6, 7, 100), _req(8, 6, 7, 40),
            _req(9, 8, 9, 600)]
    plan = StorageGroupPlanner().plan(reqs)
    assert plan.groups == ((0, 3, 6, 7), (1, 4, 5, 9), (2, 8)) and plan.slot_bytes == (100, 600, 50)
    assert plan.offsets == {0: 0, 3: 0, 6: 0, 7: 0, 1: 128, 4: 128, 5: 128, 9: 128, 2: 768, 8: 768}
    assert plan.total_bytes == 832 and plan.algorithm == "standard_resizing"
    # a later run where 2 and 6 need more: their slots grow, the slots after them move
    grown = grow(plan, [_req(2, 0, 5, 70), _req(6, 4, 5, 128)])
    assert grown.groups == plan.groups and grown.slot_bytes == (128, 600, 70)
    assert grown.offsets == {0: 0, 3: 0, 6: 0, 7: 0, 1: 128, 4: 128, 5: 128, 9: 128, 2: 768, 8: 768}
    assert grown.total_bytes == 896 and grown.algorithm == "standard_resizing"
    assert grow(plan, [_req(5, 4, 5, 500), _req(0, 0, 1, 1)]) is None      # fits as it is
    # a tensor the run does not ask for needs nothing, even where its slot is empty
    empty = StorageGroupPlanner().plan([_req(0, 0, 1, 0), _req(1, 0, 1, 64)])
    assert empty.slot_bytes == (0, 64) and grow(empty, [_req(1, 0, 1, 64)]) is None


def test_greedy_by_size_takes_the_lowest_of_equal_gaps():
    # 0, 2, 4 live throughout, 1 and 3 only at 0..1: tensor 5 (5..9) sees two 128 B gaps
    reqs = [_req(0, 0, 9, 128), _req(1, 0, 1, 128), _req(2, 0, 9, 128), _req(3, 0, 1, 128),
            _req(4, 0, 9, 128), _req(5, 5, 9, 128)]
    assert GreedyBySizePlanner().plan(reqs).offsets == {0: 0, 1: 128, 2: 256, 3: 384, 4: 512, 5: 128}


def test_lower_bound_counts_aligned_bytes_alive_at_each_position():
    # alive at 0: 100 (128 aligned); at 1..2: 100 + 64 + 1 (128 + 64 + 64); at 3: 1 (64) + 70 (128)
    reqs = [_req(0, 0, 2, 100), _req(1, 1, 2, 64), _req(2, 1, 3, 1), _req(3, 3, 3, 70)]
    assert lower_bound(reqs) == 256 and no_reuse_bytes(reqs) == 128 + 64 + 64 + 128
    assert lower_bound([]) == 0 and no_reuse_bytes([]) == 0
    assert lower_bound(reqs, alignment=1) == 165 and no_reuse_bytes(reqs, alignment=1) == 235

"""The suite's xdist scheduler (``tests/_schedule.py``): loadscope with the slowest modules handed out first."""
from __future__ import annotations

import collections

import pytest

pytest.importorskip("xdist")

from _schedule import SLOW_MODULES, SlowFirstScheduling  # noqa: E402

pytestmark = pytest.mark.one_pass


class _Node:
    """What the scheduler uses of an xdist worker: the test indices it is sent, and its shutdown."""

    shutting_down = False

    def __init__(self, name: str):
        self.sent: list[int] = []
        self.gateway = type("Gateway", (), {"id": name})()

    def send_runtest_some(self, indices) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduler(collection, nodes):
    sched = SlowFirstScheduling.__new__(SlowFirstScheduling)   # (its __init__ reads the --tx specs)
    sched.numnodes, sched.collection = len(nodes), None
    sched.config = type("Config", (), {"option": type("Option", (), {"loadscopereorder": True})()})()
    sched.workqueue, sched.assigned_work, sched.registered_collections = collections.OrderedDict(), {}, {}
    sched.log = lambda *a: None
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    return sched


def test_slow_modules_go_first_whole_and_in_file_order():
    slow = sorted(SLOW_MODULES, key=SLOW_MODULES.get, reverse=True)[:2]
    # many quick tests in one module (xdist's default order puts it first), two slow modules of 3 tests
    # (xdist tops a worker up when it has 2 tests or fewer left)
    few = [f"::test_{c}" for c in "abc"]
    collection = [f"tests/test_many.py::test_{i}" for i in range(6)]
    collection += [slow[1] + t for t in few] + [slow[0] + t for t in few] + ["tests/test_few.py::test_x"]
    nodes = [_Node("gw0"), _Node("gw1")]
    sched = _scheduler(collection, nodes)
    sched.schedule()
    first = [[collection[i] for i in node.sent] for node in nodes]
    # the slowest module to the first worker, the next to the second, each whole and in file order
    assert first == [[slow[0] + t for t in few], [slow[1] + t for t in few]]
    # the rest in xdist's order (most tests first) as workers run dry
    assert list(sched.workqueue) == ["tests/test_many.py", "tests/test_few.py"]


def test_slow_modules_name_existing_files():
    """A renamed or removed module would silently fall back to xdist's order."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    missing = [m for m in SLOW_MODULES if not (root / m).is_file()]
    assert not missing, missing

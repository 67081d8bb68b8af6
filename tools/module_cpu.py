"""A pytest plugin that records the process CPU seconds (user + sys, this process and the children it
waited for) each test module takes, setup, call and teardown of its tests summed, and the part of it
numba spent compiling. CPU time, unlike ``--durations``, hardly depends on the machine's load, so these
are what ``tests/_schedule.py``'s ``SLOW_MODULES`` and the suite-time log quote:

    MODULE_CPU_OUT=/tmp/cpu PYTHONPATH=tools .venv/bin/python -m pytest -n 2 --dist loadscope \\
        -p module_cpu TESTS
    .venv/bin/python tools/module_cpu.py /tmp/cpu      # the modules, largest first

Each process (an xdist worker or pytest's own) writes ``$MODULE_CPU_OUT/<worker>.json``:
``{module: [cpu seconds, numba compile seconds, tests]}``, and ``<worker>.tests``, the same per test:
``{nodeid: [cpu seconds, numba compile seconds]}`` (``module_cpu.py DIR N --tests``: the N largest tests).
"""
from __future__ import annotations

import collections
import json
import os
import sys
import time
from pathlib import Path

import pytest

_START = pytest.StashKey[tuple]()
_cpu: collections.Counter = collections.Counter()
_compile: collections.Counter = collections.Counter()
_tests: collections.Counter = collections.Counter()
_per_test: dict[str, list] = {}   # nodeid -> [cpu seconds, numba compile seconds]
_compiling = [0.0]   # numba compile CPU so far (outermost compiles only)
_depth = [0]


def _process_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def pytest_configure(config) -> None:
    from numba.core import dispatcher

    original = dispatcher.Dispatcher.compile

    def compile(self, sig):
        _depth[0] += 1
        start = time.thread_time()
        try:
            return original(self, sig)
        finally:
            _depth[0] -= 1
            if not _depth[0]:
                _compiling[0] += time.thread_time() - start

    dispatcher.Dispatcher.compile = compile


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    item.stash[_START] = (_process_cpu(), _compiling[0])


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    if _START not in item.stash:
        return
    cpu0, comp0 = item.stash[_START]
    mod = _module(item.nodeid)
    _cpu[mod] += _process_cpu() - cpu0
    _compile[mod] += _compiling[0] - comp0
    _tests[mod] += 1
    _per_test[item.nodeid] = [round(_process_cpu() - cpu0, 3), round(_compiling[0] - comp0, 3)]
    if nextitem is None or _module(nextitem.nodeid) != mod:   # written as each module ends: a run cut short
        _write(item.config)                                     # still leaves the modules it finished


def pytest_sessionfinish(session) -> None:
    _write(session.config)


def _write(config) -> None:
    out = os.environ.get("MODULE_CPU_OUT")
    if not out or not _tests:
        return
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    data = {m: [round(_cpu[m], 2), round(_compile[m], 2), _tests[m]] for m in _tests}
    (path / f"{worker}.{os.getpid()}.json").write_text(json.dumps(data, indent=0, sort_keys=True))
    (path / f"{worker}.{os.getpid()}.tests").write_text(json.dumps(_per_test, indent=0, sort_keys=True))


def main(argv: list[str]) -> None:
    """Print the modules of the JSON files in a directory, largest CPU first."""
    if "--tests" in argv:
        argv = [a for a in argv if a != "--tests"]
        tests: dict[str, list] = {}
        for f in sorted(Path(argv[0]).glob("*.tests")):
            tests.update(json.loads(f.read_text()))
        limit = int(argv[1]) if len(argv) > 1 else 60
        for nodeid, (cpu, comp) in sorted(tests.items(), key=lambda kv: -kv[1][0])[:limit]:
            print(f"{cpu:8.1f} {comp:8.1f}  {nodeid}")
        return
    total: dict[str, list] = {}
    for f in sorted(Path(argv[0]).glob("*.json")):
        for mod, (cpu, comp, n) in json.loads(f.read_text()).items():
            t = total.setdefault(mod, [0.0, 0.0, 0])
            t[0] += cpu
            t[1] += comp
            t[2] += n
    rows = sorted(total.items(), key=lambda kv: -kv[1][0])
    limit = int(argv[1]) if len(argv) > 1 else 60
    print(f"{sum(r[1][0] for r in rows):9.1f} s CPU, {sum(r[1][1] for r in rows):.1f} s numba compile, "
          f"{sum(r[1][2] for r in rows)} tests, {len(rows)} modules")
    for mod, (cpu, comp, n) in rows[:limit]:
        print(f"{cpu:8.1f} {comp:8.1f} {n:5d}  {mod}")


if __name__ == "__main__":
    main(sys.argv[1:])

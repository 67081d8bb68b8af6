"""A pytest plugin that prints, at the end of the run, the CPU seconds numba spent compiling each kernel
(the calling thread's CPU time, exclusive of the kernels compiled inside it) and how many overloads it
compiled or loaded from its cache, and the totals of trt_like's generated segments (one numba function
per generated source: per input shape), its other generated kernels and the static kernels. With a cold numba cache it shows what a fresh install or a fresh clone's test run pays:

    NUMBA_CACHE_DIR=$(mktemp -d) SRCORE_TEST_CACHE_DIR=$(mktemp -d) PYTHONPATH=tools \\
        .venv/bin/python -m pytest -n 0 -p numba_compile_profile TESTS

With ``NUMBA_COMPILE_PROFILE_SIGNATURES=WORD`` set it also prints the argument types of every overload
of the kernels whose ``module.name`` contains WORD (why a kernel compiled more than once: literal
constants, None against an array, another array layout or readonly-ness).
"""
from __future__ import annotations

import collections
import os
import time

_seconds: collections.Counter = collections.Counter()
_overloads: collections.Counter = collections.Counter()
_signatures: dict[str, list] = collections.defaultdict(list)
_stack: list[float] = []


def pytest_configure(config) -> None:
    from numba.core import dispatcher

    original = dispatcher.Dispatcher.compile

    def compile(self, sig):
        name = f"{self.py_func.__module__.rsplit('.', 1)[-1]}.{self.py_func.__qualname__}"
        known = len(self.overloads)
        start = time.thread_time()
        _stack.append(0.0)
        try:
            return original(self, sig)
        finally:
            spent = time.thread_time() - start
            inner = _stack.pop()
            if _stack:
                _stack[-1] += spent
            _seconds[name] += spent - inner
            if len(self.overloads) > known:   # a new overload (compiled or loaded); numba returns at once on a
                _overloads[name] += 1         # signature it has, which callers' explicit compile() calls often ask
                _signatures[f"{self.py_func.__module__}.{self.py_func.__qualname__}"].append((spent - inner, sig))

    dispatcher.Dispatcher.compile = compile


def pytest_terminal_summary(terminalreporter) -> None:
    terminalreporter.write_sep("=", f"numba compile: {sum(_seconds.values()):.1f} s CPU")
    # trt_like's generated code (one module per source: per shape for segments) against the static kernels
    kinds = {"segment": "_srcore_trt_like_segment_", "generated kernel": "_srcore_"}
    left = dict(_seconds)
    for kind, prefix in kinds.items():
        names = [n for n in left if n.startswith(prefix)]
        terminalreporter.write_line(f"{sum(left[n] for n in names):8.2f} s {len(names):4d}  ({kind}s)")
        for n in names:
            del left[n]
    terminalreporter.write_line(f"{sum(left.values()):8.2f} s {len(left):4d}  (other kernels)")
    for name, seconds in _seconds.most_common(30):
        terminalreporter.write_line(f"{seconds:8.2f} s {_overloads[name]:4d}  {name}")
    word = os.environ.get("NUMBA_COMPILE_PROFILE_SIGNATURES")
    if word:
        for name, sigs in sorted(_signatures.items()):
            if word in name:
                terminalreporter.write_sep("-", f"{name}: {len(sigs)} overloads")
                for seconds, sig in sigs:
                    terminalreporter.write_line(f"{seconds:7.2f} s  {sig}")

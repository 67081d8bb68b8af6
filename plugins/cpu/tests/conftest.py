"""Shared set-up of the cpu plugin's tests.

The kernels are imported from the installed ``srcore_cpu``, or from this checkout when the
plugin is not installed; ``cpu_kernel_util`` (helpers the test files share) is importable too.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if importlib.util.find_spec("srcore_cpu") is None:
    sys.path.insert(0, str(_HERE.parent))
sys.path.insert(0, str(_HERE))


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _own_timing_evidence(tmp_path_factory, monkeypatch):
    """Each test's kernels decide on their own timings (or the fakes it pins), never on timing
    evidence another test or a benchmark left in the cache (``kernels/evidence.py``): the evidence
    file goes to a fresh directory of the test's."""
    from srcore_cpu.kernels import evidence

    d = tmp_path_factory.mktemp("evidence")
    monkeypatch.setattr(evidence, "path", lambda: d / "timing.json")
    yield
    evidence.flush()   # (into the test's directory, not at exit into one removed by then)

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

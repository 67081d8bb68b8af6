"""The Static Runtime corpus: the helpers next to the tests are importable as ``static_runtime.*``."""
from __future__ import annotations

import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

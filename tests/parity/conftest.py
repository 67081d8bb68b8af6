"""Parity tests: srcore vs torch eager on real models (see docs/parity.md)."""
from __future__ import annotations

import os
import sys

# the harness and the model zoo are plain modules next to the tests; benchmarks/ is at the repo root
_HERE = os.path.dirname(__file__)
for p in (_HERE, os.path.dirname(os.path.dirname(_HERE))):
    if p not in sys.path:
        sys.path.insert(0, p)

"""Parity tests: srcore vs torch eager on real models (see docs/parity.md)."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

# the harness and the model zoo are plain modules next to the tests; benchmarks/ is at the repo root
_HERE = os.path.dirname(__file__)
for p in (_HERE, os.path.dirname(os.path.dirname(_HERE))):
    if p not in sys.path:
        sys.path.insert(0, p)


def _load_as(name: str, filename: str) -> None:
    # the zoo is imported as `parity_models`: a bare `models` would clash with other `models`
    # modules the session imports (tests/test_ir_text.py imports the shared bench `models`)
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, filename))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)


_load_as("parity_models", "models.py")


@pytest.fixture
def fbgemm():
    """torch's quantized engine set to fbgemm for the test (the x86 one the quantized zoos compare with)."""
    import torch

    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    yield
    torch.backends.quantized.engine = before

"""The quantized plugin's tests share ``_torch_quant`` (torch tensors as QuantizedArrays); put this
directory on the import path (the suite imports test modules with ``--import-mode=importlib``)."""
from __future__ import annotations

import os
import sys

import pytest

_HERE = os.path.dirname(__file__)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="module")
def fbgemm():
    """torch's quantized engine set to fbgemm (the x86 semantics srcore matches) for a module's
    tests, the previous engine put back after them (``pytest.mark.usefixtures("fbgemm")``)."""
    import torch

    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    yield
    torch.backends.quantized.engine = old


@pytest.fixture
def x86_engine():
    """torch's quantized engine set to x86 for one test, the previous engine put back after it: a module that
    ran before in the same worker may have left qnnpack set (whose roundings srcore does not reproduce), and a
    model quantized with the x86 qconfig must be converted and run by the x86 engine."""
    import torch

    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "x86"
    yield
    torch.backends.quantized.engine = old

"""The quantized plugin's tests share ``_torch_quant`` (torch tensors as QuantizedArrays); put this
directory on the import path (the suite imports test modules with ``--import-mode=importlib``)."""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(__file__)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

"""The converter table: ONNX op type -> ``OpConverter(fn, versions)``, one small converter per op.

Each family module holds its own ``CONVERTERS`` dict; ``TABLE`` is their union, read
once. A converter emits only ops srcore declares (``aten::``/``prim::``); an op version
not listed in its entry is reported as unsupported rather than guessed at.
"""
from __future__ import annotations

from . import (control, detection, elementwise, index, loss, msft, msft_bert, nn, qlinear, quant, recurrent,
               reduce, resize, sequence, shape, misc, transformer)
from ._util import OpConverter

TABLE: dict[str, OpConverter] = {}
for _module in (elementwise, shape, nn, reduce, index, control, quant, qlinear, resize, recurrent, sequence,
                misc, transformer, detection, loss):
    _dup = set(TABLE) & set(_module.CONVERTERS)
    if _dup:  # pragma: no cover - a programming error caught by the tests
        raise RuntimeError(f"ONNX ops converted twice: {sorted(_dup)}")
    TABLE.update(_module.CONVERTERS)

#: converters of ops outside the default domain, by domain (their schemas are version 1)
DOMAIN_TABLES: dict[str, dict[str, OpConverter]] = {
    "com.microsoft": {**qlinear.MS_CONVERTERS, **msft.CONVERTERS, **msft_bert.CONVERTERS}}

#: default-domain ops onnx does not define that onnxruntime registers (its RMSNorm), version 1
ORT_DEFAULT_DOMAIN: dict[str, OpConverter] = msft_bert.ORT_DEFAULT_DOMAIN

__all__ = ["DOMAIN_TABLES", "ORT_DEFAULT_DOMAIN", "TABLE", "OpConverter"]

"""The ONNX detection and set ops: natives (the lengths of NMS's and Unique's outputs depend on the data;
the kernels check their dtypes, the converter admits only ONNX's)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ANY, family

_k = family("detection")

KERNELS: list[Kernel] = [
    _k("srcore::non_max_suppression", "non_max_suppression", ANY, kind="native"),
    _k("srcore::roi_align", "roi_align", ANY, kind="native"),
    _k("srcore::unique", "unique", ANY, kind="native"),
]

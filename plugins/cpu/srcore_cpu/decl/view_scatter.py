"""Out-of-place writes into views (torch.export's functionalization): out variants."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ANY, family

_k = family("view_scatter")

KERNELS: list[Kernel] = [
    _k("aten::select_scatter", "select_scatter", ANY),
    _k("aten::slice_scatter", "slice_scatter", ANY),
    _k("aten::copy", "copy", ANY),
]

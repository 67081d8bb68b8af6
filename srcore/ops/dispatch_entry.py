"""A declaration's ``dispatch:`` line (:class:`DispatchEntry`, in ``Declaration.dispatch``).

Its own module so that a start whose declarations bind no kernels (srcore's own, the cpu plugin's) does not
build the class (an attrs class is ~1 M instructions of a cold start; docs/performance-log.md's cold-start
topic); ``srcore.ops.declarations.DispatchEntry`` is this class.
"""
from __future__ import annotations

import attrs

from .._repr import shared_repr

__all__ = ["DispatchEntry"]


@attrs.frozen
@shared_repr
class DispatchEntry:
    """One ``dispatch:`` line: backends (as written) -> kernel reference, with its dtypes and line."""

    backends: tuple[str, ...]
    kernel: str
    dtypes: tuple[str, ...] = ("*",)
    source: str = ""

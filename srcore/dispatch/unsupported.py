"""What dispatch reports of a node no kernel runs (:class:`Unsupported`, in ``UnsupportedOpError.missing``).

Its own module so that a load whose nodes all find a kernel does not build the class (an attrs class is
~1 M instructions of a cold start; docs/performance-log.md's cold-start topic); ``srcore.dispatch.Unsupported``
and ``srcore.dispatch.resolve.Unsupported`` are this class.
"""
from __future__ import annotations

from typing import Any

import attrs

from .._repr import shared_repr

__all__ = ["Unsupported"]


@attrs.frozen
@shared_repr
class Unsupported:
    """One node nobody can run on the requested backends, and who could run it elsewhere."""

    node: Any
    op: str
    schema: str
    dtypes: tuple[str, ...]
    source: str | None
    alternatives: tuple[str, ...]

    def describe(self) -> str:
        where = f"  # {self.source}" if self.source else ""
        dt = ", ".join(self.dtypes) or "no tensors"
        text = f"  {self.schema} with dtypes ({dt}){where}"
        for alt in self.alternatives:
            text += f"\n      {alt}"
        return text

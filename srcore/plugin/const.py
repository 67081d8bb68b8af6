"""A value a matcher binds at load (:class:`Const`, in ``Specialized.args`` / ``kwargs``).

Its own module so that a start whose matchers bind no constant does not build the class (an attrs class is
~1 M instructions of a cold start; docs/performance-log.md's cold-start topic); ``srcore.plugin.Const`` and
``srcore.plugin.types.Const`` are this class. ``srcore.plugin.types.is_const`` asks without
importing it.
"""
from __future__ import annotations

from typing import Any

import attrs

from .._repr import shared_repr

__all__ = ["Const"]


@attrs.frozen
@shared_repr
class Const:
    """In a :class:`Specialized` call, a value bound at load instead of a node argument
    (e.g. a Python float constant converted once to ``numpy.float32``)."""

    value: Any = attrs.field(eq=False)

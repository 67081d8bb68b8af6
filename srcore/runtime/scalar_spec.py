"""The spec of a model input that is not a tensor (:class:`ScalarSpec`: an int, a float, a list...).

Its own module so that a model whose inputs are all tensors does not build the class (an attrs class is ~1 M
instructions of a cold start; docs/performance-log.md's cold-start topic); ``srcore.runtime.inputs.ScalarSpec``
is this class, and ``srcore.runtime.inputs.is_scalar_spec`` asks without importing it.
"""
from __future__ import annotations

import attrs

from .._repr import shared_repr
from ..ir.types import Type

__all__ = ["ScalarSpec"]


@attrs.frozen
@shared_repr
class ScalarSpec:
    """The spec of an input that is not a tensor (an int, a float, a list...)."""

    name: str
    type: Type
    dtype = None
    shape = None

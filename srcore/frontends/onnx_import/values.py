"""What an ONNX value becomes during conversion: a :class:`Val`.

An ONNX value is a tensor, but many are small int64 tensors that only carry
shapes (``Shape -> Gather -> Concat -> Reshape``). Those are kept as a list of
ints (Python ints, or srcore ``int`` Values such as ``aten::size(x, 0)``), so that
the converted graph computes shapes as scalars, the way a TorchScript graph
does, and a static input shape folds them away. Constants (initializers,
``Constant`` nodes) stay numpy arrays until a node needs them as a tensor, and
then become named parameters. ``Val.tensor`` is the srcore tensor Value once
it has been made.
"""
from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ...ir.graph import Value
from ...ir.types import TensorType, Type

#: an int item of a shape list: a Python int or an srcore ``int`` Value
IntItem = Any


@attrs.define(eq=False)
class Val:
    """One converted ONNX value (see the module docstring)."""

    name: str
    type: Type = attrs.field(factory=TensorType)    # what ONNX shape inference says (TensorType for tensors)
    tensor: Value | None = None                     # the srcore Value, once made
    const: np.ndarray | None = None                 # a constant's array (initializer, Constant node)
    ints: list[IntItem] | None = None               # an int64/int32 tensor of rank 0 or 1 as int items
    scalar: bool = False                            # with ``ints``: the tensor is 0-d (one item)
    seq: bool = False                               # an ONNX sequence: ``tensor`` is a ``Tensor[]`` value
    param_name: str | None = None                   # the parameter name a constant gets (an initializer's)
    block: Any = None                               # the srcore Block that defines ``tensor``

    @property
    def dtype(self) -> str | None:
        if self.const is not None:
            return str(self.const.dtype)
        return self.type.dtype if isinstance(self.type, TensorType) else None

    @property
    def shape(self):
        if self.const is not None:
            return tuple(int(d) for d in self.const.shape)
        if self.ints is not None:
            return () if self.scalar else (len(self.ints),)
        return self.type.shape if isinstance(self.type, TensorType) else None

    @property
    def rank(self) -> int | None:
        s = self.shape
        return None if s is None else len(s)

    def known_ints(self) -> list[int] | None:
        """The values as Python ints when all of them are known at conversion."""
        if self.const is not None and self.const.dtype.kind in "iub" and self.const.ndim <= 1:
            return [int(v) for v in self.const.reshape(-1)]
        if self.ints is not None and all(isinstance(i, int) for i in self.ints):
            return list(self.ints)
        return None

"""The kernel table: every kernel of every loaded plugin, indexed for static dispatch.

Kernels are indexed by ``(op, backend, kind)`` where ``op`` is the qualified
name of the overload (``"aten::add.Tensor"``, or ``"aten::relu"`` for the
overload with an empty name). Each bucket is sorted by ``(-priority, plugin
name)``: the higher priority wins, and on a tie the plugin whose entry-point
name sorts first wins. That order is deterministic, independent of install
order, and ``srcore list-ops`` shows every provider, not only the winner.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

import attrs

from .._repr import shared_repr
from ..plugin.types import KERNEL_KINDS, Kernel

#: dtype names every backend understands without a plugin declaring them (numpy's)
STANDARD_DTYPES = frozenset({
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
    "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "uint4", "int4",
})


def op_key(op: str) -> str:
    """Canonical qualified name: ``"aten::relu."`` and ``"aten::relu"`` are the same overload."""
    return op[:-1] if op.endswith(".") else op


def wildcard_of(op: str) -> str:
    """``"aten::*"`` for ``"aten::add.Tensor"``: the key of the namespace's generic kernels."""
    return op.split("::", 1)[0] + "::*"


def kernel_sort_key(kernel: Kernel) -> tuple[int, str]:
    """Higher priority first, then the plugin name (ties are deterministic)."""
    plugin = kernel.provider.name if kernel.provider is not None else ""
    return (-kernel.priority, plugin)


@attrs.define
@shared_repr
class KernelTable:
    """Kernels by ``(op, backend, kind)``; ``schemas`` is the op registry they were checked against."""

    schemas: Any = None
    _index: dict[tuple[str, str, str], list[Kernel]] = attrs.field(factory=dict, alias="_index")
    _by_op: dict[str, list[Kernel]] = attrs.field(factory=dict, alias="_by_op")

    def add(self, kernels: Kernel | Iterable[Kernel]) -> None:
        """Add one kernel or several; buckets stay sorted."""
        if isinstance(kernels, Kernel):
            kernels = (kernels,)
        touched = set()
        for k in kernels:
            op = op_key(k.op)
            key = (op, k.backend, k.kind)
            self._index.setdefault(key, []).append(k)
            self._by_op.setdefault(op, []).append(k)
            touched.add(key)
        for key in touched:
            self._index[key].sort(key=kernel_sort_key)

    def lookup(self, op: str, backend: str, kind: str) -> list[Kernel]:
        """The kernels for one overload, backend and kind, best first; then its namespace's
        generic (``"ns::*"``) kernels."""
        op = op_key(op)
        return [*self._index.get((op, backend, kind), ()), *self._index.get((wildcard_of(op), backend, kind), ())]

    def kernels_for(self, op: str) -> list[Kernel]:
        """Every kernel of one overload (its namespace's generic kernels included), on every backend,
        in (backend, kind order, rank) order."""
        op = op_key(op)
        ks = [*self._by_op.get(op, []), *(self._by_op.get(wildcard_of(op), []) if not op.endswith("::*") else [])]
        return sorted(ks, key=lambda k: (k.backend, KERNEL_KINDS.index(k.kind), k.is_wildcard, *kernel_sort_key(k)))

    def ops(self) -> list[str]:
        """The qualified names of every op with at least one kernel, sorted."""
        return sorted(self._by_op)

    def backends(self) -> list[str]:
        return sorted({b for (_, b, _) in self._index})

    def __iter__(self) -> Iterator[Kernel]:
        for op in self.ops():
            yield from self.kernels_for(op)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_op.values())

    def __contains__(self, op: str) -> bool:
        return op_key(op) in self._by_op

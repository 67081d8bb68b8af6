"""The records of the tactics wing. Every fact about a tactic is a field here (its name, which BLAS
or thread pool it runs on, the weight bytes it streams, its precision), never an attribute set on
a function."""
from __future__ import annotations

import threading
from typing import Any, Callable

import attrs

#: the precision every tactic computes in today (INT8 engines will add their own)
FLOAT32 = "float32"


@attrs.frozen
class Kernel:
    """A laid-out implementation of one layer: ``fn(*inputs, *outputs)`` writes the outputs."""

    fn: Callable[..., None] = attrs.field(eq=False)
    #: bytes of laid-out weights one call reads (the timing charges them: in a network they stream
    #: from memory); None: the layer's constant attributes as given
    weight_bytes: int | None = None
    #: objects ``fn`` needs alive (a packed weight buffer); only held
    keep: Any = attrs.field(default=None, eq=False, repr=False)
    #: the weights the tactic laid out (packed, transformed), by name: what a serialized plan stores
    #: so that loading it does not lay them out again (:attr:`Candidate.restore`)
    layout: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)


class _Once:
    """``build()`` run at most once (laying out every candidate's weights made warm rebuilds
    2-3x slower: a builder that knows its winner builds only that one)."""

    __slots__ = ("_build", "_kernel", "_lock")

    def __init__(self, build: Callable[[], Kernel]):
        self._build, self._kernel, self._lock = build, None, threading.Lock()

    def __call__(self) -> Kernel:
        if self._kernel is None:
            with self._lock:
                if self._kernel is None:
                    k = self._build()
                    self._kernel = k if isinstance(k, Kernel) else Kernel(k)
        return self._kernel

    @property
    def built(self) -> bool:
        return self._kernel is not None


def _once(build) -> _Once:
    return build if isinstance(build, _Once) else _Once(build)


@attrs.frozen
class Candidate:
    """One implementation the builder may choose for a layer.

    ``blas``: ``"openblas"`` (numpy's BLAS), ``"mkl"`` or ``"omp"`` (numba's OpenMP pool), or None
    (no threaded library): at more than one intra-op thread the builder keeps an engine on one
    threaded pool (:mod:`.choose`). ``restore(layout)``: the kernel from a stored
    :attr:`Kernel.layout` (None: the tactic has no layout worth storing, ``build()`` it)."""

    name: str
    build: _Once = attrs.field(eq=False, converter=_once)
    blas: str | None = None
    precision: str = FLOAT32
    restore: Callable[[dict], Kernel] | None = attrs.field(default=None, eq=False)


@attrs.frozen
class Tactic:
    """One row of the tactic table: an implementation (or a family of them, e.g. every conv
    algorithm) of the layers of ``kind``.

    ``candidates(layer, net)`` returns the :class:`Candidate` s that apply to the layer (none when
    it does not apply). ``threaded(layer, net)``: whether the layer, built for more than one
    intra-op thread, runs on numba's OpenMP pool (the engine then keeps OpenBLAS off its threads).
    """

    kind: str
    name: str
    candidates: Callable[[Any, Any], list[Candidate]] = attrs.field(eq=False)
    threaded: Callable[[Any, Any], bool] | None = attrs.field(default=None, eq=False)
    precision: str = FLOAT32


def simple(name: str, factory: Callable[[Any, Any], Callable | None],
           blas: str | None = None) -> Callable[[Any, Any], list[Candidate]]:
    """The candidates function of a tactic whose ``factory(layer, net)`` returns its kernel function
    (or None when it does not apply)."""
    def candidates(layer, net) -> list[Candidate]:
        fn = factory(layer, net)
        if fn is None:
            return []
        return [Candidate(name, lambda: Kernel(fn), blas)]
    return candidates

"""Calibration data: batches of model inputs checked against the model's input specs, and running a
graph with chosen intermediate values as extra outputs ("taps").

Calibration data is given as

* a path to an ``.npz`` file, or a mapping ``{input name: array}``: every input's samples along
  axis 0, cut into batches of ``batch_size``;
* an iterable of batches, each a mapping ``{input name: array}``, a tuple of arrays (in input
  order) or one array (a single-input model).

Every input needs an array whose dtype and fixed dims match the model's input spec: a mismatch is a
:class:`srcore.QuantizationError` naming the input (and the batch); arrays that are not inputs
(labels, say) are ignored with a warning.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import QuantizationError, SrcoreError
from ..ir.graph import Graph, Value


def _load_npz(path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as d:
            return {k: d[k] for k in d.files}
    except FileNotFoundError:
        raise QuantizationError(f"{path}: no such calibration file") from None
    except (OSError, ValueError) as exc:  # not an .npz, or pickled arrays
        raise QuantizationError(f"{path}: not a readable .npz file ({exc})") from None


def _check_array(name: str, a: Any, spec, where: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        try:
            a = np.asarray(a)
        except Exception:  # noqa: BLE001 - anything that is not array-like
            raise QuantizationError(f"calibration input {name!r}{where}: not an array ({type(a).__name__})") from None
    if spec is None:
        return a
    if spec.dtype is not None and a.dtype.name != spec.dtype:
        raise QuantizationError(f"calibration input {name!r}{where}: dtype {a.dtype.name}, the model expects "
                                f"{spec.dtype}")
    if spec.shape is not None:
        if a.ndim != len(spec.shape):
            raise QuantizationError(f"calibration input {name!r}{where}: shape {list(a.shape)} has rank {a.ndim}, "
                                    f"the model expects {list(spec.shape)}")
        for i, (got, want) in enumerate(zip(a.shape, spec.shape)):
            if isinstance(want, int) and got != want:
                raise QuantizationError(f"calibration input {name!r}{where}: dim {i} is {got}, the model expects "
                                        f"{want} (shape {list(spec.shape)})")
    return a


def _by_name(batch: Mapping[str, Any], specs, where: str) -> tuple[np.ndarray, ...]:
    names = [s.name for s in specs]
    missing = [n for n in names if n not in batch]
    extra = [k for k in batch if k not in names]
    if extra and not missing:  # labels and the like beside the inputs: say so, use the inputs
        import warnings

        from ..errors import SrcoreWarning

        warnings.warn(f"calibration data{where}: ignoring {', '.join(map(repr, extra))} (not an input of the "
                      f"model; its inputs: {', '.join(names)})", SrcoreWarning, stacklevel=3)
    elif missing:
        parts = []
        if missing:
            parts.append(f"no array for input {', '.join(map(repr, missing))}")
        if extra:
            parts.append(f"{', '.join(map(repr, extra))} {'is' if len(extra) == 1 else 'are'} not an input")
        raise QuantizationError(f"calibration data{where}: {'; '.join(parts)} (the model's inputs: "
                                f"{', '.join(names)})")
    return tuple(_check_array(s.name, batch[s.name], s, where) for s in specs)


def calibration_batches(calibration: Any, specs: Sequence, batch_size: int = 32) -> list[tuple[np.ndarray, ...]]:
    """The calibration data as a list of input tuples (in the order of ``specs``), checked."""
    if batch_size < 1:
        raise QuantizationError(f"batch_size must be at least 1, got {batch_size}")
    if isinstance(calibration, (str, os.PathLike)):
        calibration = _load_npz(calibration)
    if isinstance(calibration, Mapping):
        arrays = _by_name(calibration, specs, "")
        if not arrays:
            raise QuantizationError("the model has no tensor inputs to calibrate with")
        n = {a.shape[0] if a.ndim else None for a in arrays}
        if None in n or len(n) != 1:
            raise QuantizationError("calibration arrays must all hold the same number of samples along axis 0 "
                                    f"(got {', '.join(f'{s.name}: {list(a.shape)}' for s, a in zip(specs, arrays))})")
        total = n.pop()
        if total == 0:
            raise QuantizationError("the calibration data has no samples")
        return [tuple(a[i:i + batch_size] for a in arrays) for i in range(0, total, batch_size)]
    if isinstance(calibration, np.ndarray):
        return calibration_batches({s.name: calibration for s in specs[:1]} if len(specs) == 1 else calibration,
                                   specs, batch_size)
    if not isinstance(calibration, Iterable):
        raise QuantizationError(f"calibration data must be an .npz path, a mapping of input names to arrays or "
                                f"an iterable of batches, not {type(calibration).__name__}")
    batches = []
    for i, b in enumerate(calibration):
        where = f" (batch {i})"
        if isinstance(b, Mapping):
            batches.append(_by_name(b, specs, where))
            continue
        if isinstance(b, np.ndarray) or not isinstance(b, (tuple, list)):
            b = (b,)
        if len(b) != len(specs):
            raise QuantizationError(f"calibration data{where}: {len(b)} arrays, the model has {len(specs)} inputs "
                                    f"({', '.join(s.name for s in specs)})")
        batches.append(tuple(_check_array(s.name, a, s, where) for s, a in zip(specs, b)))
    if not batches:
        raise QuantizationError("the calibration data has no batches")
    return batches


class Taps:
    """A copy of ``graph`` returning ``values`` (values of ``graph``'s top block) besides its outputs,
    loaded as a StaticModule: ``taps(batch)`` gives ``{id(value): array}``."""

    def __init__(self, graph: Graph, values: Sequence[Value], input_specs, backends=None):
        from ..model import Model
        from ..runtime.static_module import StaticModule

        g = graph.copy()
        env = {id(a): b for a, b in zip(graph.inputs, g.inputs)}
        for a, b in zip(graph.nodes, g.nodes):
            for va, vb in zip(a.outputs, b.outputs):
                env[id(va)] = vb
        self.n_outputs = len(g.outputs)
        self.keys: list[int] = []
        seen = set()
        for v in values:
            if id(v) in seen or v.node.kind == "prim::Param":
                continue
            seen.add(id(v))
            self.keys.append(id(v))
            g.register_output(env[id(v)])
        model = Model.from_graph(g, input_specs=input_specs)
        try:
            self.module = StaticModule(model, backends=backends)
        except SrcoreError as exc:
            raise QuantizationError(f"cannot load the model for calibration: {exc}") from exc

    def __call__(self, batch: tuple[np.ndarray, ...]) -> tuple[tuple, dict[int, np.ndarray]]:
        out = self.module(*batch)
        out = out if isinstance(out, tuple) else (out,)
        return out[:self.n_outputs], dict(zip(self.keys, out[self.n_outputs:]))

"""Model inputs and outputs as table columns.

``inputs={"x": "image"}`` feeds column ``image`` to model input ``x`` (an input not named takes
the column of its own name); a list of columns (``{"x": ["f0", "f1", "f2"]}``) stacks scalar
columns as the features of a rank-2 input.
``outputs={"output": "pred"}`` names the column of an output (a list spreads a rank-2 output
over one column per feature). Inputs default to columns named as the inputs; outputs default to
every output, named as the outputs; given ``outputs``, only the outputs it names become columns.

The first dimension of every tensor input is the row (batch) dimension. A model whose specs fix
it (``x: float32[1, 3, 224, 224]``) runs in chunks of that many rows.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs
import numpy as np

from ..errors import SrcoreError, SrcoreInputError
from ..model import InputSpec


@attrs.frozen
class Binding:
    """One model input or output and its column (or columns, one per feature, when ``spread``)."""

    name: str
    columns: tuple[str, ...]
    spread: bool = False

    def describe(self) -> str:
        return repr(self.columns[0]) if not self.spread else "[" + ", ".join(map(repr, self.columns)) + "]"


@attrs.frozen
class ColumnInfo:
    """What a table says about a column: numpy dtype name and the shape of one row's value
    (``()`` for a scalar column; a dim or the whole shape ``None`` when the table does not say)."""

    dtype: str | None
    shape: tuple[int | None, ...] | None


@attrs.frozen
class Rows:
    """A range of rows, for messages: ``data/part-3.parquet rows 200-299``."""

    label: str
    start: int
    stop: int

    def sub(self, i: int, j: int) -> "Rows":
        return Rows(self.label, self.start + i, self.start + j)

    def __str__(self) -> str:
        return f"{self.label} rows {self.start}-{self.stop - 1}"


@attrs.frozen
class ColumnMap:
    """The checked mapping between a model and table columns (picklable: sent to the workers)."""

    inputs: tuple[Binding, ...]
    specs: tuple[InputSpec, ...]
    outputs: tuple[Binding, ...]
    output_names: tuple[str, ...]
    #: rows per model call when the specs fix the first dimension, else None (any number)
    fixed_batch: int | None

    @classmethod
    def build(cls, model, inputs: Mapping[str, Any] | None = None,
              outputs: Mapping[str, Any] | None = None) -> "ColumnMap":
        """Check ``inputs``/``outputs`` against ``model`` (a ``srcore.Model``); raises SrcoreError."""
        specs = _tensor_specs(model)
        names = [s.name for s in specs]
        if inputs is None:
            inputs = {}
        if not isinstance(inputs, Mapping):
            raise SrcoreError(f"inputs must map model input names to columns, got {type(inputs).__name__}")
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise SrcoreError(f"inputs={dict(inputs)!r}: the model has no input {', '.join(map(repr, unknown))}; "
                              f"its inputs are {', '.join(names)}")
        in_b = tuple(_binding(n, inputs.get(n, n), "input") for n in names)
        for b, s in zip(in_b, specs):
            if b.spread and s.shape is not None and len(s.shape) != 2:
                raise SrcoreError(f"model input {s.name!r} has rank {len(s.shape)}: a list of columns "
                                  f"{b.describe()} only feeds a rank-2 input (rows x features)")
        out_names = tuple(model.output_names)
        if outputs is None:
            outputs = {n: n for n in out_names}
        if not isinstance(outputs, Mapping) or not outputs:
            raise SrcoreError(f"outputs must map model output names to columns, got {outputs!r}")
        unknown = [k for k in outputs if k not in out_names]
        if unknown:
            raise SrcoreError(f"outputs={dict(outputs)!r}: the model has no output "
                              f"{', '.join(map(repr, unknown))}; its outputs are {', '.join(out_names)}")
        out_b = tuple(_binding(n, c, "output") for n, c in outputs.items())
        cols = [c for b in out_b for c in b.columns]
        dup = sorted({c for c in cols if cols.count(c) > 1})
        if dup:
            raise SrcoreError(f"outputs={dict(outputs)!r}: column {', '.join(map(repr, dup))} is named twice")
        return cls(in_b, tuple(specs), out_b, out_names, _fixed_batch(specs))

    # -- names -------------------------------------------------------------------------------------
    @property
    def input_columns(self) -> list[str]:
        return list(dict.fromkeys(c for b in self.inputs for c in b.columns))

    @property
    def output_columns(self) -> list[str]:
        return [c for b in self.outputs for c in b.columns]

    # -- the driver's check of a table's schema ----------------------------------------------------
    def check_schema(self, columns: Mapping[str, ColumnInfo], where: str, *, new_columns: bool = False) -> None:
        """Raise SrcoreError naming ``where`` and the column when ``columns`` cannot feed the model.

        ``new_columns``: the outputs are added to this table, so their names must be free.
        """
        for b, s in zip(self.inputs, self.specs):
            for c in b.columns:
                if c not in columns:
                    raise SrcoreInputError(f"{where}: no column {c!r} for model input {s.name!r}; the columns are "
                                           f"{', '.join(map(repr, columns)) or '(none)'}")
                info = columns[c]
                _check_dtype(info.dtype, s, c, where)
                if b.spread:
                    if info.shape is not None and info.shape != ():
                        raise SrcoreInputError(f"{where}: column {c!r} holds values of shape {info.shape}; the "
                                               f"columns {b.describe()} of input {s.name!r} must each hold one number")
                else:
                    _check_row_shape(info.shape, s, c, where)
            if b.spread and s.shape is not None and isinstance(s.shape[1], int) and s.shape[1] != len(b.columns):
                raise SrcoreInputError(f"{where}: model input {s.name!r} has {s.shape[1]} features but "
                                       f"{len(b.columns)} columns are given ({b.describe()})")
        if new_columns:
            taken = [c for c in self.output_columns if c in columns]
            if taken:
                raise SrcoreError(f"{where}: output column {', '.join(map(repr, taken))} already exists; name the "
                                  "outputs' columns with outputs={output name: new column}")

    # -- a batch on a worker -----------------------------------------------------------------------
    def gather(self, batch: Mapping[str, Any], rows: Rows) -> list[np.ndarray]:
        """The model's inputs from a batch of columns (dtype cast ``same_kind`` to the specs')."""
        out = []
        for b, s in zip(self.inputs, self.specs):
            if b.spread:
                parts = [column_array(batch[c], c, rows) for c in b.columns]
                bad = next((c for c, p in zip(b.columns, parts) if p.ndim != 1), None)
                if bad is not None:
                    raise SrcoreInputError(f"{rows}: column {bad!r} of input {s.name!r} must hold one number per row")
                a = np.stack(parts, axis=1)
            else:
                a = column_array(batch[b.columns[0]], b.columns[0], rows)
            out.append(_cast(a, s, b, rows))
        return out

    def scatter(self, outs: Sequence[Any], n: int, rows: Rows) -> dict[str, np.ndarray]:
        """``{column: array}`` of the outputs of ``n`` rows, in the order of ``outputs``."""
        by_name = dict(zip(self.output_names, outs))
        cols: dict[str, np.ndarray] = {}
        for b in self.outputs:
            a = by_name[b.name]
            if not isinstance(a, np.ndarray) or a.ndim == 0 or a.shape[0] != n:
                got = f"shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
                raise SrcoreError(f"{rows}: output {b.name!r} is {got} for {n} input rows: batch inference needs "
                                  "outputs with one row per input row (the first dimension)")
            if b.spread:
                if a.ndim != 2 or a.shape[1] != len(b.columns):
                    raise SrcoreError(f"{rows}: output {b.name!r} has shape {a.shape}; spreading it over "
                                      f"{len(b.columns)} columns {b.describe()} needs shape ({n}, {len(b.columns)})")
                for i, c in enumerate(b.columns):
                    cols[c] = a[:, i]
            else:
                cols[b.columns[0]] = a
        return cols


def column_array(values: Any, column: str, rows: Rows) -> np.ndarray:
    """One column's values as an array of shape (rows, *value shape); ragged rows are an error."""
    a = values.to_numpy() if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray) else values
    a = np.asarray(a)
    if a.dtype == object:
        items = list(a)
        if not items:
            raise SrcoreInputError(f"{rows}: column {column!r} holds objects, not numbers")
        try:
            a = np.stack([np.asarray(v) for v in items])
        except ValueError:
            shapes = {np.shape(v) for v in items}
            raise SrcoreInputError(f"{rows}: column {column!r}: the rows' values have different shapes "
                                   f"({', '.join(map(str, sorted(shapes)[:4]))}); a model input needs one shape") from None
        if a.dtype == object:
            raise SrcoreInputError(f"{rows}: column {column!r} holds {type(items[0]).__name__} values, not numbers")
    if a.dtype.kind not in "biuf":
        raise SrcoreInputError(f"{rows}: column {column!r} holds {a.dtype} values, not numbers")
    return a


def _binding(name: str, cols: Any, what: str) -> Binding:
    if isinstance(cols, str) and cols:
        return Binding(name, (cols,))
    if isinstance(cols, (list, tuple)) and cols and all(isinstance(c, str) and c for c in cols):
        return Binding(name, tuple(cols), spread=True)
    raise SrcoreError(f"model {what} {name!r}: expected a column name or a list of column names, got {cols!r}")


def _tensor_specs(model) -> list[InputSpec]:
    from ..ir.types import TensorType

    specs = {s.name: s for s in model.input_specs}
    out = []
    for v in model.graph.inputs:
        if not isinstance(v.type, TensorType):
            raise SrcoreError(f"model input {v.name!r} is a {v.type}, not a tensor: batch inference feeds "
                              "tensor inputs from columns")
        s = specs.get(v.name, InputSpec(v.name))
        if s.shape is not None and len(s.shape) == 0:
            raise SrcoreError(f"model input {s.name!r} has rank 0: batch inference needs a first (row) dimension")
        out.append(s)
    return out


def _fixed_batch(specs: Sequence[InputSpec]) -> int | None:
    fixed = {s.name: s.shape[0] for s in specs if s.shape and isinstance(s.shape[0], int)}
    sizes = set(fixed.values())
    if len(sizes) > 1:
        raise SrcoreError(f"the inputs fix different first (row) dimensions {fixed}: rows cannot be fed in batches")
    n = next(iter(sizes), None)
    if n == 0:
        raise SrcoreError("the model's inputs fix the first (row) dimension to 0")
    return n


def _check_dtype(dtype: str | None, s: InputSpec, column: str, where: str) -> None:
    if dtype is None or s.dtype is None or dtype == s.dtype:
        return
    try:
        ok = np.can_cast(np.dtype(dtype), np.dtype(s.dtype), "same_kind")
    except TypeError:
        ok = False
    if not ok:
        raise SrcoreInputError(f"{where}: column {column!r} holds {dtype} values; model input {s.name!r} takes "
                               f"{s.dtype} (only a cast of the same kind, such as float64 to float32, is done)")


def _check_row_shape(shape, s: InputSpec, column: str, where: str) -> None:
    if shape is None or s.shape is None:
        return
    want = s.shape[1:]
    if len(shape) != len(want):
        raise SrcoreInputError(f"{where}: column {column!r} holds values of rank {len(shape)} (shape {_fmt(shape)}); "
                               f"model input {s.name!r} needs rows of shape {_fmt(want)} (input shape {_fmt(s.shape)})")
    for axis, (w, g) in enumerate(zip(want, shape)):
        if isinstance(w, int) and g is not None and w != g:
            raise SrcoreInputError(f"{where}: column {column!r} holds values of shape {_fmt(shape)}; model input "
                                   f"{s.name!r} needs rows of shape {_fmt(want)} (dimension {axis + 1} must be {w})")


def _cast(a: np.ndarray, s: InputSpec, b: Binding, rows: Rows) -> np.ndarray:
    if s.dtype is None or a.dtype == s.dtype:
        return a
    if not np.can_cast(a.dtype, np.dtype(s.dtype), "same_kind"):
        raise SrcoreInputError(f"{rows}: column {b.describe()} holds {a.dtype} values; model input {s.name!r} "
                               f"takes {s.dtype} (only a cast of the same kind, such as float64 to float32, is done)")
    return a.astype(s.dtype)


def _fmt(shape) -> str:
    return "(" + ", ".join("*" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"

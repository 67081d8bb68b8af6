"""One batch of rows through the model, on a worker: columns in, columns out, errors naming the rows."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import KernelError, SrcoreError, SrcoreInputError
from .columns import ColumnMap, Rows


class BatchRunner:
    """Runs batches of columns through a ``StaticModule`` (thread-safe: the module keeps one
    runtime per thread). A model that fixes its first dimension to ``k`` runs ``k`` rows at a time."""

    def __init__(self, module, colmap: ColumnMap):
        self.module = module
        self.colmap = colmap

    def __call__(self, batch: Mapping[str, Any], rows: Rows) -> dict[str, np.ndarray]:
        inputs = self.colmap.gather(batch, rows)
        n = inputs[0].shape[0] if inputs[0].ndim else 0
        for a, b in zip(inputs, self.colmap.inputs):
            if a.ndim == 0 or a.shape[0] != n:
                raise SrcoreInputError(f"{rows}: column {b.describe()} has {a.shape[:1]} rows, other columns {n}")
        if n == 0:
            return self.colmap.scatter(self._empty_outputs(inputs), 0, rows)
        step = self.colmap.fixed_batch or n
        if n % step:
            raise SrcoreInputError(f"{rows}: {n} rows, but the model takes exactly {step} rows per call "
                                   f"(its inputs fix the first dimension): give a multiple of {step} rows")
        parts = [self._run([a[i:i + step] for a in inputs], rows.sub(i, i + step)) for i in range(0, n, step)]
        outs = parts[0] if len(parts) == 1 else tuple(np.concatenate(p) for p in zip(*parts))
        return self.colmap.scatter(outs, n, rows)

    def _run(self, inputs: list[np.ndarray], rows: Rows) -> tuple:
        try:
            out = self.module(*inputs)
        except SrcoreInputError as exc:
            raise SrcoreInputError(f"{rows}: {exc}") from None
        except KernelError as exc:
            raise KernelError(f"{rows}: {exc}") from None
        except SrcoreError as exc:
            raise SrcoreError(f"{rows}: {type(exc).__name__}: {exc}") from None
        return out if isinstance(out, tuple) else (out,)

    def _empty_outputs(self, inputs: list[np.ndarray]) -> tuple:
        """Outputs for zero rows: one row of zeros through the model, then cut to zero rows."""
        one = [np.zeros((self.colmap.fixed_batch or 1, *a.shape[1:]), a.dtype) for a in inputs]
        return tuple(o[:0] for o in self._run(one, Rows("(empty batch)", 0, 1)))

"""``srcore.dask.predict``: a model over dask arrays (``map_blocks``) and dataframes (``map_partitions``)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import SrcoreError, SrcoreInputError
from ..scaleout.columns import ColumnInfo, ColumnMap, Rows
from ..scaleout.job import Work
from ..scaleout.runner import BatchRunner
from ..scaleout.source import check_transfer, model_source, static_module
from .cluster import current_client, install_model


def predict(data, model: Any, *, inputs: Mapping[str, Any] | None = None,
            outputs: Mapping[str, Any] | None = None, options=None, transfer: str = "copy"):
    """Run ``model`` over ``data``, lazily, one task per chunk (partition) of rows.

    ``data``: a dask array (a one-input model: the array is its input), a dict of dask arrays keyed
    by input name, or a dask DataFrame (columns mapped by ``inputs`` as in ``srcore.ray.predict``;
    a list of columns stacks them as the features of a rank-2 input). Arrays are cut along the first
    (row) dimension only: other dimensions are merged into one chunk. Returns a dask array for a
    one-output model, else a dict of them keyed by output column; a DataFrame gets the output
    columns after its own (a rank >= 2 output becomes a column of arrays).

    ``model``: a ``.srm`` path or a ``srcore.Model``; ``options``: a ``srcore.Options``. The model is
    loaded once per worker process; with a distributed client and ``transfer="copy"`` the file is
    sent once to every worker (``"path"``: workers read it at this path). To declare the result's
    dtypes and shapes, this call runs one row of zeros through the model here (a DataFrame whose
    input columns hold arrays also has its first row read).
    """
    from ..runtime.options import Options

    check_transfer(transfer)
    source, loaded = model_source(model)
    options = options or Options()
    client = current_client()
    if client is not None and transfer == "copy":
        install_model(client, source)
    try:
        import dask.array as da
    except ImportError:
        raise SrcoreError("srcore.dask needs Dask: pip install 'srcore[dask]'") from None
    if _is_frame(data):
        colmap = ColumnMap.build(loaded, inputs, outputs)
        return _predict_frame(data, Work(source, options, colmap))
    if isinstance(data, da.Array):
        names = [s.name for s in ColumnMap.build(loaded, None, None).specs]
        if len(names) != 1:
            raise SrcoreError(f"the model takes {len(names)} inputs ({', '.join(names)}): pass a dict of dask "
                              "arrays keyed by input name")
        data = {names[0]: data}
    if not isinstance(data, Mapping) or not all(isinstance(a, da.Array) for a in data.values()):
        raise SrcoreError(f"data must be a dask array, a dict of dask arrays or a dask DataFrame, not "
                          f"{type(data).__name__}")
    if inputs is not None:
        raise SrcoreError("inputs= maps DataFrame columns; for arrays, key the dict by input name")
    colmap = ColumnMap.build(loaded, {k: k for k in data}, outputs)
    return _predict_arrays(data, Work(source, options, colmap))


def _is_frame(data) -> bool:
    try:
        import dask.dataframe as dd
    except ImportError:
        return False
    return isinstance(data, dd.DataFrame)


# -- arrays --------------------------------------------------------------------------------------------
def _predict_arrays(data: Mapping[str, Any], work: Work):
    import dask.array as da

    colmap = work.colmap
    arrays = [data[b.columns[0]] for b in colmap.inputs]
    colmap.check_schema({b.columns[0]: ColumnInfo(str(a.dtype), tuple(a.shape[1:]))
                         for b, a in zip(colmap.inputs, arrays)}, "dask array")
    rows = {a.shape[0] for a in arrays}
    if len(rows) > 1:
        raise SrcoreInputError(f"the input arrays have different numbers of rows: "
                               f"{', '.join(f'{b.name}: {a.shape[0]}' for b, a in zip(colmap.inputs, arrays))}")
    chunks = _row_chunks(arrays[0].chunks[0], colmap.fixed_batch, arrays[0].shape[0])
    arrays = [a.rechunk({0: chunks, **{i: -1 for i in range(1, a.ndim)}}) for a in arrays]
    layout = _output_layout(work, arrays)
    cols = list(layout)
    n_out = len(cols)
    # apply_gufunc loops over the first (row) dimension, left out of the signature; the others are core dims
    signature = ",".join("(" + ",".join(f"i{k}_{d}" for d in range(a.ndim - 1)) + ")" for k, a in enumerate(arrays))
    out_sig = ",".join("(" + ",".join(f"o{k}_{d}" for d in range(len(layout[c][1]))) + ")"
                       for k, c in enumerate(cols))
    sizes = {f"o{k}_{d}": n for k, c in enumerate(cols) for d, n in enumerate(layout[c][1])}
    result = da.apply_gufunc(_ArrayTask(work, cols), f"{signature}->{out_sig}", *arrays, output_dtypes=[layout[c][0] for c in cols],
                             output_sizes=sizes, vectorize=False, allow_rechunk=False)
    if n_out == 1:
        return result
    return dict(zip(cols, result))


class _ArrayTask:
    """The function of every block: the inputs' blocks in, the outputs' blocks out."""

    def __init__(self, work: Work, columns: list[str]):
        self.work = work
        self.columns = columns
        self.__name__ = "srcore_predict"

    def __call__(self, *blocks: np.ndarray):
        runner = BatchRunner(static_module(self.work.source, self.work.options), self.work.colmap)
        batch = {b.columns[0]: blk for b, blk in zip(self.work.colmap.inputs, blocks)}
        n = blocks[0].shape[0]
        out = runner(batch, Rows("a block of the dask array,", 0, n))
        res = tuple(out[c] for c in self.columns)
        return res[0] if len(res) == 1 else res


def _row_chunks(chunks: tuple[int, ...], k: int | None, n: int) -> tuple[int, ...]:
    """Row chunks as given, or multiples of ``k`` rows when the model fixes the first dim to ``k``."""
    if not k or all(c % k == 0 for c in chunks):
        return chunks
    if n % k:
        raise SrcoreInputError(f"the arrays have {n} rows, but the model takes exactly {k} rows per call "
                               "(its inputs fix the first dimension)")
    step = max(k, (max(chunks) // k) * k)
    return tuple(min(step, n - i) for i in range(0, n, step))


def _output_layout(work: Work, arrays) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """dtype and row shape of each output column: a run of zeros (as many rows as the model takes)
    through the model here, on the driver."""
    runner = BatchRunner(static_module(work.source, work.options), work.colmap)
    k = work.colmap.fixed_batch or 1
    batch = {b.columns[0]: np.zeros((k, *a.shape[1:]), a.dtype) for b, a in zip(work.colmap.inputs, arrays)}
    out = runner(batch, Rows("(zeros: the outputs' shapes)", 0, k))
    return {c: (a.dtype, tuple(a.shape[1:])) for c, a in out.items()}


# -- dataframes ------------------------------------------------------------------------------------------
def _predict_frame(ddf, work: Work):
    import pandas as pd

    colmap = work.colmap
    colmap.check_schema({c: _frame_column_info(t) for c, t in ddf.dtypes.items()}, "dataframe", new_columns=True)
    meta = ddf._meta.copy()
    for c, (dtype, shape) in _frame_layout(work, ddf).items():
        meta[c] = pd.Series(dtype=dtype if not shape else object)
    return ddf.map_partitions(_FrameTask(work), meta=meta)


class _FrameTask:
    def __init__(self, work: Work):
        self.work = work
        self.__name__ = "srcore_predict"

    def __call__(self, df, partition_info=None):
        runner = BatchRunner(static_module(self.work.source, self.work.options), self.work.colmap)
        label = f"partition {partition_info['number']}" if partition_info else "a partition"
        out = runner({c: df[c] for c in self.work.colmap.input_columns}, Rows(label, 0, len(df)))
        return df.assign(**{c: (a if a.ndim == 1 else list(a)) for c, a in out.items()})


def _frame_column_info(dtype) -> ColumnInfo:
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:   # a pandas extension dtype (string, category, ...)
        if "str" in str(dtype):
            return ColumnInfo(f"{dtype} (not numeric: for a column of arrays, turn dask's string conversion "
                              "off with dask.config.set({'dataframe.convert-string': False}))", ())
        return ColumnInfo(f"{dtype} (not numeric)", ())
    if np_dtype.kind in "biuf":
        return ColumnInfo(str(np_dtype), ())
    if np_dtype.kind == "O":   # arrays per row, or strings: known once a partition is read
        return ColumnInfo(None, None)
    return ColumnInfo(f"{np_dtype} (not numeric)", ())


def _frame_layout(work: Work, ddf) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """The outputs' dtypes and row shapes, from a run of zeros shaped like one row (numeric columns
    say it by their dtype; a column of arrays needs the first row, read here)."""
    import pandas as pd

    cols = work.colmap.input_columns
    head = None
    if any(not pd.api.types.is_numeric_dtype(ddf.dtypes[c]) for c in cols):
        head = ddf[cols].head(1, npartitions=-1, compute=True)
        if len(head) == 0:
            raise SrcoreInputError("the dataframe has no rows")
    runner = BatchRunner(static_module(work.source, work.options), work.colmap)
    k = work.colmap.fixed_batch or 1
    batch = {}
    for c in cols:
        first = np.asarray(head[c].iloc[0]) if head is not None else np.zeros((), ddf.dtypes[c])
        batch[c] = np.zeros((k, *first.shape), first.dtype if first.dtype.kind in "biuf" else "float32")
    out = runner(batch, Rows("(zeros: the outputs' shapes)", 0, k))
    return {c: (a.dtype, tuple(a.shape[1:])) for c, a in out.items()}

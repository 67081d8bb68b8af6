"""Parquet and ``.npz`` shards: scanned on the driver, read by row range on a worker, and written.

A shard is one file whose columns all have the same number of rows. In a Parquet file a column of
N-d values is an ``arrow.fixed_shape_tensor`` column (what srcore writes), a fixed-size list (nested
for more dims) or a list column whose rows all have the same length; a column of numbers feeds
rank-1 values. In an ``.npz`` file every array is a column and its first dimension counts the rows.

Reading a row range maps the file where it can: an uncompressed ``.npz`` member is memory-mapped;
a Parquet read decodes the row groups the range touches (the last one decoded is kept, so
consecutive ranges of one row group decode it once per worker).
"""
from __future__ import annotations

import glob
import os
import sys
import threading
import zipfile
from collections import OrderedDict
from typing import Any, Mapping

import attrs
import numpy as np

from ..errors import SrcoreError, SrcoreInputError
from .columns import ColumnInfo, Rows

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".npz": "npz"}


@attrs.frozen
class Shard:
    """One input file, as the driver scanned it."""

    path: str
    format: str                              # "parquet" | "npz"
    columns: dict[str, ColumnInfo] = attrs.field(eq=False)
    rows: int                                # rows of every column (npz: of the columns the job reads)
    row_groups: tuple[int, ...] = ()         # parquet: rows per row group


def shard_format(path: str) -> str | None:
    return FORMATS.get(os.path.splitext(path)[1].lower())


def expand_inputs(items: list[str]) -> list[str]:
    """Files, directories (their ``*.parquet`` / ``*.npz`` files, sorted) and glob patterns, in order."""
    out: list[str] = []
    for item in items:
        if os.path.isdir(item):
            found = sorted(os.path.join(item, f) for f in os.listdir(item) if shard_format(f))
            if not found:
                raise SrcoreInputError(f"{item}: directory holds no .parquet or .npz file")
            out += found
        elif os.path.exists(item):
            if shard_format(item) is None:
                raise SrcoreInputError(f"{item}: not a .parquet or .npz file (the input format comes from the suffix)")
            out.append(item)
        elif glob.has_magic(item):
            found = sorted(f for f in glob.glob(item) if shard_format(f))
            if not found:
                raise SrcoreInputError(f"{item}: no .parquet or .npz file matches")
            out += found
        else:
            raise SrcoreInputError(f"{item}: no such file or directory")
    return out


def scan(path: str, columns: list[str] | None = None) -> Shard:
    """The columns and row count of a shard, from its metadata (no data read)."""
    fmt = shard_format(path)
    if fmt == "parquet":
        return _scan_parquet(path)
    if fmt == "npz":
        return _scan_npz(path, columns)
    raise SrcoreInputError(f"{path}: not a .parquet or .npz file")


# -- Parquet ---------------------------------------------------------------------------------------
def _pq():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SrcoreError("reading or writing Parquet needs pyarrow: pip install 'srcore[parquet]'") from None
    return pq


def _scan_parquet(path: str) -> Shard:
    pq = _pq()
    try:
        meta = pq.ParquetFile(path).metadata
        schema = meta.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a bad file
        raise SrcoreInputError(f"{path}: not a readable Parquet file ({exc})") from None
    cols = {f.name: arrow_column_info(f.type) for f in schema}
    groups = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    return Shard(os.path.abspath(path), "parquet", cols, meta.num_rows, groups)


def arrow_column_info(t) -> ColumnInfo:
    """dtype and row shape of an Arrow column type (``None`` dims where the type does not fix them)."""
    import pyarrow as pa

    if isinstance(t, pa.FixedShapeTensorType):
        return ColumnInfo(_np_name(t.value_type), tuple(t.shape))
    if isinstance(t, pa.ExtensionType):
        shape = getattr(t, "shape", None)   # e.g. Ray's tensor extension types (shape, value_type)
        if shape is not None:
            value_type = getattr(t, "value_type", None)
            return ColumnInfo(_np_name(value_type) or f"{value_type} (not numeric)", tuple(shape))
        return arrow_column_info(t.storage_type)
    dims: list[int | None] = []
    while pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        dims.append(t.list_size if pa.types.is_fixed_size_list(t) else None)
        t = t.value_type
    return ColumnInfo(_np_name(t) or f"{t} (not numeric)", tuple(dims))


def _np_name(t) -> str | None:
    import pyarrow as pa

    if t is None or not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        return None
    return str(np.dtype(t.to_pandas_dtype()))


def arrow_to_numpy(arr, column: str, rows: Rows) -> np.ndarray:
    """An Arrow column as an array of shape (rows, *row shape); nulls and ragged rows are errors."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if isinstance(arr.type, pa.FixedShapeTensorType):
        _no_nulls(arr, column, rows)
        return arr.to_numpy_ndarray()
    if isinstance(arr.type, pa.ExtensionType):
        if hasattr(arr, "to_numpy") and getattr(arr.type, "shape", None) is not None:
            return np.asarray(arr.to_numpy())
        arr = arr.storage
    dims: list[int] = []
    while pa.types.is_fixed_size_list(arr.type) or pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        _no_nulls(arr, column, rows)
        if pa.types.is_fixed_size_list(arr.type):
            dims.append(arr.type.list_size)
        else:
            lengths = pc.unique(pc.list_value_length(arr)).to_pylist()
            if len(lengths) > 1:
                raise SrcoreInputError(f"{rows}: column {column!r}: rows hold lists of different lengths "
                                       f"({', '.join(map(str, sorted(lengths)[:4]))}); a model input needs one shape")
            dims.append(lengths[0] if lengths else 0)
        arr = arr.flatten()
    _no_nulls(arr, column, rows)
    if _np_name(arr.type) is None:
        raise SrcoreInputError(f"{rows}: column {column!r} holds {arr.type} values, not numbers")
    return arr.to_numpy(zero_copy_only=False).reshape((n, *dims))


def _no_nulls(arr, column: str, rows: Rows) -> None:
    if arr.null_count:
        import pyarrow.compute as pc

        first = pc.index(pc.is_null(arr), True).as_py()
        raise SrcoreInputError(f"{rows}: column {column!r} has missing (null) values (the first at a value "
                               f"index {first} of this range)")


def _stamp(path: str) -> tuple:
    """A file's identity for the read caches: a file rewritten under the same name is another file."""
    st = os.stat(path)
    return path, st.st_ino, st.st_size, st.st_mtime_ns


_rg_cache: OrderedDict = OrderedDict()
_rg_lock = threading.Lock()


def _read_parquet(shard_path: str, groups: tuple[int, ...], start: int, stop: int, columns: list[str]):
    import pyarrow as pa

    pq = _pq()
    bounds = np.cumsum((0,) + groups)
    first = int(np.searchsorted(bounds, start, side="right")) - 1
    parts = []
    for g in range(first, len(groups)):
        if bounds[g] >= stop:
            break
        key = (_stamp(shard_path), g, tuple(columns))
        with _rg_lock:
            table = _rg_cache.get(key)
        if table is None:
            table = pq.ParquetFile(shard_path).read_row_group(g, columns=columns)
            with _rg_lock:
                _rg_cache[key] = table
                while len(_rg_cache) > 2:
                    _rg_cache.popitem(last=False)
        lo, hi = max(start, bounds[g]) - bounds[g], min(stop, bounds[g + 1]) - bounds[g]
        parts.append(table.slice(lo, hi - lo))
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


# -- npz -------------------------------------------------------------------------------------------
def _scan_npz(path: str, columns: list[str] | None) -> Shard:
    cols: dict[str, ColumnInfo] = {}
    counts: dict[str, int] = {}
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with z.open(info) as f:
                    dtype, shape = _npy_header(f)
                name = info.filename[:-4]
                cols[name] = ColumnInfo(str(dtype) if dtype.kind in "biuf" else f"{dtype} (not numeric)",
                                        tuple(shape[1:]) if shape else None)
                if shape:
                    counts[name] = shape[0]
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise SrcoreInputError(f"{path}: not a readable .npz file ({exc})") from None
    used = [c for c in (columns or cols) if c in counts]
    sizes = {counts[c] for c in used}
    if len(sizes) > 1:
        detail = ", ".join(f"{c}: {counts[c]}" for c in used)
        raise SrcoreInputError(f"{path}: the arrays have different numbers of rows ({detail})")
    return Shard(os.path.abspath(path), "npz", cols, next(iter(sizes), 0))


def _npy_header(f):
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    return dtype, shape


_npz_cache: OrderedDict = OrderedDict()


def _npz_column(path: str, name: str) -> np.ndarray:
    """An npz member as an array: memory-mapped when stored uncompressed, else loaded (and cached)."""
    key = (_stamp(path), name)
    with _rg_lock:
        a = _npz_cache.get(key)
    if a is not None:
        return a
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name + ".npy")
        if info.compress_type == zipfile.ZIP_STORED:
            a = _map_member(path, info)
        else:
            with z.open(info) as f:
                a = np.lib.format.read_array(f, allow_pickle=False)
    with _rg_lock:
        _npz_cache[key] = a
        while len(_npz_cache) > 8:
            _npz_cache.popitem(last=False)
    return a


def _map_member(path: str, info: zipfile.ZipInfo) -> np.ndarray:
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
        start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
        f.seek(start)
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
        offset = f.tell()
    if dtype.hasobject:
        raise SrcoreInputError(f"{path}: array {info.filename[:-4]!r} holds Python objects (never unpickled)")
    if not shape or 0 in shape:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


# -- reading a row range on a worker -----------------------------------------------------------------
def read_rows(path: str, fmt: str, start: int, stop: int, columns: list[str],
              row_groups: tuple[int, ...] = ()) -> dict[str, np.ndarray]:
    """``{column: array}`` of rows ``start:stop`` of a shard."""
    rows = Rows(path, start, stop)
    if not os.path.exists(path):
        import socket

        raise SrcoreInputError(f"{rows}: input file not found on worker {socket.gethostname()} (inputs must be "
                               "readable at the same path on every worker: a shared filesystem)")
    try:
        if fmt == "parquet":
            table = _read_parquet(path, row_groups, start, stop, columns)
            return {c: arrow_to_numpy(table.column(c), c, rows) for c in columns}
        return {c: _npz_column(path, c)[start:stop] for c in columns}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise SrcoreInputError(f"{rows}: cannot read: {exc}") from None


# -- writing ------------------------------------------------------------------------------------------
class ShardWriter:
    """Writes output columns batch by batch to one Parquet or ``.npz`` file (``-``: standard output).

    The file appears under its name only once complete (written to a temporary name, then renamed);
    ``abort()`` removes the partial file.
    """

    def __init__(self, path: str, fmt: str):
        self.path, self.fmt = path, fmt
        self._to_stdout = path == "-"
        self._tmp = None if self._to_stdout else f"{path}.part{os.getpid()}"
        self._pq_writer = None
        self._parts: list[dict[str, np.ndarray]] = []
        self.rows = 0

    def write(self, cols: Mapping[str, np.ndarray]) -> None:
        n = len(next(iter(cols.values())))
        self.rows += n
        if self.fmt == "npz":
            self._parts.append(dict(cols))
            return
        import pyarrow as pa

        pq = _pq()
        table = pa.table({c: _to_arrow(a) for c, a in cols.items()})
        if self._pq_writer is None:
            sink = sys.stdout.buffer if self._to_stdout else self._tmp
            self._pq_writer = pq.ParquetWriter(sink, table.schema)
        self._pq_writer.write_table(table, row_group_size=max(n, 1))

    def close(self, columns: Mapping[str, tuple[str, tuple[int, ...]]] | None = None) -> None:
        """Finish the file; ``columns`` (name -> dtype, row shape) shapes an empty output."""
        if self.fmt == "npz":
            if self._parts:
                arrays = {c: np.concatenate([p[c] for p in self._parts]) for c in self._parts[0]}
            else:
                arrays = {c: np.zeros((0, *shape), dtype) for c, (dtype, shape) in (columns or {}).items()}
            if self._to_stdout:
                np.savez(sys.stdout.buffer, **arrays)
            else:
                with open(self._tmp, "wb") as f:
                    np.savez(f, **arrays)
        else:
            if self._pq_writer is None:
                self.write({c: np.zeros((0, *shape), dtype) for c, (dtype, shape) in (columns or {}).items()})
            self._pq_writer.close()
        if self._tmp is not None:
            os.replace(self._tmp, self.path)

    def abort(self) -> None:
        if self._pq_writer is not None:
            try:
                self._pq_writer.close()
            except Exception:  # closing a half-written file: only its removal matters
                pass
        if self._tmp is not None and os.path.exists(self._tmp):
            os.unlink(self._tmp)


def _to_arrow(a: np.ndarray):
    import pyarrow as pa

    if a.ndim <= 1:
        return pa.array(a)
    return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(a))


def read_table(path: str) -> dict[str, np.ndarray]:
    """A whole Parquet or ``.npz`` file as ``{column: array}`` (for tests and small outputs)."""
    shard = scan(path)
    return read_rows(shard.path, shard.format, 0, shard.rows, list(shard.columns), shard.row_groups)

"""Read and write the safetensors container, without the ``safetensors`` package.

Layout: 8-byte little-endian header length N, N bytes of JSON header
(``{"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [b, e]}}``,
padded with spaces so the data starts 8-byte aligned), then the data section.
Offsets are relative to the data section; tensors are contiguous, in offset
order, without holes, and cover the whole section (the rules the reference
implementation enforces). Reading maps the file and returns read-only numpy
views on the map: no copy, no pickle, no code from the file.
"""
from __future__ import annotations

import functools
import math
import mmap
import os
import threading
from typing import Any, Mapping

import numpy as np

from .._fastjson import canonical, loads
from ..errors import SrcoreFormatError

#: safetensors dtype names <-> numpy dtypes; the ML_DTYPE_NAMES ones are ml_dtypes' (:func:`st_dtype`,
#: :func:`np_dtype`), imported only for a file or an array that has one (srcore-cpu depends on
#: ml_dtypes; the core does not, and importing it costs a cold start ~10 ms)
ST_TO_NP = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
    "U16": np.dtype(np.uint16), "I16": np.dtype(np.int16), "F16": np.dtype(np.float16),
    "U32": np.dtype(np.uint32), "I32": np.dtype(np.int32), "F32": np.dtype(np.float32),
    "U64": np.dtype(np.uint64), "I64": np.dtype(np.int64), "F64": np.dtype(np.float64),
    # complex (safetensors' C64; C128 srcore's): a frozen model folds torch.polar(...) of constants to one
    "C64": np.dtype(np.complex64), "C128": np.dtype(np.complex128),
}
#: ml_dtypes' types: F8_E4M3 and F8_E5M2 are safetensors' names (e4m3fn, e5m2); the fnuz variants and
#: the 4-bit integers are srcore's, one byte per element as ml_dtypes holds them (I4 sign-extended)
ML_DTYPE_NAMES = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
                  "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz", "I4": "int4", "U4": "uint4"}
NP_TO_ST = {v: k for k, v in ST_TO_NP.items()}


@functools.cache
def _ml_dtypes() -> dict[str, np.dtype]:
    """ml_dtypes' dtypes by safetensors name, imported on first need (most models have none)."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes comes with srcore-cpu
        return {}
    return {k: np.dtype(getattr(ml_dtypes, v)) for k, v in ML_DTYPE_NAMES.items()}


def np_dtype(name: str) -> np.dtype | None:
    """The numpy dtype of a safetensors dtype name (None if unknown)."""
    dt = ST_TO_NP.get(name)
    if dt is None and name in ML_DTYPE_NAMES:
        dt = _ml_dtypes().get(name)
    return dt


def st_dtype(dt: np.dtype) -> str | None:
    """The safetensors dtype name of a (native byte order) numpy dtype (None if it has none)."""
    name = NP_TO_ST.get(dt)
    if name is None and dt.name in _ML_NAMES_BY_NUMPY_NAME:
        candidate = _ML_NAMES_BY_NUMPY_NAME[dt.name]
        if _ml_dtypes().get(candidate) == dt:
            return candidate
    return name


_ML_NAMES_BY_NUMPY_NAME = {v: k for k, v in ML_DTYPE_NAMES.items()}
MAX_HEADER = 100 * 1024 * 1024  # the reference implementation's limit


def canonical_json(obj: Any) -> str:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)`` (without importing json)."""
    return canonical(obj)


def tensor_layout(arrays: Mapping[str, np.ndarray]) -> tuple[dict[str, dict], list[str]]:
    """Header entries and the order in which to write the arrays.

    Larger item sizes go first, so every tensor starts at a multiple of its item
    size (the data section itself starts 8-byte aligned) and numpy views are aligned.
    """
    order = sorted(arrays, key=lambda k: (-arrays[k].dtype.itemsize, k))
    entries: dict[str, dict] = {}
    pos = 0
    for name in order:
        a = arrays[name]
        dt = a.dtype if a.dtype.isnative else a.dtype.newbyteorder("=")
        st = st_dtype(dt)
        if st is None:
            raise TypeError(f"parameter {name!r}: dtype {a.dtype} cannot be stored in a .srm file")
        entries[name] = {"dtype": st, "shape": [int(d) for d in a.shape],
                         "data_offsets": [pos, pos + int(a.nbytes)]}
        pos += int(a.nbytes)
    return entries, order


def encode_header(header: Mapping[str, Any]) -> bytes:
    raw = canonical_json(header).encode("utf-8")
    pad = (-(8 + len(raw))) % 8
    return raw + b" " * pad


def raw_bytes(a: np.ndarray) -> memoryview | bytes:
    """The little-endian C-order bytes of ``a``, without a copy when it already is so."""
    if a.dtype.itemsize > 1 and a.dtype.byteorder not in ("<", "|") and not (
            a.dtype.byteorder == "=" and np.little_endian):
        a = a.astype(a.dtype.newbyteorder("<"))
    a = np.ascontiguousarray(a)
    return memoryview(a.reshape(-1).view(np.uint8)) if a.size else b""  # uint8 view: bfloat16 has no buffer code


def write_file(path: str | os.PathLike, header_bytes: bytes, arrays: Mapping[str, np.ndarray],
               order: list[str]) -> None:
    """Write the container atomically (a temporary file renamed over ``path``)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}-{threading.get_ident()}"   # a process's threads may write one path too
    try:
        with open(tmp, "wb") as f:
            f.write(len(header_bytes).to_bytes(8, "little"))
            f.write(header_bytes)
            for name in order:
                f.write(raw_bytes(arrays[name]))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class Container:
    """An opened, structurally checked safetensors file, mapped read-only."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < 8:
                    self.fail(f"file is {size} bytes, too short to hold a header length")
                self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise SrcoreFormatError(f"{self.path}: cannot read: {exc}") from exc
        n = int.from_bytes(self.map[:8], "little")
        if n > MAX_HEADER:
            self.fail(f"header length {n} exceeds the limit of {MAX_HEADER} bytes (not a .srm file)")
        if 8 + n > size:
            self.fail(f"header length {n} exceeds the file size {size} (truncated or not a .srm file)")
        self.header_bytes = bytes(self.map[8:8 + n])
        self.data_start = 8 + n
        self.data_len = size - self.data_start
        try:
            header = loads(self.header_bytes.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            self.fail(f"header is not valid JSON: {exc}")
        if not isinstance(header, dict):
            self.fail("header is not a JSON object")
        self.header: dict[str, Any] = header
        self.entries = self._check_entries()

    def fail(self, msg: str):
        raise SrcoreFormatError(f"{self.path}: {msg}")

    def _check_entries(self) -> dict[str, tuple[np.dtype, tuple[int, ...], int, int]]:
        entries = {}
        spans = []
        for name, e in self.header.items():
            if name == "__metadata__":
                continue
            if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
                self.fail(f"tensor {name!r}: bad header entry {e!r}")
            dt = np_dtype(e["dtype"]) if isinstance(e["dtype"], str) else None
            if dt is None:
                self.fail(f"tensor {name!r}: unknown dtype {e['dtype']!r}")
            shape, offs = e["shape"], e["data_offsets"]
            if (not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape)
                    or not isinstance(offs, list) or len(offs) != 2
                    or not all(type(o) is int and o >= 0 for o in offs)):
                self.fail(f"tensor {name!r}: bad shape {shape!r} or data_offsets {offs!r}")
            b, end = offs
            if end < b or end > self.data_len:
                self.fail(f"tensor {name!r}: data_offsets [{b}, {end}] out of bounds "
                          f"(data section is {self.data_len} bytes)")
            if (end - b) != math.prod(shape) * dt.itemsize:
                self.fail(f"tensor {name!r}: {end - b} bytes do not hold {dt} of shape {shape}")
            entries[name] = (dt, tuple(shape), b, end)
            spans.append((b, end, name))
        spans.sort()
        pos = 0
        for b, end, name in spans:
            if b != pos:
                what = "overlaps the previous tensor" if b < pos else f"leaves a hole at byte {pos}"
                self.fail(f"tensor {name!r}: data_offsets [{b}, {end}] {what}")
            pos = end
        if pos != self.data_len:
            self.fail(f"data section is {self.data_len} bytes but the tensors cover {pos} "
                      "(truncated or trailing data)")
        return entries

    @property
    def metadata(self) -> dict[str, Any]:
        md = self.header.get("__metadata__")
        if not isinstance(md, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in md.items()):
            self.fail("header has no __metadata__ mapping str to str")
        return md

    def data_view(self) -> memoryview:
        return memoryview(self.map)[self.data_start:]

    def array(self, name: str) -> np.ndarray:
        """A read-only numpy view of tensor ``name`` on the mapped file (zero copy)."""
        dt, shape, b, end = self.entries[name]
        count = (end - b) // dt.itemsize
        a = np.frombuffer(self.map, dtype=dt.newbyteorder("<") if dt.itemsize > 1 else dt,
                          count=count, offset=self.data_start + b)
        return a.reshape(shape)


def drop_resident_pages(arrays) -> None:
    """Drop this process's resident pages of ``arrays`` that are read-only views of a mapped file
    (others are left alone): they stay in the page cache and fault back in if read again, but no
    longer count in the resident set. For weights read once (hashed, laid out elsewhere)."""
    page = mmap.PAGESIZE
    for a in arrays:
        if not isinstance(a, np.ndarray) or a.nbytes < page:
            continue
        base = a
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        if isinstance(base, memoryview):
            base = base.obj
        if not isinstance(base, mmap.mmap):
            continue
        start = np.frombuffer(base, np.uint8).ctypes.data
        lo = (a.ctypes.data - start) // page * page
        hi = min(-(-(a.ctypes.data - start + a.nbytes) // page) * page, len(base))
        try:
            base.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (OSError, ValueError, AttributeError):   # not Linux, or a mapping that refuses: keep them
            pass

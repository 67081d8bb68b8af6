"""A batch job: input shards in, output shards out, in the input's row order.

:meth:`BatchJob.plan` (on the driver) scans the input files, checks their columns against the
model's input specs (a mismatch fails here, naming the file, before any worker starts) and cuts
every shard into units of at most ``batch_size`` rows. An engine runs units on workers
(:class:`LocalEngine` here; ``srcore.ray.jobs.RayEngine``, ``srcore.dask.jobs.DaskEngine``): a
worker reads its rows from the file (inputs must be readable at the same path on every worker),
runs them through its ``StaticModule`` and returns the output columns. :func:`run_job` keeps a
window of units in flight and writes the results in unit order, so the output has the input's
rows, each once, in order, whatever finished first or was retried.
"""
from __future__ import annotations

import collections
import os
import time
from typing import Any, Callable, Mapping, Protocol

import attrs
import numpy as np

from ..errors import ClusterError, SrcoreError, SrcoreInputError
from .columns import ColumnMap, Rows
from .runner import BatchRunner
from .shards import Shard, ShardWriter, expand_inputs, read_rows, scan, shard_format
from .source import ModelSource, model_source, static_module

OUTPUT_FORMATS = ("parquet", "npz")
_EXT = {"parquet": ".parquet", "npz": ".npz"}


@attrs.frozen
class Unit:
    """Rows ``start:stop`` of shard number ``shard``: what one worker call reads and runs."""

    shard: int
    path: str
    format: str
    start: int
    stop: int
    row_groups: tuple[int, ...] = ()

    @property
    def rows(self) -> Rows:
        return Rows(self.path, self.start, self.stop)


@attrs.frozen
class Work:
    """What every worker of a job gets once: the model's source, the options, the columns."""

    source: ModelSource
    options: Any
    colmap: ColumnMap


def run_unit(runner: BatchRunner, colmap: ColumnMap, unit: Unit) -> dict[str, np.ndarray]:
    """On a worker: read the unit's rows and run them (raises SrcoreError naming file and rows)."""
    batch = read_rows(unit.path, unit.format, unit.start, unit.stop, colmap.input_columns, unit.row_groups)
    return runner(batch, unit.rows)


class UnitWorker:
    """A worker's state for a job: its ``StaticModule`` (loaded once per process) and runner."""

    def __init__(self, work: Work, payload: Any = None):
        self.work = work
        self.runner = BatchRunner(static_module(work.source, work.options, payload), work.colmap)

    def __call__(self, unit: Unit) -> dict[str, np.ndarray]:
        return run_unit(self.runner, self.work.colmap, unit)


class Engine(Protocol):
    """Runs units somewhere. ``start`` may raise ClusterError or the workers' SrcoreError."""

    name: str
    workers: int

    def start(self, work: Work) -> None: ...

    def submit(self, unit: Unit) -> Any: ...

    def result(self, handle: Any, timeout: float) -> dict[str, np.ndarray]: ...

    def close(self) -> None: ...


class LocalEngine:
    """``--on local``: a ``RuntimePool`` of ``workers`` runtimes fed by as many threads, in this process."""

    name = "local"

    def __init__(self, workers: int | None = None, model=None):
        self.workers = workers or 1
        self._model = model
        self._executor = None

    def start(self, work: Work) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from ..runtime.pool import RuntimePool
        from ..runtime.static_module import StaticModule

        sm = StaticModule(self._model, options=work.options) if self._model is not None else \
            static_module(work.source, work.options)
        self._runner = BatchRunner(RuntimePool(sm, size=self.workers), work.colmap)
        self._colmap = work.colmap
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="srcore-batch")

    def submit(self, unit: Unit):
        return self._executor.submit(run_unit, self._runner, self._colmap, unit)

    def result(self, handle, timeout: float):
        from concurrent.futures import TimeoutError as FutureTimeout

        try:
            return handle.result(timeout)
        except FutureTimeout:
            raise TimeoutError from None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


@attrs.define
class BatchJob:
    """A planned job: the model, the checked columns, the input shards, the units, the outputs."""

    source: ModelSource
    model: Any
    colmap: ColumnMap
    options: Any
    shards: list[Shard]
    units: list[Unit]
    output: str
    output_format: str
    per_shard_outputs: bool

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @classmethod
    def plan(cls, model, inputs: list[str], output: str, *, input_columns: Mapping[str, Any] | None = None,
             output_columns: Mapping[str, Any] | None = None, batch_size: int = 256, options=None,
             output_format: str | None = None) -> "BatchJob":
        """Check everything the driver can check; raises SrcoreError naming the file and column."""
        from ..runtime.options import Options

        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise SrcoreError(f"batch size must be a whole number >= 1, got {batch_size!r}")
        source, model = model_source(model)
        colmap = ColumnMap.build(model, input_columns, output_columns)
        paths = expand_inputs(list(inputs))
        shards = [scan(p, colmap.input_columns) for p in paths]
        for sh in shards:
            colmap.check_schema(sh.columns, sh.path)
        per_shard = output != "-" and (os.path.isdir(output) or output.endswith(("/", os.sep)))
        fmt = _output_format(output, output_format, per_shard, shards)
        units = _units(shards, batch_size, colmap.fixed_batch)
        return cls(source, model, colmap, options or Options(), shards, units, output, fmt or "", per_shard)

    def work(self) -> Work:
        return Work(self.source, self.options, self.colmap)

    def output_path(self, shard: int) -> str:
        if not self.per_shard_outputs:
            return self.output
        sh = self.shards[shard]
        fmt = self.output_format or sh.format
        return os.path.join(self.output, os.path.splitext(os.path.basename(sh.path))[0] + _EXT[fmt])


def _output_format(output: str, output_format: str | None, per_shard: bool, shards: list[Shard]) -> str | None:
    """The output's format (None: per input file, each in its input's), after checking the output path."""
    if output_format is not None and output_format not in OUTPUT_FORMATS:
        raise SrcoreError(f"output format {output_format!r}: choose one of {', '.join(OUTPUT_FORMATS)}")
    if per_shard:
        stems = [os.path.splitext(os.path.basename(s.path))[0] for s in shards]
        dup = sorted({x for x in stems if stems.count(x) > 1})
        if dup:
            raise SrcoreError(f"{output}: two inputs would write the same output file {dup[0]!r}; give one "
                              "output file instead of a directory")
        return output_format
    if output == "-":
        return output_format or "parquet"
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise SrcoreError(f"{output}: the directory {parent} does not exist")
    fmt = output_format or shard_format(output)
    if fmt is None:
        raise SrcoreError(f"{output}: say the output format with a .parquet or .npz suffix (or give a "
                          "directory, ending in '/', for one output file per input file)")
    return fmt


def _units(shards: list[Shard], batch_size: int, fixed: int | None) -> list[Unit]:
    """Every shard cut into units of ``batch_size`` rows (a multiple of the model's fixed row count)."""
    step = batch_size
    if fixed:
        step = max(fixed, batch_size - batch_size % fixed)
        bad = next((s for s in shards if s.rows % fixed), None)
        if bad is not None:
            raise SrcoreInputError(f"{bad.path}: {bad.rows} rows, but the model takes exactly {fixed} rows per "
                                   "call (its inputs fix the first dimension)")
    return [Unit(i, sh.path, sh.format, a, min(a + step, sh.rows), sh.row_groups)
            for i, sh in enumerate(shards) for a in range(0, sh.rows, step)]


@attrs.frozen
class JobReport:
    """What a finished job did: rows, units, files written, seconds (of which starting the engine)."""

    rows: int
    units: int
    outputs: tuple[str, ...]
    seconds: float
    engine: str
    workers: int
    start_seconds: float = 0.0   # of ``seconds``: connecting, starting the workers, loading the model there


def run_job(job: BatchJob, engine: Engine, *, on_rows: Callable[[int], None] | None = None,
            timeout: float | None = None, window: int | None = None) -> JobReport:
    """Run ``job`` on ``engine`` and write its outputs; ``timeout``: seconds a unit may take once it is
    the oldest in flight (``None``: no limit)."""
    t0 = time.perf_counter()
    if job.per_shard_outputs:
        os.makedirs(job.output, exist_ok=True)
    writers: dict[int, ShardWriter] = {}
    outputs: list[str] = []
    layout: dict[str, tuple[str, tuple[int, ...]]] | None = None
    try:
        engine.start(job.work())
        started = time.perf_counter() - t0
        # a few units per worker in flight hide the round trip to a worker (milliseconds on a cluster)
        window = window or max(4, 4 * engine.workers)
        todo = collections.deque(job.units)
        flight: collections.deque = collections.deque()
        while todo or flight:
            while todo and len(flight) < window:
                u = todo.popleft()
                flight.append((u, engine.submit(u)))
            unit, handle = flight.popleft()
            cols = _wait(engine, handle, unit, timeout)
            if layout is None:
                layout = {c: (str(a.dtype), tuple(a.shape[1:])) for c, a in cols.items()}
            key = unit.shard if job.per_shard_outputs else 0
            if key not in writers:
                for k in [k for k in writers if k != key]:   # the previous shard is complete
                    writers.pop(k).close(layout)
                writers[key] = ShardWriter(job.output_path(unit.shard), job.output_format or unit.format)
                outputs.append(writers[key].path)
            writers[key].write(cols)
            if on_rows is not None:
                on_rows(unit.stop - unit.start)
        layout = layout or _empty_layout(job)
        if job.per_shard_outputs:
            for i in range(len(job.shards)):
                path = job.output_path(i)
                if path not in outputs:   # a shard without rows still gets its (empty) output file
                    writers[i] = ShardWriter(path, job.output_format or job.shards[i].format)
                    outputs.append(path)
        elif 0 not in writers:
            writers[0] = ShardWriter(job.output, job.output_format)
            outputs.append(job.output)
        for w in writers.values():
            w.close(layout)
        writers.clear()
    finally:
        for w in writers.values():
            w.abort()
        engine.close()
    return JobReport(job.rows, len(job.units), tuple(outputs), time.perf_counter() - t0, engine.name,
                     engine.workers, started)


ENGINES = ("local", "ray", "dask")


def make_engine(on: str = "local", *, address: str | None = None, workers: int | None = None,
                transfer: str = "copy", model=None) -> Engine:
    """The engine that runs units ``on`` this process, Ray or Dask (a cluster at ``address``, else a
    local one started for the job). ``model``: the loaded model, for the local engine."""
    if on not in ENGINES:
        raise SrcoreError(f"on={on!r}: choose one of {', '.join(ENGINES)}")
    if on == "local":
        if address:
            raise SrcoreError("an address names a Ray or Dask cluster: use it with on='ray' or on='dask'")
        return LocalEngine(workers, model=model)
    if on == "ray":
        from ..ray.jobs import RayEngine

        return RayEngine(address, workers, transfer=transfer)
    from ..dask.jobs import DaskEngine

    return DaskEngine(address, workers, transfer=transfer)


def run_batch(model, inputs: list[str], output: str, *, on: str = "local", address: str | None = None,
              workers: int | None = None, batch_size: int = 256, input_columns: Mapping[str, Any] | None = None,
              output_columns: Mapping[str, Any] | None = None, output_format: str | None = None, options=None,
              transfer: str = "copy", timeout: float | None = None,
              on_rows: Callable[[int], None] | None = None) -> JobReport:
    """``srcore batch`` from Python: plan the job (every check the driver can make), run it, write the
    output; returns a :class:`JobReport`. Arguments as the command's flags (docs/scale-out.md)."""
    job = BatchJob.plan(model, inputs, output, input_columns=input_columns, output_columns=output_columns,
                        batch_size=batch_size, options=options, output_format=output_format)
    engine = make_engine(on, address=address, workers=workers, transfer=transfer, model=job.model)
    return run_job(job, engine, on_rows=on_rows, timeout=timeout)


def _wait(engine: Engine, handle, unit: Unit, timeout: float | None):
    """The unit's result; polls so Ctrl-C works, and gives up after ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
        try:
            return engine.result(handle, step)
        except TimeoutError:
            if deadline is not None and time.monotonic() >= deadline:
                raise ClusterError(f"{unit.rows}: no result from the {engine.name} workers within {timeout:g} s "
                                   "(are the workers alive? is the batch too large for the timeout?)") from None


def _empty_layout(job: BatchJob) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Output columns' dtypes and row shapes when no row was run (empty inputs): a zero-row run here."""
    from ..runtime.static_module import StaticModule

    runner = BatchRunner(StaticModule(job.model, options=job.options), job.colmap)
    batch = {}
    for b, s in zip(job.colmap.inputs, job.colmap.specs):
        info = job.shards[0].columns[b.columns[0]] if job.shards else None
        row = tuple(d if isinstance(d, int) else 1 for d in (s.shape or (None, 1))[1:])
        if b.spread:
            for c in b.columns:
                batch[c] = np.zeros((0,), s.dtype or "float32")
        else:
            batch[b.columns[0]] = np.zeros((0, *row), s.dtype or (info.dtype if info else "float32"))
    cols = runner(batch, Rows("(no rows)", 0, 0))
    return {c: (str(a.dtype), tuple(a.shape[1:])) for c, a in cols.items()}

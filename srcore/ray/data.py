"""Batch inference on Ray Data: :class:`Predictor` for ``Dataset.map_batches`` and :func:`predict`."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..scaleout.columns import ColumnInfo, ColumnMap, Rows
from ..scaleout.runner import BatchRunner
from ..scaleout.source import static_module
from .cluster import ModelRef, model_ref_and_model, require_ray


class Predictor:
    """A callable class for ``Dataset.map_batches(..., batch_format="numpy")``: one ``StaticModule``
    per actor, loaded in the constructor; each batch gets the outputs as new columns after its own.

    ``model`` is a :class:`~srcore.ray.cluster.ModelRef` (``srcore.ray.model_ref(path)``: the file
    reaches each node once) or a ``.srm`` path every worker can read. ``inputs``/``outputs`` map the
    model's inputs and outputs to columns (see ``srcore.scaleout.columns``); ``options`` is a
    ``srcore.Options`` (backends, executor, planner). A batch whose columns do not fit the input specs
    raises ``srcore.SrcoreInputError`` naming the column and the rows (``path`` column, when the
    dataset was read with ``include_paths=True``).
    """

    def __init__(self, model: Any, *, inputs: Mapping[str, Any] | None = None,
                 outputs: Mapping[str, Any] | None = None, options=None):
        from ..runtime.options import Options
        from ..scaleout.source import ModelSource

        if isinstance(model, ModelRef):
            sm = static_module(model.source, options or Options(), model.fetcher())
        else:
            sm = static_module(ModelSource.of_file(model), options or Options())
        self.colmap = ColumnMap.build(sm.model, inputs, outputs)
        self.runner = BatchRunner(sm, self.colmap)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = len(next(iter(batch.values()))) if batch else 0
        out = self.runner(batch, Rows(_label(batch), 0, n))
        return {**batch, **out}


def _label(batch: Mapping[str, Any]) -> str:
    paths = batch.get("path")
    if isinstance(paths, np.ndarray) and paths.dtype.kind in "OUS" and len(paths):
        names = list(dict.fromkeys(str(p) for p in paths))
        return names[0] if len(names) == 1 else f"{names[0]} (and {len(names) - 1} more files)"
    return "a batch of the dataset,"


def predict(dataset, model: Any, *, inputs: Mapping[str, Any] | None = None,
            outputs: Mapping[str, Any] | None = None, batch_size: int | None = 256,
            concurrency: int | tuple[int, int] = 1, options=None, transfer: str = "copy",
            num_cpus: float = 1, **map_batches_args) -> Any:
    """``dataset`` with the model's outputs added as columns after the existing ones (lazy, like any
    ``map_batches``).

    ``model``: a ``.srm`` path or a loaded ``srcore.Model``. ``inputs`` maps model input names to
    columns (default: columns named as the inputs); ``outputs`` maps output names to new columns
    (default: every output, named as the outputs). ``concurrency``: actors (one ``StaticModule``
    each), or ``(min, max)`` to autoscale; ``num_cpus`` per actor. ``options``: a ``srcore.Options``.
    ``transfer``: ``"copy"`` sends the file once per node through the object store; ``"path"``
    makes every worker read it at this path (a shared filesystem). Other keyword arguments go to
    ``map_batches``.

    Checked here, before anything runs: the model file, the column mapping against the model, and
    the dataset's schema against the input specs (``srcore.SrcoreError`` naming the column).
    """
    ray = require_ray()
    from ..runtime.options import Options

    ref, loaded = model_ref_and_model(model, transfer)
    colmap = ColumnMap.build(loaded, inputs, outputs)
    columns = dataset_columns(dataset)
    if columns is not None:
        colmap.check_schema(columns, "dataset", new_columns=True)
    size = concurrency if isinstance(concurrency, tuple) else (concurrency, concurrency)
    compute = ray.data.ActorPoolStrategy(min_size=size[0], max_size=size[1])
    return dataset.map_batches(
        Predictor, fn_constructor_kwargs={"model": ref, "inputs": inputs, "outputs": outputs,
                                          "options": options or Options()},
        batch_format="numpy", batch_size=batch_size, compute=compute, num_cpus=num_cpus,
        zero_copy_batch=True, **map_batches_args)


def dataset_columns(dataset) -> dict[str, ColumnInfo] | None:
    """The dataset's columns with dtype and row shape, from its schema (None when Ray cannot say)."""
    from ..scaleout.shards import arrow_column_info

    schema = dataset.schema()
    if schema is None:
        return None
    out = {}
    for name, t in zip(schema.names, schema.types):
        try:
            out[name] = arrow_column_info(t)
        except (TypeError, AttributeError):  # a non-Arrow (pandas object) type: checked per batch
            out[name] = ColumnInfo(None, None)
    return out


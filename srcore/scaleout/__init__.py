"""What the distributed runners (:mod:`srcore.ray`, :mod:`srcore.dask`, ``srcore batch``) share.

None of these modules imports Ray or Dask; each has one job:

``source``   how the model file reaches a worker (the driver's path, or a copy sent once per node
             and cached there) and the per-process cache of loaded ``StaticModule`` objects
``columns``  the mapping between model inputs/outputs and table columns, checked against the input
             specs; turning a batch of columns into model inputs and the outputs back into columns
``runner``   one batch through the model on a worker (fixed batch dims, errors naming the rows)
``shards``   Parquet and ``.npz`` shards: scanning on the driver, reading row ranges on a worker,
             writing the outputs
``job``      a batch job (files in, files out) as units of work, run in order on an engine;
             the ``local`` engine (a ``RuntimePool`` in this process)
``address``  a cluster address checked before a client connects (an unreachable one fails fast)
"""

from .job import BatchJob, JobReport, make_engine, run_batch, run_job  # noqa: E402  (the batch-job API)

__all__ = ["BatchJob", "JobReport", "make_engine", "run_batch", "run_job"]

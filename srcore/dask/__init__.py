"""srcore on Dask: batch inference on dask arrays and dataframes (extra ``srcore[dask]``).

::

    import dask.array as da, srcore.dask
    x = da.from_zarr("images.zarr")                      # (rows, 3, 224, 224), chunked along rows
    logits = srcore.dask.predict(x, "resnet.srm")          # a dask array (one-output model)
    df = srcore.dask.predict(ddf, "mlp.srm", inputs={"x": [f"f{i}" for i in range(64)]},
                             outputs={"output": "score"})  # the partitions get a "score" column

The model is loaded once per worker process and reused by every task there; with a distributed
``Client`` the model file reaches each worker once (a worker plugin). See docs/scale-out.md.

Dask is imported when a function here is first called, not by ``import srcore.dask``.
"""
from __future__ import annotations

from .._lazy import lazy_getattr

_LAZY = {
    "predict": "srcore.dask.infer:predict",
    "connect": "srcore.dask.cluster:connect",
    "install_model": "srcore.dask.cluster:install_model",
    "DaskEngine": "srcore.dask.jobs:DaskEngine",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr("srcore.dask", _LAZY, globals())


def __dir__():
    return __all__

"""srcore on Ray: batch inference on Ray Data, online serving on Ray Serve (extra ``srcore[ray]``).

::

    import ray, srcore.ray
    ds = ray.data.read_parquet("images/")
    ds = srcore.ray.predict(ds, "resnet.srm", inputs={"x": "image"}, outputs={"output": "logits"},
                            batch_size=64, concurrency=4)
    url = srcore.ray.serve("resnet.srm", max_batch_size=16, port=8000)

``predict`` adds the model's outputs as new columns after the existing ones, with one
``StaticModule`` per actor (:class:`Predictor`, the callable class it gives ``map_batches``).
The model file reaches each node once (:func:`model_ref`). See docs/scale-out.md.

Ray is imported when a function here is first called, not by ``import srcore.ray``.
"""
from __future__ import annotations

from .._lazy import lazy_getattr

_LAZY = {
    "predict": "srcore.ray.data:predict",
    "Predictor": "srcore.ray.data:Predictor",
    "model_ref": "srcore.ray.cluster:model_ref",
    "ModelRef": "srcore.ray.cluster:ModelRef",
    "connect": "srcore.ray.cluster:connect",
    "serve": "srcore.ray.serving:serve",
    "RayEngine": "srcore.ray.jobs:RayEngine",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr("srcore.ray", _LAZY, globals())


def __dir__():
    return __all__

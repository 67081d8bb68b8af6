"""Connecting to Ray, sending the model once, and turning Ray's errors back into srcore's."""
from __future__ import annotations

from typing import Any

import attrs

from ..errors import ClusterError, SrcoreError
from ..scaleout.address import check_grpc
from ..scaleout.source import ModelSource, check_transfer, model_source, payload_of

#: the ports Ray listens on by default: the head's GCS, and the Ray Client server (ray://)
GCS_PORT, CLIENT_PORT = 6379, 10001


def require_ray():
    try:
        import ray
    except ImportError:
        raise SrcoreError("srcore.ray needs Ray: pip install 'srcore[ray]'") from None
    return ray


def connect(address: str | None = None, *, num_cpus: int | None = None) -> bool:
    """Connect this process to Ray (once): to the cluster at ``address``, or a new local one with
    ``num_cpus`` CPUs when ``address`` is None. An address where no Ray head answers raises
    ClusterError within seconds (checked even when this process is already connected: it then keeps
    its cluster). Returns whether this call made the connection (the caller then owns
    ``ray.shutdown()``).

    With no address, Ray's own rules apply (``RAY_ADDRESS``, else a new local cluster)."""
    ray = require_ray()
    if address and address not in ("auto", "local"):
        check_grpc(address, "Ray", CLIENT_PORT if address.startswith("ray://") else GCS_PORT)
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if not address:
        kwargs["num_cpus"] = num_cpus
    try:
        ray.init(address=address or None, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address or '(a new local cluster)'}: {exc}") from None
    return True


@attrs.frozen
class ModelRef:
    """A model as every Ray worker can get it: the driver's file (``source``) and, with
    ``transfer="copy"``, its bytes in the object store (sent to a node once, when a worker there
    does not see the same file at the driver's path)."""

    source: ModelSource
    payload: tuple = ()     # (ObjectRef,) or (): inside a tuple, Ray does not fetch it eagerly

    def fetcher(self):
        """On a worker: a function returning the file's bytes from the object store (None with
        ``transfer="path"``), for :func:`srcore.scaleout.source.static_module`."""
        if not self.payload:
            return None

        def fetch():
            import ray

            return ray.get(self.payload[0])
        return fetch


def model_ref(model: Any, transfer: str = "copy") -> ModelRef:
    """A :class:`ModelRef` of a ``.srm`` path or a loaded ``srcore.Model`` (Ray must be connected)."""
    ref, _ = model_ref_and_model(model, transfer)
    return ref


def model_ref_and_model(model: Any, transfer: str = "copy"):
    check_transfer(transfer)
    ray = require_ray()
    source, loaded = model_source(model)
    payload = (ray.put(payload_of(source)),) if transfer == "copy" else ()
    return ModelRef(source, payload), loaded


def unwrap(exc: BaseException) -> BaseException:
    """The srcore error behind a Ray error (a worker's SrcoreError travels as ``cause``), else a
    ClusterError saying what Ray reported."""
    import ray.exceptions as rex

    if isinstance(exc, rex.RayTaskError):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, SrcoreError):
            return cause
        if cause is not None:
            return ClusterError(f"a Ray worker failed: {type(cause).__name__}: {cause}")
    if isinstance(exc, rex.RayActorError):
        return ClusterError(f"a Ray worker died and could not be restarted: {_first_line(exc)}")
    if isinstance(exc, rex.RayError):
        return ClusterError(f"Ray failed: {type(exc).__name__}: {_first_line(exc)}")
    return exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

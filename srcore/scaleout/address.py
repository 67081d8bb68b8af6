"""A cluster address, checked before a client connects to it.

Ray's client waits for minutes on an address where no cluster answers, so the driver first opens a
TCP connection (an unreachable host or a closed port fails in seconds) and, for Ray, checks that a
gRPC server (the Ray head's) answers there.
"""
from __future__ import annotations

import socket
from urllib.parse import urlsplit

from ..errors import ClusterError

#: seconds to wait for a cluster's head to accept a connection
CONNECT_TIMEOUT = 5.0


def host_port(address: str, default_port: int) -> tuple[str, int]:
    """``(host, port)`` of ``host:port``, ``scheme://host:port`` or ``host``."""
    text = address if "://" in address else f"tcp://{address}"
    try:
        parts = urlsplit(text)
        port = parts.port or default_port
    except ValueError as exc:
        raise ClusterError(f"cluster address {address!r} is not HOST:PORT ({exc})") from None
    if not parts.hostname:
        raise ClusterError(f"cluster address {address!r} has no host (expected HOST:PORT)")
    return parts.hostname, port


def check_reachable(address: str, what: str, default_port: int, timeout: float = CONNECT_TIMEOUT) -> tuple[str, int]:
    """Raise ClusterError unless something accepts TCP connections at ``address``."""
    host, port = host_port(address, default_port)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.timeout:
        raise ClusterError(f"cannot reach the {what} cluster at {address}: no answer within {timeout:g} s") from None
    except OSError as exc:
        raise ClusterError(f"cannot reach the {what} cluster at {address}: {exc.strerror or exc}") from None
    return host, port


def check_grpc(address: str, what: str, default_port: int, timeout: float = CONNECT_TIMEOUT) -> None:
    """Raise ClusterError unless a gRPC server answers at ``address`` (a Ray head's GCS or client server)."""
    host, port = check_reachable(address, what, default_port, timeout)
    import grpc

    channel = grpc.insecure_channel(f"{host}:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise ClusterError(f"{address} accepts connections but is not a {what} cluster (no gRPC answer within "
                           f"{timeout:g} s)") from None
    finally:
        channel.close()

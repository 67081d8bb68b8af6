"""SHA-256 of small data (file headers, cache keys) without importing :mod:`hashlib`.

``import hashlib`` loads OpenSSL (~3 ms of every cold start, measured); CPython's own SHA-256 module gives
the same digest, and for a few kilobytes its speed does not matter. Large data (a model's parameter
section) goes through ``hashlib``, whose OpenSSL SHA-256 is faster.
"""
from __future__ import annotations

try:
    from _sha2 import sha256 as _sha256  # CPython 3.12+
except ImportError:
    try:
        from _sha256 import sha256 as _sha256  # CPython 3.11
    except ImportError:  # another interpreter, or a build without them
        from hashlib import sha256 as _sha256


def small_sha256(data: bytes = b""):
    """A SHA-256 hash object (``update``, ``hexdigest``, ``digest``) fed ``data``."""
    return _sha256(data)

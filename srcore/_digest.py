"""SHA-256 of small data (file headers, cache keys) without importing :mod:`hashlib`.

``import hashlib`` loads OpenSSL (~3 ms of every cold start, measured); CPython's own SHA-256 module gives
the same digest, and for a few kilobytes its speed does not matter. Large data (a model's parameter
section) goes through ``hashlib``, whose OpenSSL SHA-256 is faster.
"""
from __future__ import annotations

import sys

# the module of this version first: a failed top-level import searches every sys.path entry (~0.2 ms)
_MODULES = ("_sha2", "_sha256") if sys.version_info >= (3, 12) else ("_sha256", "_sha2")   # 3.12+ / 3.11
try:
    _sha256 = __import__(_MODULES[0]).sha256
except ImportError:
    try:
        _sha256 = __import__(_MODULES[1]).sha256
    except ImportError:  # another interpreter, or a build without them
        from hashlib import sha256 as _sha256


def small_sha256(data: bytes = b""):
    """A SHA-256 hash object (``update``, ``hexdigest``, ``digest``) fed ``data``."""
    return _sha256(data)

"""Digests of small data (file headers, cache keys) without importing :mod:`hashlib`.

``import hashlib`` loads OpenSSL (~3 ms of every cold start, measured); CPython's own SHA-256 and BLAKE2b
modules give the same digests. :func:`small_sha256` is for checksums that files record (``header_sha256``);
srcore's own cache keys use :func:`small_blake2b`, as strong and ~3.4x fewer instructions than CPython's
SHA-256 (~14 against ~49 a byte: the ~150 kB a cold start hashed, mostly attrs' generated methods, were ~7 M
instructions). Large data (a model's parameter section) goes through ``hashlib``, whose OpenSSL SHA-256 is
faster.
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


_blake2b = None


def small_blake2b(data: bytes = b""):
    """A BLAKE2b-256 hash object (``update``, ``hexdigest``, ``digest``) fed ``data``: srcore's cache keys."""
    global _blake2b
    if _blake2b is None:   # imported on first use: ``import srcore`` alone hashes nothing with it
        try:
            from _blake2 import blake2b as _blake2b
        except ImportError:  # a build without it
            from hashlib import blake2b as _blake2b
    return _blake2b(data, digest_size=32)


def small_sha256(data: bytes = b""):
    """A SHA-256 hash object (``update``, ``hexdigest``, ``digest``) fed ``data``."""
    return _sha256(data)

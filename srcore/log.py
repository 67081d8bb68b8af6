"""srcore logs through the standard :mod:`logging` module, under the logger ``srcore``.

Loggers: ``srcore.runtime`` (each load's stages and their times), ``srcore.dispatch``
(the kernel chosen for every node, at DEBUG; fallback kernels at INFO),
``srcore.partition`` (engine segments and refused ones), ``srcore.plugin``
(discovery, failures), ``srcore.cli``. A library user turns them on like any
other (``logging.basicConfig(level=logging.INFO)``); the ``srcore`` command
with ``-v`` (INFO) or ``-vv`` (DEBUG), or ``SRCORE_LOG=info|debug|warning``
(also honoured by ``import srcore``, for scripts), via :func:`configure`.
"""
from __future__ import annotations

import logging
import os
import sys

ENV = "SRCORE_LOG"
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
           "1": logging.INFO, "2": logging.DEBUG, "0": logging.WARNING, "": logging.WARNING}

_handler: logging.Handler | None = None


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (pytest's capture, a redirect)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class _Formatter(logging.Formatter):
    """``srcore: warning: ...`` at the default level; times and logger names when verbose."""

    def __init__(self, verbose: bool):
        super().__init__()
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        if self.verbose:
            return f"{record.relativeCreated / 1e3:8.3f} s {record.levelname.lower():7s} {record.name}: {msg}"
        return f"srcore: {record.levelname.lower()}: {msg}"


def env_level() -> int | None:
    """The level ``SRCORE_LOG`` asks for (None if unset); an unknown value means INFO."""
    value = os.environ.get(ENV)
    if value is None:
        return None
    return _LEVELS.get(value.strip().lower(), logging.INFO)


def configure(level: int = logging.WARNING) -> None:
    """Send srcore's records at ``level`` and above to stderr (one handler, replaced on each call)."""
    global _handler
    logger = logging.getLogger("srcore")
    if _handler is not None:
        logger.removeHandler(_handler)
    _handler = _StderrHandler()
    _handler.setFormatter(_Formatter(verbose=level < logging.WARNING))
    logger.addHandler(_handler)
    logger.setLevel(level)
    logger.propagate = False


def level_from(verbose: int = 0, quiet: bool = False) -> int:
    """-v/-vv, else SRCORE_LOG, else WARNING (``-q`` keeps WARNING: it silences progress, not errors)."""
    if verbose >= 2:
        return logging.DEBUG
    if verbose == 1:
        return logging.INFO
    env = env_level()
    return env if env is not None else logging.WARNING

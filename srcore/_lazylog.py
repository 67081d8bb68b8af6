"""Loggers for the modules a first run imports, without importing :mod:`logging` (~5 ms of a cold start).

Until something imports ``logging``, nothing can have configured it (no handler, the root level at
WARNING), so a DEBUG or INFO record would go nowhere: :class:`LazyLogger` drops those without importing
it, and hands everything else to ``logging.getLogger(name)`` (with the caller's file and line, as if
called directly). ``SRCORE_LOG``, ``srcore -v``, pytest's ``caplog`` and any application that sets up
logging import it first, and then every record goes through as before.
"""
from __future__ import annotations

import sys

DEBUG, INFO, WARNING = 10, 20, 30  # logging's values, which it documents and never changes

__all__ = ["DEBUG", "INFO", "WARNING", "LazyLogger"]


class LazyLogger:
    """The part of :class:`logging.Logger` srcore's start-up modules use: ``debug``, ``info``,
    ``warning``, ``error``, ``exception``, ``log``, ``isEnabledFor``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def _logger(self):
        import logging

        return logging.getLogger(self.name)

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 (logging's name)
        if level < WARNING and "logging" not in sys.modules:
            return False
        return self._logger().isEnabledFor(level)

    def log(self, level: int, msg, *args, **kwargs) -> None:
        if self.isEnabledFor(level):
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1  # the record names our caller's line
            self._logger().log(level, msg, *args, **kwargs)

    def _at(level: int):
        def emit(self, msg, *args, **kwargs) -> None:
            if self.isEnabledFor(level):
                kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
                self._logger().log(level, msg, *args, **kwargs)
        return emit

    debug, info, warning, error = _at(DEBUG), _at(INFO), _at(WARNING), _at(40)
    del _at

    def exception(self, msg, *args, exc_info=True, **kwargs) -> None:
        if self.isEnabledFor(40):
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
            self._logger().log(40, msg, *args, exc_info=exc_info, **kwargs)

    def __repr__(self) -> str:
        return f"<LazyLogger {self.name}>"

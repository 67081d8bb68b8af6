"""Progress bars for steps that can take over a second (conversion, engine builds, benchmark rounds, ...).

Library code wraps a long loop in :func:`progress` or a staged step in
:func:`bar`; nothing is shown unless the ``srcore`` command turned bars on
(:func:`enable`; it does unless ``-q`` or ``--format json``), standard error is
a terminal, and ``tqdm`` is installed (extra ``srcore[progress]``). A bar
appears only once its step has run for :data:`DELAY` seconds, on stderr, and is
cleared when done; so short steps, pipes, CI logs and JSON output never see one.
"""
from __future__ import annotations

import sys
from typing import Any, Iterable, Iterator

#: seconds a step runs before its bar is drawn
DELAY = 1.0

_enabled = False


def enable(on: bool = True) -> None:
    """Turn bars on (the ``srcore`` command does, unless ``-q`` or ``--format json``) or off."""
    global _enabled
    _enabled = bool(on)


def active() -> bool:
    """Whether a bar would be drawn now: enabled, stderr a terminal, tqdm importable."""
    if not _enabled:
        return False
    try:
        if not sys.stderr.isatty():
            return False
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False
    import importlib.util

    return importlib.util.find_spec("tqdm") is not None


class _NoBar:
    """What :func:`bar` yields when no bar is drawn: the same methods, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def bar(total: int | None, desc: str, unit: str = "step"):
    """A bar to ``update()`` by hand (a context manager): ``with bar(3, "convert") as b: ...; b.update()``."""
    if not active():
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, delay=DELAY,
                dynamic_ncols=True, mininterval=0.2)


def progress(iterable: Iterable, desc: str, total: int | None = None, unit: str = "it") -> Iterator:
    """``iterable``, with a bar when bars are active."""
    if not active():
        return iter(iterable)
    from tqdm import tqdm

    return iter(tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False, delay=DELAY,
                     dynamic_ncols=True, mininterval=0.2))

"""Where a subcommand's results go: output paths checked before the work, ``-`` for stdout, JSON.

Conventions (docs/cli.md, "Writing a subcommand"):

* every file a command writes is checked with :func:`check_output_path` before
  any work is done, so a typo in ``-o`` fails in milliseconds, not after a
  conversion; and written through :func:`open_output`, which turns an
  ``OSError`` (a full disk) into :class:`srcore.cli.errors.OutputPathError`;
* ``-`` means standard output for every such path; when a file goes to stdout,
  the human-readable report goes to stderr (:func:`report_stream`), and two
  things cannot both go to stdout (:func:`claim_stdout`);
* ``--format json`` (:func:`add_format_argument`) prints one JSON document on
  stdout and nothing else there; its schema is
  ``srcore/cli/schemas/<command>.json`` (:func:`load_schema`); non-finite floats
  are written as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
  (:func:`to_json`), so the output is strict JSON.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from typing import Any, Iterator

from .errors import OutputPathError, UsageError

STDOUT = "-"


def add_format_argument(parser, choices: tuple[str, ...] = ("text", "json"), default: str | None = None,
                        what: str = "the report") -> None:
    """``--format text|json`` (the first choice is the default)."""
    parser.add_argument("--format", choices=choices, default=default or choices[0],
                        help=f"how to print {what}: {' or '.join(choices)} (default {default or choices[0]}); "
                        "json prints one document on stdout (schema in docs/cli.md)")


def check_output_path(path: str | None, flag: str, *, suffixes: tuple[str, ...] = ()) -> None:
    """Fail now, before any work, if ``path`` cannot be written: no such directory, a directory,
    no permission. ``None`` (not given) and ``-`` (stdout) pass. ``suffixes``: the allowed
    extensions (lower case, with the dot), a usage error otherwise."""
    if path is None or path == STDOUT:
        return
    if suffixes and not path.lower().endswith(suffixes):
        raise UsageError(f"{flag} {path}: unknown file type; expected {', '.join(suffixes)} (or '-' for stdout)")
    full = os.path.abspath(path)
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        raise OutputPathError(f"{flag} {path}: is a directory")
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.exists(parent) else "no such directory"
        raise OutputPathError(f"{flag} {path}: {parent}: {what}")
    if os.path.exists(full) and not os.access(full, os.W_OK):
        raise OutputPathError(f"{flag} {path}: permission denied")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{flag} {path}: cannot create files in {parent}: permission denied")


def claim_stdout(args, *flags: tuple[str, str | None]) -> str | None:
    """The one thing written to stdout among ``flags`` (``(flag, path)`` pairs, and ``--format json``).

    Raises :class:`UsageError` when two of them are ``-`` (or one is ``-`` and the format is json)."""
    claims = [flag for flag, path in flags if path == STDOUT]
    if getattr(args, "format", None) == "json":
        claims.append("--format json")
    if len(claims) > 1:
        raise UsageError(f"{' and '.join(claims)} both write to standard output; give a file to all but one")
    return claims[0] if claims else None


def report_stream(*paths: str | None):
    """stdout, or stderr when one of ``paths`` is ``-`` (a file going to stdout)."""
    return sys.stderr if STDOUT in paths else sys.stdout


@contextlib.contextmanager
def open_output(path: str, flag: str, *, binary: bool = False) -> Iterator[Any]:
    """A file to write ``path`` to (stdout for ``-``); errors name the flag and the path."""
    if path == STDOUT:
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    try:
        with open(path, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
    except OSError as exc:
        raise OutputPathError(f"{flag} {path}: cannot write: {exc.strerror or exc}") from None


def to_json(value: Any) -> Any:
    """``value`` with numpy scalars and arrays made plain, and non-finite floats as strings."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays
    if tolist is not None:
        return to_json(tolist())
    return str(value)


def dump_json(value: Any) -> str:
    """Strict JSON (no NaN), indented, for ``--format json`` and ``--json FILE``."""
    return json.dumps(to_json(value), indent=2, allow_nan=False)


def print_json(value: Any) -> None:
    sys.stdout.write(dump_json(value) + "\n")


def write_json(value: Any, path: str, flag: str) -> None:
    """Write ``value`` as JSON to ``path`` (``-``: stdout)."""
    with open_output(path, flag) as f:
        f.write(dump_json(value) + "\n")


def load_schema(command: str) -> dict:
    """The JSON schema of ``srcore COMMAND --format json`` (``srcore/cli/schemas/COMMAND.json``)."""
    from importlib import resources

    text = resources.files("srcore.cli").joinpath("schemas", f"{command}.json").read_text(encoding="utf-8")
    return json.loads(text)

"""``json.loads`` and canonical ``json.dumps`` for the load path, without importing ``json``.

Loading a ``.srm`` reads and checks JSON (its header, its metadata fields); the ``json`` package costs ~1 ms
of a cold start to import, mostly compiling the regular expressions of its pure-Python fallbacks, which
CPython never runs: its parser and encoder are the C ones of ``_json``. This module calls those directly,
configured as ``json``'s defaults are, so the results are the same objects and strings (the tests compare
them with ``json``'s). Without ``_json`` (another Python), it is ``json`` itself. Errors are ``ValueError``
(``json.JSONDecodeError`` is one) and ``TypeError``, as with ``json``.
"""
from __future__ import annotations

from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None

_WS = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Decoder:
    """The attributes ``_json.make_scanner`` reads: those of ``json.JSONDecoder()``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: dict = {}


_scan = _json.make_scanner(_Decoder()) if _json is not None else None


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``."""
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(text)
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    elif not isinstance(text, str):
        raise TypeError(f"the JSON object must be str or bytes, not {type(text).__name__}")
    start = len(text) - len(text.lstrip(_WS))
    try:
        obj, end = _scan(text, start)
    except StopIteration as exc:
        raise _error("Expecting value", text, exc.value) from None
    if text[end:].strip(_WS):
        raise _error("Extra data", text, end + len(text[end:]) - len(text[end:].lstrip(_WS)))
    return obj


def _error(msg: str, text: str, pos: int) -> ValueError:
    from json import JSONDecodeError  # only for an error

    return JSONDecodeError(msg, text, pos)


def _default(obj: Any) -> Any:
    raise TypeError(f"Object of type {obj.__class__.__name__} is not JSON serializable")


def canonical(obj: Any) -> str:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)``."""
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    # what json.dumps builds for these arguments (a fresh encoder: its circular-reference markers are per call)
    encode = _json.make_encoder({}, _default, _json.encode_basestring_ascii, None, ":", ",", True, False, True)
    return "".join(encode(obj, 0))

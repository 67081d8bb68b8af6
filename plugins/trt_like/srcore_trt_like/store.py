"""Where an engine's plans come from before one is built: the serialized engine the model carries
(``srcore build``), then the engine cache (the ``engine_cache`` engine option), like ONNX Runtime's
TensorRT engine cache. A stored plan runs only when its compatibility record matches this process
(:func:`.serialize.stale_reason`); otherwise the plan is rebuilt and a warning says why. A stored
plan whose arrays do not match their checksum is an error (:class:`srcore.SrcoreFormatError`), never
run; a corrupt cache file is only a warning (the cache is rebuilt).

Engine cache files: ``<dir>/<segment key>-<signature hash>.plan``, one plan each, in the
safetensors container (the plan's JSON in the metadata, its arrays as tensors); ``<dir>`` is
``cache_root()/trt_like/engines`` for ``engine_cache=True``, or the path given.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from srcore.plugin import EngineOptionError, SrcoreFormatError

from .builder.plan import Plan
from .kernels.contexts import CONTEXTS
from .serialize import StalePlan, dump_plan, dumps, load_network, segment_constants, stale_reason
from .tactics.choose import StaleChoice, choose_tactics

log = logging.getLogger("srcore.trt_like")
_write_lock = threading.Lock()


def restore_plan(meta: dict[str, Any], arrays: dict, options: dict[str, Any], name: str, what: str,
                 constants: dict | None = None) -> Plan:
    """The plan a stored ``meta``/``arrays`` describes: nothing converted, fused or timed, no stored
    weight laid out again. Raises :class:`StalePlan` (rebuild) or :class:`srcore.SrcoreFormatError`."""
    why = stale_reason(meta, options)
    if why is not None:
        raise StalePlan(why)
    net, choices, _ = load_network(meta, arrays, what, constants, release=lambda a: release_pages((a,)))
    # each stored layout copied into writeable memory (the tactics take it as is), its file pages
    # released right away: the peak is one layout more, not all of them twice
    choices = [(tactic, {k: _owned(a) for k, a in layout.items()}) for tactic, layout in choices]
    try:
        steps = choose_tactics(net, options, name=name, chosen=choices)
    except StaleChoice as exc:
        raise StalePlan(str(exc)) from None
    except (KeyError, TypeError, ValueError, IndexError) as exc:   # attributes a tactic cannot read
        raise SrcoreFormatError(f"{what}: the stored plan is malformed: {type(exc).__name__}: {exc}") from None
    release_pages(arrays.values())   # copied where needed: the file's pages are not read again
    return Plan(net, steps, CONTEXTS)


def _signature_text(shapes) -> str:
    return ", ".join(f"({', '.join(map(str, s))})" for s in shapes)


class PlanStore:
    """The stored plans of one engine (from ``segment.stored``) and its engine cache directory."""

    def __init__(self, segment, options: dict[str, Any]):
        self.segment = segment
        self.name = segment.name
        self.options = options
        self.stored: dict[tuple, tuple[dict, dict]] = {}
        if segment.stored is not None:
            self.stored = _stored_plans(segment.stored, self.name)
        self.cache_dir = _cache_dir(options.get("engine_cache", False))
        self._key: str | None = None
        self.constants = segment_constants(segment.graph)

    def signatures(self) -> list[tuple]:
        """The input signatures of the stored plans (built for profiles or static shapes)."""
        return list(self.stored)

    def load(self, shapes: tuple) -> tuple[Plan, str] | None:
        """A stored or cached plan for ``shapes`` (and where it came from), or None."""
        found = self.stored.get(shapes)
        if found is not None:
            what = f"serialized engine {self.name}, plan for inputs {_signature_text(shapes)}"
            try:
                return restore_plan(*found, self.options, self.name, what, self.constants), "serialized"
            except StalePlan as exc:
                log.warning("%s: the serialized plan for inputs %s is not used, %s; rebuilding it",
                            self.name, _signature_text(shapes), exc)
        if self.cache_dir is None:
            return None
        path = self._path(shapes)
        if not path.is_file():
            return None
        what = f"engine cache file {path}"
        try:
            meta, arrays = _read_plan_file(path)
            return restore_plan(meta, arrays, self.options, self.name, what, self.constants), "cache"
        except (StalePlan, SrcoreFormatError) as exc:
            log.warning("%s: %s is not used (%s); rebuilding it", self.name, what, exc)
            return None

    def save(self, shapes: tuple, plan: Plan) -> None:
        """Write ``plan`` to the engine cache (if on); a cache that cannot be written is only logged."""
        if self.cache_dir is None:
            return
        path = self._path(shapes)
        try:
            meta, arrays = dump_plan(plan, shapes, self.options, constants=self.constants)
            _write_plan_file(path, meta, arrays)
            log.info("%s: wrote %s", self.name, path)
        except (OSError, TypeError) as exc:
            log.warning("%s: cannot write the engine cache file %s: %s", self.name, path, exc)

    def _path(self, shapes: tuple) -> Path:
        if self._key is None:
            self._key = self.segment.key()
        sig = hashlib.sha256(repr(tuple(tuple(int(d) for d in s) for s in shapes)).encode()).hexdigest()[:16]
        return self.cache_dir / f"{self._key[:32]}-{sig}.plan"


def _cache_dir(value) -> Path | None:
    if value in (False, None, "", 0):
        return None
    if value is True or value == 1:
        from srcore.plugin import cache_root

        return cache_root() / "trt_like" / "engines"
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    raise EngineOptionError(f"engine option engine_cache={value!r}: expected true/false or a directory path")


def _stored_plans(data, name: str) -> dict[tuple, tuple[dict, dict]]:
    """``{signature: (plan meta, its arrays)}`` of a serialized engine (``Engine.serialize``)."""
    meta = data.meta
    try:
        plans = meta["plans"]
        out = {}
        for i, plan in enumerate(plans):
            prefix = f"p{i}."
            arrays = {k[len(prefix):]: a for k, a in data.arrays.items() if k.startswith(prefix)}
            shapes = tuple(tuple(int(d) for d in s) for s in plan["signature"])
            out[shapes] = (plan, arrays)
        return out
    except (KeyError, TypeError, ValueError) as exc:
        raise SrcoreFormatError(f"serialized engine {name}: malformed ({type(exc).__name__}: {exc})") from None


def _write_plan_file(path: Path, meta: dict, arrays: dict) -> None:
    from srcore.plugin import encode_header, tensor_layout, write_file

    entries, order = tensor_layout(arrays)
    header = {"__metadata__": {"format": "srcore_trt_like.plan", "plan": dumps(meta)}, **entries}
    path.parent.mkdir(parents=True, exist_ok=True)
    with _write_lock:
        write_file(path, encode_header(header), arrays, order)


def _read_plan_file(path: Path) -> tuple[dict, dict]:
    from srcore.plugin import Container

    c = Container(path)
    md = c.metadata
    if md.get("format") != "srcore_trt_like.plan":
        c.fail(f"not a trt_like plan (format {md.get('format')!r})")
    try:
        meta = json.loads(md["plan"])
    except (KeyError, ValueError) as exc:
        c.fail(f"bad plan metadata: {exc}")
    return meta, {name: c.array(name) for name in c.entries}


def _owned(a):
    import numpy as np

    out = np.array(a, copy=True, order="C")
    release_pages((a,))
    return out


def release_pages(arrays) -> None:
    """Drop the resident pages of read-only file-mapped ``arrays`` (a stored plan's, once verified
    and copied; a model's raw weights, once laid out)."""
    from srcore.plugin import drop_resident_pages

    drop_resident_pages(arrays)

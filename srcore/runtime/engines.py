"""A StaticModule's engines seen from the model: optimization profiles (plans for given input
shapes, made at load or by ``StaticModule.warmup``) and saving the model with its serialized
engines (``StaticModule.save``, ``srcore build``).

A *profile* gives the shape of every model input with symbolic dims (inputs whose specs are fully
static may be left out), as TensorRT's optimization profiles do:

* ``{"x": (8, 3, 64, 64)}``: one signature;
* ``{"x": {"min": (1, 3, 64, 64), "opt": (8, 3, 64, 64), "max": (32, 3, 64, 64)}}``: the min,
  opt and max signatures (TensorRT tunes one engine for the range; here each is a plan of its
  own, and shapes in between are planned on first use);
* a list of either: every signature of each.

For each signature srcore propagates the shapes through the partitioned graph and hands every
engine the concrete shapes of its own inputs (``engine.prepare(shapes)``).
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import EngineOptionError, ShapeError, SrcoreError
from ..ir.types import TensorType

log = logging.getLogger("srcore.runtime")


def parse_profiles(value: Any, input_specs: Sequence[Any], *, what: str = "profiles") -> list[dict[str, tuple]]:
    """The signatures ``value`` names, each ``{input name: shape}`` for every tensor input;
    :class:`srcore.EngineOptionError` naming the profile and input for anything that does not fit."""
    profiles = [value] if isinstance(value, Mapping) else value
    if not isinstance(profiles, (list, tuple)):
        raise EngineOptionError(f"{what}: expected a mapping of input names to shapes, or a list of them; "
                                f"got {type(value).__name__}")
    tensor_specs = {s.name: s for s in input_specs if _is_tensor_spec(s)}
    out: list[dict[str, tuple]] = []
    for i, prof in enumerate(profiles):
        where = f"{what}[{i}]" if len(profiles) > 1 or not isinstance(value, Mapping) else what
        if not isinstance(prof, Mapping):
            raise EngineOptionError(f"{where}: expected a mapping of input names to shapes, got {prof!r}")
        unknown = sorted(set(prof) - set(tensor_specs))
        if unknown:
            raise EngineOptionError(f"{where}: unknown input(s) {', '.join(map(repr, unknown))}; the model's "
                                    f"tensor inputs: {', '.join(tensor_specs) or 'none'}")
        variants = _variants(prof, where)
        for variant in variants:
            sig = {}
            for name, spec in tensor_specs.items():
                shape = variant.get(name)
                if shape is None:
                    if spec.shape is None or not all(isinstance(d, int) for d in spec.shape):
                        raise EngineOptionError(f"{where}: no shape for input {name!r} "
                                                f"(its spec {_spec_text(spec)} has symbolic dims)")
                    shape = tuple(spec.shape)
                sig[name] = _fit(shape, spec, f"{where}: input {name!r}")
            if sig not in out:
                out.append(sig)
    return out


def _is_tensor_spec(spec) -> bool:
    return hasattr(spec, "dtype") and not hasattr(spec, "type")


def _spec_text(spec) -> str:
    return "(" + ", ".join(str(d) for d in spec.shape) + ")" if spec.shape is not None else "of unknown rank"


def _variants(prof: Mapping, where: str) -> list[dict[str, Any]]:
    """A profile's signatures: one, or min/opt/max when any input gives a range."""
    ranged = {k for k, v in prof.items() if isinstance(v, Mapping)}
    if not ranged:
        return [dict(prof)]
    for k in ranged:
        extra = sorted(set(prof[k]) - {"min", "opt", "max"})
        if extra or not prof[k]:
            raise EngineOptionError(f"{where}: input {k!r}: a range takes min, opt and max, got "
                                    f"{', '.join(map(repr, extra)) or 'nothing'}")
    out = []
    for level in ("min", "opt", "max"):
        if not any(level in prof[k] for k in ranged):
            continue
        variant = {}
        for k, v in prof.items():
            if k in ranged:
                if level not in v:
                    raise EngineOptionError(f"{where}: input {k!r} has no {level!r} shape (the others do)")
                variant[k] = v[level]
            else:
                variant[k] = v
        out.append(variant)
    return out


def _fit(shape: Any, spec, where: str) -> tuple[int, ...]:
    """``shape`` (a sequence of ints or an array, whose shape is taken) checked against ``spec``."""
    if isinstance(shape, np.ndarray):
        shape = shape.shape
    if isinstance(shape, str):
        shape = parse_shape(shape, where)
    try:
        dims = tuple(shape)
    except TypeError:
        raise EngineOptionError(f"{where}: expected a shape (a sequence of ints), got {shape!r}") from None
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise EngineOptionError(f"{where}: shape {shape!r} must be whole numbers >= 0")
    dims = tuple(int(d) for d in dims)
    if spec.shape is not None:
        if len(dims) != len(spec.shape):
            raise EngineOptionError(f"{where}: shape {dims} has rank {len(dims)}, the input's spec "
                                    f"{_spec_text(spec)} has rank {len(spec.shape)}")
        for i, (d, s) in enumerate(zip(dims, spec.shape)):
            if isinstance(s, int) and d != s:
                raise EngineOptionError(f"{where}: shape {dims} has {d} in dim {i}, the input's spec "
                                        f"{_spec_text(spec)} fixes it at {s}")
    return dims


def parse_shape(text: str, where: str = "shape") -> tuple[int, ...]:
    """``"1x3x64x64"``, ``"1,3,64,64"`` or ``"(1, 3, 64, 64)"`` as a tuple of ints."""
    cleaned = text.strip().strip("()[]").replace("x", ",").replace("X", ",")
    try:
        return tuple(int(p) for p in cleaned.split(",") if p.strip())
    except ValueError:
        raise EngineOptionError(f"{where}: {text!r} is not a shape (write it as 1x3x64x64 or 1,3,64,64)") from None


def engine_signatures(module, profile: dict[str, tuple]) -> list[tuple[str, Any, tuple]]:
    """``(engine name, engine, its input shapes)`` of every engine for the model inputs of ``profile``."""
    from ..partition import ENGINE_KIND
    from .static_module import _propagate, _set_input_types, _spec_type

    g = module.graph.copy()
    types = []
    for spec in module.input_specs:
        if _is_tensor_spec(spec):
            types.append(TensorType(spec.dtype, profile[spec.name]))
        else:
            types.append(_spec_type(spec))
    _set_input_types(g, types)
    try:
        _propagate(g, types, module.plugin_manager.registry)
    except ShapeError as exc:
        raise EngineOptionError(f"the profile {profile} does not fit the model: {exc}") from None
    engines = {s.name: s.engine for s in (module.partition.engines if module.partition else ())}
    out = []
    for n in g.all_nodes():
        if n.kind != ENGINE_KIND or n.attrs.get("name") not in engines:
            continue
        shapes = []
        for v in n.inputs:
            t = v.type
            if not (isinstance(t, TensorType) and t.shape is not None and all(isinstance(d, int) for d in t.shape)):
                break   # a shape only known at run time (data-dependent): this engine plans on first use
            shapes.append(tuple(t.shape))
        else:
            out.append((n.attrs["name"], engines[n.attrs["name"]], tuple(shapes)))
    return out


def warmup(module, profiles: list[dict[str, tuple]]) -> list[tuple[str, tuple]]:
    """Have every engine prepare its plans for each profile; ``(engine name, shapes)`` prepared."""
    done = []
    for profile in profiles:
        for name, engine, shapes in engine_signatures(module, profile):
            prepare = getattr(engine, "prepare", None)
            if prepare is None or (name, shapes) in done:
                continue
            prepare(shapes)
            done.append((name, shapes))
            log.info("%s: prepared for inputs %s", name, shapes)
    return done


def save(module, path, *, producer: str | None = None) -> list[str]:
    """Write ``module``'s model with the serialized engines of its engine segments; the names of
    the engines written (engines that cannot serialize are rebuilt at every load)."""
    import attrs

    from ..format.srm import save as save_srm
    from ..model import Model

    model = module.model
    if not isinstance(model, Model):
        model = Model.from_graph(model)
    engines = dict(getattr(model, "engines", {}) or {})
    written = []
    for seg in (module.partition.engines if module.partition else ()):
        serialize = getattr(seg.engine, "serialize", None)
        if serialize is None or seg.segment is None:
            log.info("%s: its engine cannot be serialized (no serialize()); it is built at load", seg.name)
            continue
        data = serialize()
        if data is None:
            continue
        if not hasattr(data, "meta") or not hasattr(data, "arrays"):
            raise SrcoreError(f"{seg.name}: serialize() returned {type(data).__name__}, not an EngineData")
        engines[seg.segment.key()] = data
        written.append(seg.name)
    save_srm(attrs.evolve(model, engines=engines), path, producer=producer)
    return written

"""Static Runtime's generated one-op test graphs (``tests/data/static_runtime_generated_ops.json``) as runnable cases.

``make_args`` turns a case's argument specs into values (numpy for srcore, torch for the
reference); ``run_torch`` runs the graph with torch's own interpreter (``parse_ir`` +
``_create_function_from_graph``), ``run_srcore`` with a StaticModule.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "static_runtime_generated_ops.json"


def load_cases() -> list[dict]:
    return json.loads(DATA.read_text())["cases"]


def make_args(specs: list, seed: int) -> list:
    """numpy / Python values for one argument set (deterministic per seed)."""
    rng = np.random.default_rng(seed)
    out: list = []
    names = {}
    for i, spec in enumerate(specs):
        v = _value(spec, rng, out)
        out.append(v)
        names[i] = v
    return out


def _value(spec, rng, earlier):
    if not isinstance(spec, dict):
        return spec
    if "scalar_type" in spec:
        return spec["scalar_type"]
    dtype = spec.get("dtype", "float32")
    if "rand" in spec or "randn" in spec:
        shape = tuple(spec.get("rand", spec.get("randn")))
        v = rng.random(shape) if "rand" in spec else rng.standard_normal(shape)
        if "plus" in spec:
            v = v + spec["plus"]
        if "gt" in spec:
            return v > spec["gt"]
        return v.astype(dtype)
    if "randint" in spec:
        low, high = spec["randint"]
        return rng.integers(low, high, size=tuple(spec["shape"])).astype(dtype)
    if "tensor" in spec:
        return np.array(spec["tensor"], dtype=dtype)
    if "argsort" in spec:  # argsort of the first argument (the graphs call it self)
        x = earlier[0]
        return np.argsort(x, axis=spec["dim"], kind="stable").astype(np.int64)
    raise ValueError(f"unsupported argument spec {spec}")


def to_torch(v):
    import torch
    return torch.from_numpy(np.ascontiguousarray(v).copy()) if isinstance(v, np.ndarray) else v


def run_torch(graph_text: str, args: list):
    import torch
    g = torch._C.parse_ir(graph_text)
    fn = torch._C._create_function_from_graph("sr_case", g)
    return fn(*[to_torch(a) for a in args])

"""``srcore.Model``: a graph plus its named parameters, input specs and metadata.

The graph's tensor constants are ``prim::Constant[param="name"]`` nodes whose
``attrs["value"]`` is the parameter array; ``Model.params`` maps the same names
to the same arrays. :func:`bind_params` and :func:`collect_params` move arrays
between the two. A model loaded from a ``.srm`` file holds read-only,
memory-mapped arrays: never write into them.
"""
from __future__ import annotations

from typing import Any, Mapping

import attrs
import numpy as np

from ._convert import to_tuple
from ._repr import shared_repr
from .errors import SrcoreError
from .ir.graph import Graph
from .ir.types import Dim, TensorType

CONSTANT = "prim::Constant"
_STRUCTURAL = {"prim::Param", "prim::Return"}


def _shape(s) -> tuple[Dim, ...] | None:
    return None if s is None else tuple(s)


def _check_dim(inst, attr, shape) -> None:
    if shape is None:
        return
    for d in shape:
        if not (d is None or isinstance(d, str) or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)):
            raise ValueError(f"input {inst.name!r}: bad dimension {d!r} (int >= 0, symbolic str or None)")


@attrs.frozen
@shared_repr
class InputSpec:
    """One tensor input of a model: its name, dtype (numpy name; ``None`` when unknown) and
    shape (``None`` = unknown rank; each dim an ``int``, a symbolic ``str`` such as
    ``"batch"``, or ``None``). Non-tensor inputs (``int n``) have no spec: the graph
    input's IR type describes them."""

    name: str
    dtype: str | None = None
    shape: tuple[Dim, ...] | None = attrs.field(default=None, converter=_shape, validator=_check_dim)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype,
                "shape": None if self.shape is None else list(self.shape)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "InputSpec":
        if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
            raise ValueError(f"bad input spec {obj!r}")
        dtype = obj.get("dtype")
        if dtype is not None and not isinstance(dtype, str):
            raise ValueError(f"bad dtype in input spec {obj!r}")
        shape = obj.get("shape")
        if shape is not None and not isinstance(shape, list):
            raise ValueError(f"bad shape in input spec {obj!r}")
        return cls(obj["name"], dtype, shape)

    def tensor_type(self) -> TensorType:
        """The IR type of this input when it is a tensor."""
        return TensorType(self.dtype, self.shape)


@attrs.define(eq=False)
class Model:
    """A converted model: what a ``.srm`` file holds and what ``StaticModule`` runs."""

    graph: Graph
    params: dict[str, np.ndarray] = attrs.field(factory=dict)
    input_specs: tuple[InputSpec, ...] = attrs.field(default=(), converter=to_tuple)
    output_names: tuple[str, ...] = attrs.field(default=(), converter=to_tuple)
    metadata: dict[str, str] = attrs.field(factory=dict)
    #: serialized engines by segment key (``srcore.plugin.EngineData``; ``srcore build`` writes them)
    engines: dict[str, Any] = attrs.field(factory=dict)
    #: the plugin distributions the model needs (``srcore.plugin.requirements.RequiredPlugins``), as
    #: recorded in its ``.srm`` file; None for a model made in memory (``save`` records it)
    plugins: Any = None
    #: schemas of ops no installed plugin declares, recorded from torch by the converter (so that a
    #: torch-backed fallback kernel can run them); kept in the ``.srm`` file
    op_schemas: tuple = attrs.field(default=(), converter=to_tuple)

    def undeclared_schemas(self, declared) -> tuple:
        """The schemas of the graph's nodes (and ``op_schemas``) whose overload ``declared`` lacks, by name."""
        found = {str(s.qualified_name): s for s in self.op_schemas}
        for n in self.graph.all_nodes():
            s = n.schema
            if s is not None and s.qualified_name not in declared and s.qualified_name.rstrip(".") not in declared:
                found.setdefault(s.qualified_name, s)
        return tuple(found[q] for q in sorted(found) if q not in declared)

    @classmethod
    def from_graph(cls, graph: Graph, *, input_specs=None, output_names=None,
                   metadata: Mapping[str, str] | None = None) -> "Model":
        """Wrap a graph whose tensor constants already carry their arrays.

        Input specs default to the tensor graph inputs' names and types; output
        names to ``output`` (one output) or ``output0``, ``output1``, ...
        """
        params = collect_params(graph)
        if input_specs is None:
            input_specs = tuple(InputSpec(v.name, v.type.dtype, v.type.shape)
                                for v in graph.inputs if isinstance(v.type, TensorType))
        if output_names is None:
            output_names = default_output_names(len(graph.outputs))
        return cls(graph, params, input_specs, output_names, dict(metadata or {}))

    def required_ops(self) -> list[str]:
        """Sorted node kinds the graph uses (``aten::linear``, ``prim::If``, ...), nested blocks included."""
        return required_ops(self.graph)

    def bind_params(self) -> None:
        """Put ``self.params`` arrays into the graph's ``prim::Constant[param=...]`` nodes."""
        bind_params(self.graph, self.params)

    def validate(self) -> None:
        """Check that specs, outputs and params agree with the graph (raises ``SrcoreError``)."""
        tensor_inputs = [v.name for v in self.graph.inputs if isinstance(v.type, TensorType)]
        spec_names = [s.name for s in self.input_specs]
        if spec_names != tensor_inputs:
            raise SrcoreError(f"model input specs {spec_names} do not match the graph's tensor inputs "
                              f"{tensor_inputs} (one spec per tensor input, in order)")
        if len(self.output_names) != len(self.graph.outputs):
            raise SrcoreError(f"model has {len(self.output_names)} output names but the graph has "
                              f"{len(self.graph.outputs)} outputs")
        for n in self.graph.all_nodes():
            name = n.attrs.get("param") if n.kind == CONSTANT else None
            if name is not None and name not in self.params:
                raise SrcoreError(f"graph constant %{n.output.name} refers to unknown parameter {name!r}")
            if name is not None:
                _check_param_type(n, name, self.params[name])
        for k, v in self.metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SrcoreError(f"model metadata must map str to str, got {k!r}: {v!r}")

    def __repr__(self) -> str:
        nbytes = sum(int(a.nbytes) for a in self.params.values())
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape) if s.shape is not None else ''}"
                        for s in self.input_specs)
        return f"<Model ({ins}) -> {len(self.output_names)} outputs, {len(self.params)} params, {nbytes} bytes>"


def _check_param_type(n, name: str, value) -> None:
    """A parameter's array has the dtype and shape its graph constant declares (a tensor table
    edited to another dtype or shape of the same byte size would otherwise load as that)."""
    t = n.output.type
    if not isinstance(t, TensorType) or t.qparams is not None or not isinstance(value, np.ndarray):
        return
    if t.dtype is not None and not t.dtype.startswith("q") and np.dtype(value.dtype).name != t.dtype:
        raise SrcoreError(f"parameter {name!r} is {value.dtype.name} but graph constant %{n.output.name} "
                          f"declares {t.dtype}")
    if t.shape is not None and all(isinstance(d, int) for d in t.shape) and tuple(value.shape) != tuple(t.shape):
        raise SrcoreError(f"parameter {name!r} has shape {list(value.shape)} but graph constant "
                          f"%{n.output.name} declares {list(t.shape)}")


def default_output_names(n: int) -> tuple[str, ...]:
    return ("output",) if n == 1 else tuple(f"output{i}" for i in range(n))


def required_ops(graph: Graph) -> list[str]:
    return sorted({n.kind for n in graph.all_nodes() if n.kind not in _STRUCTURAL})


def collect_params(graph: Graph) -> dict[str, np.ndarray]:
    """``{param name: array}`` from the graph's named tensor constants."""
    out: dict[str, np.ndarray] = {}
    for n in graph.all_nodes():
        if n.kind == CONSTANT and n.attrs.get("param") is not None:
            name = n.attrs["param"]
            value = n.attrs.get("value")
            if not isinstance(value, np.ndarray):
                raise SrcoreError(f"parameter {name!r} (%{n.output.name}) has no array value")
            if name in out and out[name] is not value:
                raise SrcoreError(f"two different constants are both named parameter {name!r}")
            out[name] = value
    return out


def bind_params(graph: Graph, params: Mapping[str, np.ndarray]) -> None:
    """Set each ``prim::Constant[param=name]`` node's value to ``params[name]``."""
    missing = []
    for n in graph.all_nodes():
        if n.kind == CONSTANT and n.attrs.get("param") is not None:
            name = n.attrs["param"]
            if name not in params:
                missing.append(name)
            else:
                n.attrs["value"] = params[name]
    if missing:
        raise SrcoreError(f"graph refers to parameters that are not given: {', '.join(sorted(missing))}")


def specs_to_json(specs) -> str:
    import json

    return json.dumps([s.to_json() for s in specs], separators=(",", ":"))


def specs_from_json(text: str) -> tuple[InputSpec, ...]:
    from ._fastjson import loads

    obj = loads(text)
    if not isinstance(obj, list):
        raise ValueError("input specs must be a JSON list")
    return tuple(InputSpec.from_json(o) for o in obj)

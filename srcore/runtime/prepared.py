"""A model saved already prepared: its graph is what the load's passes made of it, and a record says so.

``StaticModule.save(path, prepared=True)`` writes the graph as the default pass pipeline left it (alias
normalization, out-overload lowering, decompositions, the passes), with a record in the model's
metadata (key ``srcore.prepared``): the srcore version that prepared it, the input types it was
prepared for and the backends. A load of such a file with the same three (and ``optimize`` on) uses the
graph as it is: no pass runs and no pass module is imported (~5 ms of imports and ~1-2 ms of passes on
a small model, on the Intel VM of docs/performance.md). Anything else prepares it again, as any graph;
the pipeline is idempotent, so that load gets the same graph. A prepared graph is an ordinary graph:
running it never depends on the record being right, only its speed does (a graph prepared by an older
pipeline may miss a newer rewrite, which is why another srcore version prepares it again).

Only a load that decomposed nothing is saved with the record (the load report of a later load would
otherwise not list the decompositions).
"""
from __future__ import annotations

import json
from typing import Any, Sequence

KEY = "srcore.prepared"
FORMAT = 1


def record(input_types: Sequence[Any], backends: Sequence[str]) -> str:
    """The metadata value of a graph prepared for ``input_types`` on ``backends``, by this srcore."""
    from .. import __version__

    return json.dumps({"format": FORMAT, "srcore": __version__, "input_types": [str(t) for t in input_types],
                       "backends": list(backends)}, separators=(",", ":"))


def prepared_for(model: Any, input_types: Sequence[Any], backends: Sequence[str]) -> bool:
    """True if ``model`` holds a graph this srcore prepared for these input types and backends."""
    text = (getattr(model, "metadata", None) or {}).get(KEY)
    if not isinstance(text, str):
        return False
    return text == record(input_types, backends)

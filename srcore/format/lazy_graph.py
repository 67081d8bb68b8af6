"""A model read from a ``.srm`` file whose graph is parsed when first used.

``srcore.load`` returns one instead of parsing the graph at once when this srcore has read the same header
before (same header checksum; the prepared-model cache holds entries made from it:
``srcore.runtime.prepared_cache.parsed_before``). A ``StaticModule`` that the cache then serves prepared never
needs the original graph, so such a load parses one graph (the entry's) instead of two. Anything else that
reads ``model.graph`` parses it then, with the arrays the file mapped at load, and checks the model as the load
would have: a problem raises the ``SrcoreFormatError`` naming the file that ``srcore.load`` would have raised.
"""
from __future__ import annotations

import threading
from typing import Any

from ..model import Model

#: the attrs slot of ``Model.graph``, where the parsed graph is kept
_SLOT = Model.__dict__["graph"]
_UNPARSED = object()
_lock = threading.Lock()   # two threads reading ``graph`` first get one graph, not two


class FileModel(Model):
    """A :class:`srcore.Model` whose graph is parsed on first access (see the module's doc)."""

    __slots__ = ("_source",)

    @property
    def graph(self) -> Any:
        g = _SLOT.__get__(self, Model)
        return g if g is not _UNPARSED else self._parse()

    @graph.setter
    def graph(self, value: Any) -> None:
        _SLOT.__set__(self, value)

    def _parse(self) -> Any:
        with _lock:
            g = _SLOT.__get__(self, Model)
            if g is _UNPARSED:
                path, text, arrays, specs, outputs, metadata = self._source
                from .srm import parse_checked

                g = parse_checked(path, text, arrays, specs, outputs, metadata)
                _SLOT.__set__(self, g)
                self._source = None
        return g


def unparsed(path: str, text: str, arrays: dict, specs: tuple, outputs: tuple, metadata: dict, **fields: Any) -> FileModel:
    """A model whose graph is ``text``, parsed on first use with ``arrays`` (the file's mapped parameters)."""
    model = FileModel(_UNPARSED, dict(arrays), specs, outputs, dict(metadata), **fields)
    model._source = (path, text, arrays, specs, outputs, metadata)
    return model


def unparsed_text(model: Any) -> str | None:
    """The file's graph text if ``model``'s graph was never parsed (so cannot have been edited), else None."""
    if type(model) is not FileModel or _SLOT.__get__(model, Model) is not _UNPARSED:
        return None
    source = model._source
    return source[1] if source is not None else None

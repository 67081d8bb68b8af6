"""Reading one engine builder's options out of a segment's builder options.

Every engine builder of a module sees the same ``Options(engine_options={...})``. The
convention: top-level keys apply to every builder, a builder's own options go under its name
(``{"openvino": {"precision": "bf16"}}``) and win over the top-level ones, and any other
dict-valued top-level key is another builder's namespace, none of this builder's business.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import EngineOptionError, SrcoreError


def builder_options(options: Mapping[str, Any], namespace: str, known: Iterable[str], *,
                    error: type[SrcoreError] = EngineOptionError) -> dict[str, Any]:
    """The options of the builder named ``namespace`` among ``options`` (``Segment.options``):
    the top-level keys that are not other builders' namespaces, with those under
    ``options[namespace]`` over them.

    Raises ``error`` (:class:`srcore.EngineOptionError`: the load fails; pass
    :class:`srcore.EngineBuildError` to refuse the segment instead) naming the first key not in
    ``known``, where it was given and the closest known name, or a ``namespace`` entry that is
    not a dict. Values are the builder's to check.
    """
    known = tuple(known)
    own = options.get(namespace, {})
    if not isinstance(own, Mapping):
        raise error(f"engine option {namespace!r} must be a dict of {namespace} options, not {own!r}")
    top = {k: v for k, v in options.items() if k != namespace and (k in known or not isinstance(v, Mapping))}
    for key in (*top, *own):
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            where = f"engine_options[{namespace!r}]" if key in own else "engine_options"
            raise error(f"unknown {namespace} engine option {key!r}{hint} in {where}; known: {', '.join(known)} "
                        f"(options meant for another engine backend go under its name, "
                        f"engine_options={{'<backend>': {{...}}}})")
    return {**top, **own}

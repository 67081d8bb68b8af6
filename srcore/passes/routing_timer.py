"""How ``dense_routing`` decides a layer near its break-even: the load that runs the pass says, through
:data:`TIMER`, how to time the layer's two forms on the running machine (a pass knows no backend).

``None`` (a pass run outside a load, ``prepare_for_static_runtime``): the static bound decides;
:data:`KEEP_ROUTED`: leave every layer routed (the load that times the routed form itself); else a
callable ``timer(layer) -> bool`` (True: the dense form), given a :class:`dense_routing.RoutingLayer`.
``srcore.runtime.routing_choice`` is the load's timer.
"""
from __future__ import annotations

import contextvars

#: the timer of the load running the passes (see the module docstring)
TIMER: contextvars.ContextVar = contextvars.ContextVar("srcore_routing_timer", default=None)
#: a ``TIMER`` value: no layer is made dense (the routed form of a timing trial)
KEEP_ROUTED = "keep routed"

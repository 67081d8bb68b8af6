"""The shape-rule table propagation reads: op name -> rule, with the plugin that gave it.

The registry fills it from every plugin's ``srcore_shape_rules()`` records (the
core's own rules come through the same hook, from the builtin plugin); a rule
given as a ``"module:attribute"`` string is imported the first time a node of
its op is propagated.

It lives outside ``srcore.ops.shapes`` (which re-exports it as ``srcore.ops.shapes.table``): a registry
holds one without importing the propagation machinery, which a load of a model saved prepared with its
types does not run (``srcore.runtime.prepared``).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import attrs

from .._repr import shared_repr
from ..errors import PluginError
from ..ir.names import base_op as base_name


@attrs.define(eq=False)
@shared_repr
class RuleEntry:
    """One op name's rule: ``fn(ctx) -> list`` (imported on first use) and who provided it."""

    op: str
    ref: Any  # a callable or a "module:attr" string
    provider: Any = None  # srcore.plugin.PluginInfo (None: an unregistered rule, in tests)
    _fn: Callable[..., Any] | None = attrs.field(default=None, alias="_fn")

    @property
    def fn(self) -> Callable[..., Any]:
        fn = self._fn
        if fn is None:
            if isinstance(self.ref, str):
                from ..dispatch.lazy import import_ref

                try:
                    fn = import_ref(self.ref)
                except Exception as exc:  # ImportError, AttributeError, or the module's own error
                    raise PluginError(f"{self.who}: cannot import the shape rule {self.ref!r} of {self.op}: "
                                      f"{type(exc).__name__}: {exc}") from exc
            else:
                fn = self.ref
            if not callable(fn):
                raise PluginError(f"{self.who}: the shape rule {self.ref!r} of {self.op} is not callable")
            self._fn = fn
        return fn

    @property
    def is_core(self) -> bool:
        return self.provider is None or self.provider.name == "builtin"

    @property
    def who(self) -> str:
        p = self.provider
        return f"plugin {p.name} ({p})" if p is not None else "an unregistered shape rule"


@attrs.define
@shared_repr
class ShapeRuleTable:
    """Rules by qualified overload name, base name or namespace (``"ns::*"``); :meth:`lookup` tries them
    in that order."""

    _rules: dict[str, RuleEntry] = attrs.field(factory=dict, alias="_rules")

    def add(self, op: str, ref: Any, provider: Any = None) -> RuleEntry | None:
        """Add a rule for ``op``; returns the entry already there instead if ``op`` has one."""
        old = self._rules.get(op)
        if old is not None:
            return old
        self._rules[op] = RuleEntry(op, ref, provider)
        return None

    def lookup(self, qualified: str) -> RuleEntry | None:
        """The rule of the overload, else of its base name, else its namespace's (``"ns::*"``)."""
        entry = self._rules.get(qualified)
        if entry is None:
            entry = self._rules.get(base_name(qualified))
        if entry is None:  # an alias (aten::absolute) has the rule of the op it names (srcore/ops/aliases.yaml)
            from .aliases import canonical

            base = base_name(qualified)
            target = canonical(base)
            if target != base:
                entry = self.lookup(target + qualified[len(base):])
        if entry is None and "::" in qualified:  # a namespace's generic rule, last
            entry = self._rules.get(qualified.split("::", 1)[0] + "::*")
        return entry

    def get(self, op: str) -> RuleEntry | None:
        """The entry registered under exactly ``op``."""
        return self._rules.get(op)

    def names(self) -> Iterable[str]:
        return self._rules.keys()

    def __contains__(self, op: object) -> bool:
        return op in self._rules

    def __iter__(self) -> Iterator[RuleEntry]:
        return iter(self._rules.values())

    def __len__(self) -> int:
        return len(self._rules)


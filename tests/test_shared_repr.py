"""srcore._repr.fields_repr prints an attrs class exactly as attrs' generated __repr__ does.

The reference is attrs itself: each case declares the same class twice, once with attrs' own repr and
once with ``@shared_repr``, and compares the text of equal instances."""
import attrs
import pytest

from srcore._repr import fields_repr, shared_repr

pytestmark = pytest.mark.one_pass


def _twins(body: dict, **opts):
    """The same attrs class with attrs' repr and with the shared one (body: name -> attrs.field)."""
    plain = attrs.make_class("Rec", dict(body), **opts)
    ns = {"__repr__": fields_repr}
    shared = attrs.define(type("Rec", (), ns), these=dict(body), **opts)
    assert shared.__repr__ is fields_repr and plain.__repr__ is not fields_repr
    return plain, shared


@pytest.mark.parametrize("opts", [dict(frozen=True, slots=True), dict(slots=False), dict(eq=False)])
def test_same_text_as_attrs(opts):
    body = {"a": attrs.field(), "b": attrs.field(default=(1, "x")), "hidden": attrs.field(default=3, repr=False),
            "custom": attrs.field(default=2.5, repr=lambda v: f"<{v:.1f}>"), "s": attrs.field(default="q'\"")}
    plain, shared = _twins(body, **opts)
    for args in [(None,), ([1, 2], ("t",), 0, 1.0, "")]:
        assert repr(shared(*args)) == repr(plain(*args))


def test_unset_init_false_field_and_nesting():
    body = {"a": attrs.field(), "later": attrs.field(init=False)}
    plain, shared = _twins(body, slots=True)
    assert repr(shared(1)) == repr(plain(1)) == "Rec(a=1, later=NOTHING)"
    assert repr(shared(plain(2))) == repr(plain(shared(2))) == "Rec(a=Rec(a=2, later=NOTHING), later=NOTHING)"


def test_cycle_prints_ellipsis_like_attrs():
    plain, shared = _twins({"items": attrs.field()}, slots=True)
    p, s = plain([]), shared([])
    p.items.append(p)
    s.items.append(s)
    assert repr(s) == repr(p) == "Rec(items=[...])"


def test_decorator_on_core_records_and_local_qualname():
    from srcore.plugin.types import Kernel, PluginInfo

    def make():
        @attrs.frozen
        @shared_repr
        class Local:
            x: int = 1

        @attrs.frozen
        class Reference:
            x: int = 1
        return Local, Reference

    local, reference = make()
    assert repr(local()) == "Local(x=1)" and repr(reference()) == "Reference(x=1)"
    assert Kernel.__repr__ is fields_repr
    info = PluginInfo("cpu", "srcore-cpu", "1.0")
    assert repr(info) == "PluginInfo(name='cpu', dist='srcore-cpu', version='1.0')"

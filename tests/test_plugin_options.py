"""srcore.plugin.builder_options: one builder's options out of a segment's, by the namespace convention
(top level for every builder, the builder's own under its name and winning, other dicts ignored)."""
import pytest
from hypothesis import given, settings, strategies as st

import srcore
from srcore.plugin import builder_options

pytestmark = pytest.mark.one_pass

KNOWN = ("alpha", "beta", "gamma")
keys = st.sampled_from(KNOWN)
values = st.one_of(st.integers(), st.booleans(), st.text(max_size=3), st.none())


@settings(max_examples=40, deadline=None)
@given(top=st.dictionaries(keys, values), own=st.dictionaries(keys, values),
       others=st.dictionaries(st.sampled_from(("openvino", "trt_like", "zz")), st.dictionaries(st.text(), values)))
def test_own_keys_win_over_the_top_level_and_other_namespaces_are_ignored(top, own, others):
    opts = {**others, **top, "me": own}
    got = builder_options(opts, "me", KNOWN)
    assert got == {**top, **own}                    # independent of the order the dict was written in
    assert builder_options({**top}, "me", KNOWN) == top


@pytest.mark.parametrize("opts, message", [
    ({"alpah": 1}, "unknown me engine option 'alpah' (did you mean 'alpha'?) in engine_options; known: alpha, beta"),
    ({"me": {"bta": 1}}, "unknown me engine option 'bta' (did you mean 'beta'?) in engine_options['me']"),
    ({"zzzzzz": 1}, "unknown me engine option 'zzzzzz' in engine_options; known:"),
    ({"me": 3}, "engine option 'me' must be a dict of me options, not 3"),
])
@pytest.mark.parametrize("error", [srcore.EngineOptionError, srcore.EngineBuildError])
def test_unknown_keys_raise_the_requested_error_naming_the_key(opts, message, error):
    with pytest.raises(error) as e:
        builder_options(opts, "me", KNOWN, error=error)
    assert message in str(e.value)


def test_a_known_key_with_a_dict_value_is_the_builders_not_a_namespace():
    assert builder_options({"alpha": {"x": 1}, "other": {"y": 2}}, "me", KNOWN) == {"alpha": {"x": 1}}

"""srcore._fastjson (the load path's JSON without importing ``json``) against ``json`` itself."""
from __future__ import annotations

import json
import math

import pytest

from srcore._fastjson import canonical, loads

pytestmark = pytest.mark.one_pass

VALUES = [
    {"b": 1, "a": [1, 2.5, -0.0, 1e300, 5e-324, -17, 2**70, None, True, False], "c": {"z": {}, "y": []}},
    {"text": "x\u00e9\n\"\\\t\u2603\U0001f600", "": "", "\u00fc": 1},
    [], {}, "str\u2603", 3, 1.5, None, True, [[[]]], {"k": [float("inf"), float("-inf")]},
]


@pytest.mark.parametrize("value", VALUES)
def test_canonical_is_jsons_sorted_compact_ascii_dump(value):
    assert canonical(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("dump", [json.dumps, lambda v: json.dumps(v, indent=2, ensure_ascii=False) + "\n "])
def test_loads_reads_what_json_reads(value, dump):
    text = dump(value)
    assert json.dumps(loads(text)) == json.dumps(json.loads(text))
    assert json.dumps(loads(text.encode("utf-8"))) == json.dumps(json.loads(text))


def test_nan_and_constants_as_json():
    assert math.isnan(loads('{"a": NaN}')["a"]) and loads("[Infinity, -Infinity]") == [math.inf, -math.inf]


@pytest.mark.parametrize("bad", ["", "  ", "{", "[1,]", "{} x", "nul", '{"a":1}}', '"\\x"', "[1 2]", '{"a" 1}'])
def test_bad_text_raises_jsons_error(bad):
    with pytest.raises(json.JSONDecodeError) as ref:
        json.loads(bad)
    with pytest.raises(ValueError) as got:
        loads(bad)
    assert str(got.value) == str(ref.value)


def test_what_json_cannot_encode_is_a_type_error():
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        canonical({"a": {1, 2}})
    with pytest.raises(TypeError):
        loads(3)

"""``canonical_json`` (orjson where it writes the same text) equals the plain way: the standard
library's ``json.dumps(data, separators=(",", ":"), sort_keys=True)``."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tapis_service.stores.checksums import canonical_json

SEEDED = settings(max_examples=400, deadline=None, derandomize=True, database=None)

SCALARS = (st.none() | st.booleans() | st.integers() | st.text()
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.integers(min_value=-2**70, max_value=2**70))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)
ASCII_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**63, max_value=2**64 - 1)
    | st.text(st.characters(max_codepoint=126)),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(st.characters(max_codepoint=126), max_size=6), inner, max_size=4),
    max_leaves=20)


def plain(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


@SEEDED
@given(st.dictionaries(st.text(max_size=6), VALUES, max_size=5))
def test_canonical_json_is_the_standard_librarys_text(data: dict[str, Any]) -> None:
    assert canonical_json(data) == plain(data)


@SEEDED
@given(st.dictionaries(st.text(st.characters(max_codepoint=126), max_size=6), ASCII_VALUES,
                       max_size=5))
def test_ascii_data_is_written_by_orjson_as_the_standard_library_would(
        data: dict[str, Any]) -> None:
    """The fast path itself, on what a journal entry is made of: orjson's text is the
    standard library's."""
    assert orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode() == plain(data)
    assert canonical_json(data) == plain(data)


def test_what_orjson_writes_differently_or_refuses_is_written_by_the_standard_library() -> None:
    for data in ({"name": "Zoé"}, {"big": 2**64}, {"nested": [{"deep": "ü"}]}, {"s": "\ud800"},
                 {"del": "\x7f"}, {"\x7f": 1}):
        assert canonical_json(data) == plain(data)
    assert canonical_json({"name": "Zoé"}) == '{"name":"Zo\\u00e9"}'


def test_a_journal_entry() -> None:
    entry = {"now_ms": 1_700_000_000_000, "request_id": "r-1",
             "input": {"input": "Act", "seat": 1, "action": {"kind": "reveal"}}}
    assert canonical_json(entry) == ('{"input":{"action":{"kind":"reveal"},"input":"Act",'
                                     '"seat":1},"now_ms":1700000000000,"request_id":"r-1"}')

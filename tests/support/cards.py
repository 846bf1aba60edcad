"""Cards written as text in the tests, and the cards inside a view or an event."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any

from tapis_engine.cards import Card, parse_card


def cards(*texts: str) -> tuple[Card, ...]:
    """``cards("5H 7S")`` or ``cards("5H", "7S")``: the cards, in the order written."""
    return tuple(parse_card(word) for text in texts for word in text.split())


def cards_in(value: Any) -> Iterator[Card]:
    """Every card inside a view or event (dataclasses, tuples, lists, dicts)."""
    if isinstance(value, Card):
        yield value
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from cards_in(getattr(value, f.name))
    elif isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            yield from cards_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from cards_in(item)

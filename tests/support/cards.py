"""Cards written as text in the tests."""

from __future__ import annotations

from tapis_engine.cards import Card, parse_card


def cards(*texts: str) -> tuple[Card, ...]:
    """``cards("5H 7S")`` or ``cards("5H", "7S")``: the cards, in the order written."""
    return tuple(parse_card(word) for text in texts for word in text.split())

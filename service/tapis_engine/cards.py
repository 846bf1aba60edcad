"""Playing cards: ranks, suits, decks and their compact text form ("10H", "AS", "JK")."""

from __future__ import annotations

from typing import NamedTuple

TWO, THREE, FOUR, FIVE, SIX, SEVEN, EIGHT, NINE, TEN = range(2, 11)
JACK, QUEEN, KING, ACE, JOKER = 11, 12, 13, 14, 15

SUITS = ("C", "D", "H", "S")
"""Clubs, diamonds, hearts, spades. Jokers have the suit ``"*"``."""
JOKER_SUIT = "*"

RANK_NAMES = {2: "2", 3: "3", 4: "4", 5: "5", 6: "6", 7: "7", 8: "8", 9: "9", 10: "10",
              JACK: "J", QUEEN: "Q", KING: "K", ACE: "A", JOKER: "JK"}
_NAME_TO_RANK = {name: rank for rank, name in RANK_NAMES.items()}


class Card(NamedTuple):
    """A card: rank 2..14 (ace high), 15 for a joker; suit one of ``SUITS`` or ``"*"``."""

    rank: int
    suit: str

    def __str__(self) -> str:
        if self.rank == JOKER:
            return "JK"
        return RANK_NAMES[self.rank] + self.suit

    @property
    def is_joker(self) -> bool:
        return self.rank == JOKER


_STANDARD = tuple(Card(rank, suit) for suit in SUITS for rank in range(TWO, ACE + 1))
_JOKER = Card(JOKER, JOKER_SUIT)
_CANONICAL: dict[tuple[int, str], Card] = {c: c for c in (*_STANDARD, _JOKER)}


def card(rank: int, suit: str) -> Card:
    """The card ``(rank, suit)``, as the one instance every deck shares (a game moves its cards
    from tuple to tuple on every move: shared cards stay in the processor's cache, where 52
    fresh ones per table would not). Equal to ``Card(rank, suit)`` in every way."""
    found = _CANONICAL.get((rank, suit))
    return found if found is not None else Card(rank, suit)


def parse_card(text: str) -> Card:
    """Parse the compact form (``"10H"``, ``"AS"``, ``"JK"``); raise ValueError if malformed."""
    text = text.strip().upper()
    if text in ("JK", "JOKER"):
        return _JOKER
    rank_name, suit = text[:-1], text[-1:]
    if suit not in SUITS or rank_name not in _NAME_TO_RANK or rank_name == "JK":
        raise ValueError(f"not a card: {text!r}")
    return card(_NAME_TO_RANK[rank_name], suit)


def cards_to_text(cards: tuple[Card, ...] | list[Card]) -> list[str]:
    """Encode cards for snapshots."""
    return [str(card) for card in cards]


def cards_from_text(texts: list[str]) -> tuple[Card, ...]:
    """Decode cards from snapshots."""
    return tuple(parse_card(text) for text in texts)


def standard_deck() -> tuple[Card, ...]:
    """The 52 cards, in a fixed order (by suit, then rank)."""
    return _STANDARD


def deck_with_jokers() -> tuple[Card, ...]:
    """The 52 cards and two jokers."""
    return (*_STANDARD, _JOKER, _JOKER)


def piquet_deck() -> tuple[Card, ...]:
    """The 32 cards from 7 to ace in each suit."""
    return tuple(c for c in _STANDARD if c.rank >= SEVEN)


def same_cards(a: tuple[Card, ...] | list[Card], b: tuple[Card, ...] | list[Card]) -> bool:
    """Whether two card collections hold the same multiset of cards."""
    return sorted(a) == sorted(b)

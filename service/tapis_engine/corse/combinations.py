"""The six slap combinations of Bataille Corse (RULES.md §2), judged on face-up cards only.

The newest card is always part of the combination. Callers pass the face-up cards flipped since
the pile was last taken, oldest first: face-down penalty cards never count.
"""

from __future__ import annotations

from collections.abc import Sequence

from tapis_engine.cards import ACE, SEVEN, TEN, Card

DOUBLE = "double"
SANDWICH = "sandwich"
BIG_MAC = "big_mac"
SUITE = "suite"
TEN_SUM = "ten"
SEVEN_TOP = "seven"

ALL_COMBINATIONS: tuple[str, ...] = (DOUBLE, SANDWICH, BIG_MAC, SUITE, TEN_SUM, SEVEN_TOP)
"""Every combination, in the order they are reported when several show at once."""


def number_value(card: Card) -> int | None:
    """The value of a number card for the ten (A counts 1); None for J, Q, K and jokers."""
    if card.rank <= TEN:
        return card.rank
    if card.rank == ACE:
        return 1
    return None


def matches(name: str, face_up: Sequence[Card]) -> bool:
    """Whether combination ``name`` shows on ``face_up`` (oldest first, newest last)."""
    count = len(face_up)
    if count == 0:
        return False
    top = face_up[-1].rank
    if name == SEVEN_TOP:
        return top == SEVEN
    if name == DOUBLE:
        return count >= 2 and face_up[-2].rank == top
    if name == SANDWICH:
        return count >= 3 and face_up[-3].rank == top
    if name == BIG_MAC:
        return count >= 4 and face_up[-4].rank == top
    if name == SUITE:
        # Ranks run 2..10, J, Q, K, A, Joker as 2..15: consecutive means one apart (no A-2 wrap).
        return count >= 2 and abs(face_up[-2].rank - top) == 1
    if name == TEN_SUM:
        if count < 2:
            return False
        first, second = number_value(face_up[-2]), number_value(face_up[-1])
        return first is not None and second is not None and first + second == 10
    raise ValueError(f"not a combination: {name!r}")


def find_combination(face_up: Sequence[Card], enabled: frozenset[str]) -> str | None:
    """The first enabled combination (in ``ALL_COMBINATIONS`` order) showing, or None."""
    if not face_up:
        return None
    for name in ALL_COMBINATIONS:
        if name in enabled and matches(name, face_up):
            return name
    return None

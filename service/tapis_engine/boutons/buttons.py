"""Button bookkeeping: the deal, and counting buttons in each place."""

from __future__ import annotations

from tapis_engine.boutons.state import (
    ALL_COLOURS,
    BUTTONS_PER_COLOUR,
    NO_BUTTONS,
    BoutonsState,
    Counts,
    colours_in_play,
)


def deal(seats: int) -> tuple[Counts, ...]:
    """Deal 4 buttons of each colour in play colour by colour, round-robin from seat 0.

    Every player gets 8 buttons: 2 of each of 4 colours (2 players), 8 of 6 colours spread
    2-2-2-1-1 (3 players), or 1 of each of 8 colours (4 players).
    """
    hands = [[0] * len(ALL_COLOURS) for _ in range(seats)]
    dealt = 0
    for colour in range(len(colours_in_play(seats))):
        for _ in range(BUTTONS_PER_COLOUR):
            hands[dealt % seats][colour] += 1
            dealt += 1
    return tuple(tuple(hand) for hand in hands)


def add(a: Counts, b: Counts) -> Counts:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def with_count(counts: Counts, colour: int, delta: int) -> Counts:
    """``counts`` with ``delta`` added to ``colour``."""
    out = list(counts)
    out[colour] += delta
    return tuple(out)


def on_cards(state: BoutonsState) -> int:
    """Buttons on all the laid-out cards."""
    return sum(sum(card) for seat_cards in state.cards for card in seat_cards)


def total(state: BoutonsState) -> int:
    """Every button of the game: players, cards, centre and reserve (a constant)."""
    return sum(sum(hand) for hand in state.hands) + on_cards(state) + state.centre + state.reserve


def empty_cards(seats: int) -> tuple[tuple[Counts, ...], ...]:
    return tuple((NO_BUTTONS,) * 4 for _ in range(seats))

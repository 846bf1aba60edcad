"""Deal scoring (RULES.md §4): 30 for strictly the most cards, 10♦ 3 (Iraqi 6), 2♣ 2, each ace
1, each jack 1, each basra 10 (Iraqi 5). A deal holds 43 points (Iraqi 46) plus the basras,
13 (Iraqi 16) plus the basras when no side has strictly the most cards."""

from __future__ import annotations

from tapis_engine.basra.captures import TEN_OF_DIAMONDS, TWO_OF_CLUBS
from tapis_engine.basra.state import IRAQI, SideScore, seats_of_side
from tapis_engine.cards import ACE, JACK, Card

MOST_CARDS_POINTS = 30


def ten_of_diamonds_points(variant: str) -> int:
    """The 10♦ (mishtara): 3 points, 6 in the Iraqi variant."""
    return 6 if variant == IRAQI else 3


def basra_points(variant: str) -> int:
    """A basra: 10 points, 5 in the Iraqi variant."""
    return 5 if variant == IRAQI else 10


def score_deal(seats: int, variant: str, playing_sides: tuple[int, ...],
               captured: tuple[tuple[Card, ...], ...], basras: tuple[int, ...],
               scores: tuple[int, ...]) -> tuple[tuple[SideScore, ...], tuple[int, ...]]:
    """The score sheet lines of the sides that played, and the new game totals per side."""
    counts = {side: len(captured[side]) for side in playing_sides}
    top = max(counts.values())
    leaders = [side for side, count in counts.items() if count == top]
    most = leaders[0] if len(leaders) == 1 else None
    ten = ten_of_diamonds_points(variant)
    per_basra = basra_points(variant)
    totals = list(scores)
    lines = []
    for side in playing_sides:
        pile = captured[side]
        most_cards = MOST_CARDS_POINTS if side == most else 0
        ten_d = ten if TEN_OF_DIAMONDS in pile else 0
        two_c = 2 if TWO_OF_CLUBS in pile else 0
        aces = sum(1 for card in pile if card.rank == ACE)
        jacks = sum(1 for card in pile if card.rank == JACK)
        bpoints = basras[side] * per_basra
        points = most_cards + ten_d + two_c + aces + jacks + bpoints
        totals[side] += points
        lines.append(SideScore(side=side, seats=seats_of_side(seats, side), cards=len(pile),
                               most_cards=most_cards, ten_of_diamonds=ten_d, two_of_clubs=two_c,
                               aces=aces, jacks=jacks, basras=basras[side],
                               basra_points=bpoints, points=points, total=totals[side]))
    return tuple(lines), tuple(totals)

"""Server bots: "random" (uniform over the legal actions) and "heuristic" (product-minded bets).

Both see only the seat's view. Flips are forced, so only bets involve a choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TypeVar

from tapis_engine import rng
from tapis_engine.boutons.state import COLOUR_INDEX, RESERVE_INDEX, Bet, BoutonsView

A = TypeVar("A")

FLIPPED_IN_ROUND = 2 / 3
"""The chance that a given card of deck B comes before the second of its two black aces."""


def random_action(actions: Sequence[A], seed: int) -> A:
    """A legal action drawn uniformly with a PRNG seeded by ``seed`` (fresh for every call)."""
    index, _ = rng.below(seed & rng.MASK64, len(actions))
    return actions[index]


@lru_cache(maxsize=4096)
def expected_pile(mine: int, at_stake: int, chance: float) -> float:
    """E[max(mine + X, 1)] with X ~ Binomial(at_stake, chance): a pile's expected factor.

    An empty pile counts 1 in the product (it is left out), as does a lone button.
    """
    total = 0.0
    p_k = (1 - chance) ** at_stake
    for k in range(at_stake + 1):
        total += p_k * max(mine + k, 1)
        if k < at_stake:
            p_k *= (at_stake - k) / (k + 1) * chance / (1 - chance)
    return total


def heuristic_action(view: BoutonsView, seat: int, actions: Sequence[A]) -> A:
    """Bet the colour that costs the least expected product score.

    The model: every button on the table (all laid-out cards and the centre) reaches this seat
    with the same chance, that its card comes out this round (2/3) and that this seat flips it
    (1/players); colours are independent, so the expected score is the product of each colour's
    expected pile. Betting a button of colour c moves it from the hand to the table, which only
    changes c's factor: the bot picks the colour keeping the highest ratio. Lone buttons are cheap
    to bet unless many of their colour are at stake (a pile of 1 may grow to 2).
    """
    if not isinstance(actions[0], Bet):
        return actions[0]
    chance = FLIPPED_IN_ROUND / view.seats
    stake = [0] * len(view.hands[seat])
    for seat_cards in view.laid_out:
        for laid in seat_cards:
            for colour, count in enumerate(laid.buttons):
                stake[colour] += count
    stake[RESERVE_INDEX] += view.centre
    hand = view.hands[seat]
    best = actions[0]
    best_ratio = -1.0
    for action in actions:
        assert isinstance(action, Bet)
        colour = COLOUR_INDEX[action.colour]
        ratio = (expected_pile(hand[colour] - 1, stake[colour] + 1, chance)
                 / expected_pile(hand[colour], stake[colour], chance))
        if ratio > best_ratio + 1e-12:
            best, best_ratio = action, ratio
    return best

"""Server bots: "random" (uniform over the legal actions) and "heuristic" (product-minded bets).

Both see only the seat's view. Flips are forced, so only bets involve a choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from tapis_engine import rng
from tapis_engine.boutons.state import COLOUR_INDEX, Bet, BoutonsView

A = TypeVar("A")


def random_action(actions: Sequence[A], seed: int) -> A:
    """A legal action drawn uniformly with a PRNG seeded by ``seed``."""
    index, _ = rng.below(rng.derive(seed), len(actions))
    return actions[index]


def bet_cost(count: int) -> float:
    """How much of the product score a player keeps after betting one of ``count`` buttons.

    The score multiplies the sizes of the non-empty piles, so a lone button is worth nothing (its
    pile counts 1): betting it keeps the whole product. Otherwise the product shrinks by
    ``(count - 1) / count``, least for the biggest pile.
    """
    return 1.0 if count <= 1 else (count - 1) / count


def heuristic_action(view: BoutonsView, seat: int, actions: Sequence[A]) -> A:
    """Bet the button whose loss costs the least product (lone buttons, then the biggest pile).

    A bet is lost to whoever flips the card's twin, usually another player, so the bot bets as if
    the button were gone. Among equal colours it spreads bets over the cards in order.
    """
    hand = view.hands[seat]
    best = actions[0]
    best_keep = -1.0
    for action in actions:
        if not isinstance(action, Bet):
            return action
        keep = bet_cost(hand[COLOUR_INDEX[action.colour]])
        if keep > best_keep:
            best, best_keep = action, keep
    return best

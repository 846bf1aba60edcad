"""The product score: buttons grouped by colour, the sizes of non-empty groups multiplied."""

from __future__ import annotations

from collections.abc import Sequence

from tapis_engine.boutons.state import Counts


def product_score(hand: Counts) -> int:
    """3 red, 2 blue, 2 green, 1 grey → 12; no buttons at all → 0."""
    score = 0
    for count in hand:
        if count:
            score = count if score == 0 else score * count
    return score


def winners(scores: Sequence[int]) -> tuple[int, ...]:
    """Every seat sharing the highest score (a shared win)."""
    best = max(scores)
    return tuple(seat for seat, score in enumerate(scores) if score == best)

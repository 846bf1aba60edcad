"""Basra server bots. They see only what their seat sees: its view (own hand, floor, counts) and
the cards captured so far this deal (every capture is a public event).

* ``heuristic`` (default): points taken now (cards, 10♦, 2♣, aces, jacks, basras), minus the
  chance of leaving the next player a basra (over the cards it has not seen), minus a cost for
  spending a jack or the 7♦ on a small floor, minus point cards given away when laying a card.
* ``random``: uniform over the legal actions (chosen in ``BasraRules.bot_action``).
"""

from __future__ import annotations

from collections.abc import Sequence

from tapis_engine.basra.captures import (
    SEVEN_OF_DIAMONDS,
    basra_how,
    capture_points,
    takes_all,
)
from tapis_engine.basra.scoring import basra_points, ten_of_diamonds_points
from tapis_engine.basra.state import LEBANESE, BasraOptions, BasraView, PlayCard
from tapis_engine.cards import JACK, Card, standard_deck

STRATEGIES: tuple[str, ...] = ("heuristic", "random")

CARD_WEIGHT = 0.25
"""What one more captured card is worth (towards the 30 points for the most cards)."""
JACK_KEEP = 3.5
"""What keeping a jack for a bigger floor is worth (less what the floor holds now)."""
SEVEN_KEEP = 2.0
"""What keeping the 7♦ for a sweep is worth."""


def _unseen_by_rank(view: BasraView, seen: tuple[Card, ...]) -> dict[Card, int]:
    """One representative unseen card per sweeping kind (rank, the 7♦ apart) and its count."""
    known = set(view.hand or ()) | set(view.floor) | set(seen)
    out: dict[Card, int] = {}
    representative: dict[tuple[int, bool], Card] = {}
    for card in standard_deck():
        if card in known:
            continue
        key = (card.rank, card == SEVEN_OF_DIAMONDS)
        rep = representative.setdefault(key, card)
        out[rep] = out.get(rep, 0) + 1
    return out


def _sweep_chance(view: BasraView, options: BasraOptions, floor: tuple[Card, ...],
                  unseen: dict[Card, int], next_hand: int) -> float:
    """Rough chance that the next player can make a basra on ``floor``."""
    if not floor or not unseen:
        return 0.0
    total = sum(unseen.values())
    lebanese = options.variant == LEBANESE
    sweeping = 0
    for card, count in unseen.items():
        if lebanese:
            hit = len(floor) == 1 and floor[0].rank == card.rank
        elif card.rank == JACK:
            hit = basra_how(options, card, floor, ()) is not None
        else:
            hit = takes_all(card, floor, True)
        if hit:
            sweeping += count
    return min(1.0, sweeping * max(next_hand, 1) / total)


def heuristic(view: BasraView, legal: Sequence[PlayCard], seen: tuple[Card, ...]) -> PlayCard:
    """The legal action with the best immediate value (the first on ties)."""
    options = BasraOptions(view.variant, view.two_card_jack_basra, view.target)
    ten = ten_of_diamonds_points(view.variant)
    per_basra = basra_points(view.variant)
    unseen = _unseen_by_rank(view, seen)
    seat = view.seat if view.seat is not None else 0
    order = [s for s in view.playing if s > seat] + [s for s in view.playing if s <= seat]
    next_hand = view.hand_sizes[order[0]] if order else 0
    floor = view.floor
    best: PlayCard | None = None
    best_score = float("-inf")
    for action in legal:
        card = action.card
        taken = action.capture or ()
        if taken:
            remaining = tuple(c for c in floor if c not in taken)
            score = capture_points((*taken, card), ten) + CARD_WEIGHT * (len(taken) + 1)
            how = basra_how(options, card, floor, remaining)
            if how is not None:
                score += per_basra
            elif card.rank == JACK:
                score -= max(0.0, JACK_KEEP - capture_points(taken, ten) - 0.5 * len(taken))
            elif card == SEVEN_OF_DIAMONDS and view.variant != LEBANESE:
                score -= SEVEN_KEEP
        else:
            remaining = (*floor, card)
            score = -capture_points((card,), ten) - CARD_WEIGHT
            if card.rank == JACK or card == SEVEN_OF_DIAMONDS:
                score -= JACK_KEEP
        score -= per_basra * _sweep_chance(view, options, remaining, unseen, next_hand)
        if score > best_score:
            best, best_score = action, score
    assert best is not None
    return best

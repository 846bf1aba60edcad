"""Basra (RULES.md §4): the rules, its capture search, scoring and bots."""

from __future__ import annotations

from tapis_engine.basra.rules import BasraRules
from tapis_engine.basra.state import (
    IRAQI,
    LEBANESE,
    BasraOptions,
    BasraState,
    BasraView,
    PlayCard,
)
from tapis_engine.cards import Card, standard_deck
from tapis_engine.descriptor import GameDescriptor

RULES: BasraRules = BasraRules()
MAX_STACKED_DEALS = 64
"""A stacked deck holds the 52 cards once per deal, for at most this many deals."""


def _hand(state: BasraState, seat: int) -> tuple[Card, ...]:
    return state.hands[seat]


GAME: GameDescriptor = GameDescriptor(
    rules=RULES, title="Basra", max_stacked_cards=len(standard_deck()) * MAX_STACKED_DEALS,
    short_options=BasraOptions(), private_cards=_hand,
    variants=(("lebanese", BasraOptions(variant=LEBANESE)),
              ("iraqi", BasraOptions(variant=IRAQI)),
              ("jack-basra", BasraOptions(two_card_jack_basra=True))))

__all__ = ["GAME", "MAX_STACKED_DEALS", "RULES", "BasraOptions", "BasraRules", "BasraState",
           "BasraView", "PlayCard"]

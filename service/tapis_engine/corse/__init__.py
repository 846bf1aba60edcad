"""Bataille Corse (RULES.md §2): the engine's rules object and its data types."""

from __future__ import annotations

from tapis_engine.cards import deck_with_jokers
from tapis_engine.corse.rules import CorseRules
from tapis_engine.corse.state import (
    CardFlipped,
    ChallengePassed,
    ChallengeStarted,
    CorseEnded,
    CorseOptions,
    CorseState,
    CorseView,
    Dealt,
    Eliminated,
    FalseSlap,
    Flip,
    OutForGood,
    PileWon,
    Reentered,
    Slap,
)
from tapis_engine.descriptor import GameDescriptor

RULES: CorseRules = CorseRules()
GAME: GameDescriptor = GameDescriptor(
    rules=RULES, title="Bataille Corse", max_stacked_cards=len(deck_with_jokers()),
    short_options=CorseOptions(flip_cap=300), rate_limited_actions=frozenset({Slap}),
    probed_events=frozenset({PileWon}), routine_action=Flip())

__all__ = [
    "GAME",
    "RULES",
    "CardFlipped",
    "ChallengePassed",
    "ChallengeStarted",
    "CorseEnded",
    "CorseOptions",
    "CorseRules",
    "CorseState",
    "CorseView",
    "Dealt",
    "Eliminated",
    "FalseSlap",
    "Flip",
    "OutForGood",
    "PileWon",
    "Reentered",
    "Slap",
]

"""Bataille Corse (RULES.md §2): the engine's rules object and its data types."""

from __future__ import annotations

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

RULES = CorseRules()

__all__ = [
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

"""Basra (RULES.md §4): the rules, its capture search, scoring and bots."""

from __future__ import annotations

from tapis_engine.basra.rules import BasraRules
from tapis_engine.basra.state import BasraOptions, BasraState, BasraView, PlayCard

RULES = BasraRules()

__all__ = ["RULES", "BasraOptions", "BasraRules", "BasraState", "BasraView", "PlayCard"]

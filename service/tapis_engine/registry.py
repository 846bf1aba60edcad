"""The game kinds the engine knows, by their stable identifier."""

from __future__ import annotations

from typing import Any

from tapis_engine.basra import RULES as BASRA
from tapis_engine.boutons import RULES as BOUTONS
from tapis_engine.corse import RULES as CORSE
from tapis_engine.protocol import Rules
from tapis_engine.war import RULES as WAR

_ALL: tuple[Rules[Any, Any, Any], ...] = (WAR, CORSE, BOUTONS, BASRA)
GAMES: dict[str, Rules[Any, Any, Any]] = {rules.kind: rules for rules in _ALL}


def rules_for(kind: str) -> Rules[Any, Any, Any] | None:
    """The rules of ``kind``, or None when there is no such game."""
    return GAMES.get(kind)

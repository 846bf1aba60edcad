"""The game kinds the engine knows, by their stable identifier."""

from __future__ import annotations

from typing import Any

from tapis_engine.protocol import Rules
from tapis_engine.war import RULES as WAR

GAMES: dict[str, Rules[Any, Any, Any]] = {WAR.kind: WAR}


def rules_for(kind: str) -> Rules[Any, Any, Any] | None:
    """The rules of ``kind``, or None when that game is not built."""
    return GAMES.get(kind)

"""The game kinds the engine knows, by their stable identifier."""

from __future__ import annotations

import importlib
from typing import Any

from tapis_engine.protocol import Rules

_MODULES = ("tapis_engine.war", "tapis_engine.corse", "tapis_engine.boutons",
            "tapis_engine.basra")


def _load() -> dict[str, Rules[Any, Any, Any]]:
    games: dict[str, Rules[Any, Any, Any]] = {}
    for name in _MODULES:
        try:
            rules = importlib.import_module(name).RULES
        except (ImportError, AttributeError):  # a game not built yet
            continue
        games[rules.kind] = rules
    return games


GAMES: dict[str, Rules[Any, Any, Any]] = _load()


def rules_for(kind: str) -> Rules[Any, Any, Any] | None:
    """The rules of ``kind``, or None when that game is not built."""
    return GAMES.get(kind)

"""The games the engine knows: the one place a game is registered (one line per game)."""

from __future__ import annotations

from typing import Any

from tapis_engine import basra, boutons, corse, war
from tapis_engine.descriptor import GameDescriptor
from tapis_engine.protocol import Rules

DESCRIPTORS: tuple[GameDescriptor, ...] = (
    war.GAME,
    corse.GAME,
    boutons.GAME,
    basra.GAME,
)
"""Every game, in the order of the contract's ``GameKind``."""
BY_KIND: dict[str, GameDescriptor] = {game.kind: game for game in DESCRIPTORS}
GAMES: dict[str, Rules[Any, Any, Any]] = {game.kind: game.rules for game in DESCRIPTORS}
"""The rules of every game, by kind."""


def rules_for(kind: str) -> Rules[Any, Any, Any] | None:
    """The rules of ``kind``, or None when there is no such game."""
    return GAMES.get(kind)


def descriptor_for(kind: str) -> GameDescriptor:
    """The descriptor of a registered game (``KeyError`` for an unknown kind)."""
    return BY_KIND[kind]

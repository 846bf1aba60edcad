"""The games the clients know: one ``ClientGame`` per game, declared in the game's own module
(its screen, its menu, its lines, its bot strategy) and listed here once. Everything else in
the clients (the CLI, the bot, the screens' generic parts) reads this list."""

from __future__ import annotations

from tapis.v1 import game_service_pb2 as pb
from tapis_clients.game import ClientGame
from tapis_clients.games import basra, boutons, corse, war

GAMES: tuple[ClientGame, ...] = (war.GAME, corse.GAME, boutons.GAME, basra.GAME)
"""Every game, in the order the contract numbers them."""

_BY_KIND = {game.kind: game for game in GAMES}
KINDS: dict[str, pb.GameKind.ValueType] = {
    command: game.kind for game in GAMES for command in game.commands}
"""Each name the command line takes -> its game kind."""


def by_kind(kind: int) -> ClientGame:
    """The game of a kind (KeyError for a kind these clients do not know)."""
    return _BY_KIND[kind]  # type: ignore[index]


def by_command(name: str) -> ClientGame:
    return by_kind(KINDS[name])


def command_name(kind: int) -> str:
    """The kind as the command line takes it (``bataille-corse``)."""
    game = _BY_KIND.get(kind)  # type: ignore[call-overload]
    return game.commands[0] if game is not None else pb.GameKind.Name(kind).lower()  # type: ignore[arg-type]


def title(kind: int) -> str:
    game = _BY_KIND.get(kind)  # type: ignore[call-overload]
    return game.title if game is not None else command_name(kind)

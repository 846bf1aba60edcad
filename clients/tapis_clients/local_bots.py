"""Computer players that the CLI plays itself, in its own process: those of a table that an
earlier `tapis play` created for a game of reflexes (then the server's bots all answered after
0.6 s, too fast for a person), remembered with the person's seat and brought back with it by
`tapis join`. `tapis play` now seats the server's bots, which react like a person, at the
reaction time ``--bot-speed`` asks for (``CreateGameRequest.bot_reaction_ms``)."""

from __future__ import annotations

import asyncio
import contextlib
import random

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games
from tapis_clients.bot import BotStyle, SeatBot, Stats
from tapis_clients.connection import Connection


async def _next_game(conn: Connection, game_id: str, token: str) -> None:
    """Wait until the table starts its next game (someone chose to go on)."""
    view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id), token)).game
    if view.status != pb.GAME_STATUS_GAME_OVER:
        return
    async for event in conn.events(game_id, view.last_sequence, token):
        if event.WhichOneof("body") == "game_started":
            return


async def _play(conn: Connection, game_id: str, seat: int, token: str, reaction_ms: int,
                kind: int) -> None:
    rng = random.Random(f"{game_id}:{seat}")
    strategy = games.by_kind(kind).strategy(rng)
    while True:
        bot = SeatBot(conn, game_id, seat, token, strategy, rng, BotStyle(reaction_ms), Stats())
        await bot.play()
        await _next_game(conn, game_id, token)


class LocalBots:
    """The CLI's computer players at one table, running until ``stop``."""

    def __init__(self, conn: Connection, game_id: str, kind: int, seats: list[list[object]],
                 reaction_ms: int) -> None:
        self.tasks = [asyncio.ensure_future(_play(conn, game_id, int(str(seat)), str(token),
                                                  reaction_ms, kind))
                      for seat, token in seats]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

"""In open mode, the keyless budgets are shared fairly among the addresses asking (issue 36.5):
while one address floods ListGames, JoinGame or CreateGame (a call every millisecond, twenty
times the server-wide rate), a second address calling twice a second still gets at least half
of its calls answered. On a manual clock, through the game API with each call's address; the
same flood without the per-address share (``keyless_address_share=0``) starves the second
address, which shows the share is what protects it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_engine.war import WarOptions
from tapis_service.door.caller import Caller
from tapis_service.game_api import GameApi
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tapis_service.tables.host import GameHost
from tests.support.server import TEST_SETTINGS

FLOODER = Caller(peer="ipv4:203.0.113.7:40000")
SECOND = Caller(peer="ipv4:198.51.100.2:50000")
SECONDS = 5
SECOND_EVERY_MS = 500
"""The second address calls twice a second."""
SETTINGS = replace(TEST_SETTINGS, create_rate_per_s=0.0,  # no per-address create limit: the
                   keyless_create_rate_per_s=50.0, keyless_create_burst=100,  # share alone
                   join_rate_per_s=50.0, join_burst=100, list_rate_per_s=50.0, list_burst=100)
"""Each keyless budget 50 a second with a burst of 100; the flood is 1,000 a second."""

@dataclass
class Scene:
    """The game API of a server on a manual clock, and tables with seats to join."""

    api: GameApi
    tables: list[str]


Call = Callable[[Scene, Caller, int], Awaitable[Any]]
"""One call from an address (the int: how many it made before)."""


async def answered(call: Call, scene: Scene, caller: Caller, number: int) -> bool:
    """Whether the call was answered (any refusal but RATE_LIMITED is an answer too)."""
    try:
        await call(scene, caller, number)
    except ServiceError as error:
        return error.reason != "RATE_LIMITED"
    return True


async def second_address_share(call: Call, share: float, flood: Call | None = None) -> float:
    """The part of its calls the second address gets answered while the first floods."""
    clock = ManualClock()
    host = GameHost(replace(SETTINGS, keyless_address_share=share), clock)
    scene = Scene(GameApi(host), [
        (await host.create("war", 2, 1, 0, [None, None], WarOptions(target_points=10), None,
                           None)).game_id for _ in range(SECONDS * 1000 // SECOND_EVERY_MS)])
    mine = []
    for ms in range(SECONDS * 1000):
        await answered(flood or call, scene, FLOODER, ms)  # the flood comes first each time
        if ms % SECOND_EVERY_MS == 0:
            mine.append(await answered(call, scene, SECOND, ms // SECOND_EVERY_MS))
        clock.advance(1)
    await host.close()
    return sum(mine) / len(mine)


async def list_games(scene: Scene, caller: Caller, _: int) -> Any:
    return await scene.api.list_games(pb.ListGamesRequest(), caller)


async def join_game(scene: Scene, caller: Caller, number: int) -> Any:
    return await scene.api.join_game(pb.JoinGameRequest(game_id=scene.tables[number]), caller)


async def join_missing(scene: Scene, caller: Caller, _: int) -> Any:
    """The flood's joins: past the limits, a table that is not there (NOT_FOUND)."""
    return await scene.api.join_game(pb.JoinGameRequest(game_id="0" * 16), caller)


async def create_game(scene: Scene, caller: Caller, _: int) -> Any:
    return await scene.api.create_game(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seats=2),
                                       caller)


CASES = {"ListGames": (list_games, None), "JoinGame": (join_game, join_missing),
         "CreateGame": (create_game, None)}


@pytest.mark.parametrize("method", list(CASES))
async def test_one_address_flooding_leaves_a_second_address_at_least_half(
        method: str) -> None:
    call, flood = CASES[method]
    assert await second_address_share(call, 0.25, flood) >= 0.5
    assert await second_address_share(call, 0.0, flood) < 0.5  # without the share: starved

"""ListGames says what GetGame says: the same status for every status a table can have, held
in memory and at rest (GAME_STATUS_SERIES_OVER included: the listing is built with the
series)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.sqlite_store import SqliteStore
from tests.support.calls import auth, person_seats
from tests.support.resting import REVEAL
from tests.support.server import Harness, ServerFactory
from tests.support.tables import live_of, resting_of

Build = Callable[[Harness], Awaitable[str]]


async def created(h: Harness, series_length: int = 0) -> str:
    answer = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, seat_configs=person_seats(2),
        war=war_pb2.WarOptions(target_points=1), series_length=series_length))
    return answer.game.game_id


async def joined(h: Harness, series_length: int = 0) -> tuple[str, list[str]]:
    game_id = await created(h, series_length)
    tokens = [(await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat))).seat_token
              for seat in (0, 1)]
    return game_id, tokens


async def played(h: Harness, series_length: int = 0) -> str:
    """A War to one point played to its end."""
    game_id, tokens = await joined(h, series_length)
    for _ in range(200):
        view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        if not view.awaiting_seats:
            return game_id
        await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                  metadata=auth(tokens[view.awaiting_seats[0]]))
    raise AssertionError("the game did not end")


async def waiting(h: Harness) -> str:
    return await created(h)


async def in_progress(h: Harness) -> str:
    return (await joined(h))[0]


async def game_over(h: Harness) -> str:
    return await played(h, series_length=2)


async def series_over(h: Harness) -> str:
    return await played(h, series_length=1)


async def abandoned(h: Harness) -> str:
    game_id = await in_progress(h)
    await h.host.actor.abandon(live_of(h.host)[game_id])
    return game_id


BUILDERS: dict[int, Build] = {
    pb.GAME_STATUS_WAITING_FOR_PLAYERS: waiting,
    pb.GAME_STATUS_IN_PROGRESS: in_progress,
    pb.GAME_STATUS_GAME_OVER: game_over,
    pb.GAME_STATUS_SERIES_OVER: series_over,
    pb.GAME_STATUS_ABANDONED: abandoned,
}
WITHOUT_A_VIEW = {pb.GAME_STATUS_UNSPECIFIED, pb.GAME_STATUS_QUARANTINED}
"""A quarantined table has no view: GetGame refuses it, ListGames says QUARANTINED
(tests/trust/test_quarantined_listing.py)."""


def test_every_status_has_a_table_here() -> None:
    assert set(BUILDERS) | WITHOUT_A_VIEW == set(pb.GameStatus.values())


async def statuses(h: Harness, tables: dict[int, str]) -> tuple[dict[int, int], dict[int, int]]:
    """Per status built: what ListGames says (first, so a resting table is not woken), then
    what GetGame says."""
    listed = {g.game_id: g.status for g in (await h.stub.ListGames(
        pb.ListGamesRequest(include_finished=True, page_size=50))).games}
    said = {status: listed[game_id] for status, game_id in tables.items()}
    got = {status: (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game.status
           for status, game_id in tables.items()}
    return said, got


async def test_list_games_says_get_game_s_status_in_memory_and_at_rest(
        make_server: ServerFactory, tmp_path: Path) -> None:
    h = await make_server(clock=ManualClock(), store=SqliteStore(tmp_path))
    tables = {status: await build(h) for status, build in BUILDERS.items()}
    listed, got = await statuses(h, tables)
    assert listed == got == {status: status for status in tables}
    assert h.host.shelf.rest_idle() + h.host.shelf.rest_idle() == 3  # the finished ones
    at_rest = {status for status, game_id in tables.items() if game_id in resting_of(h.host)}
    assert at_rest == {pb.GAME_STATUS_GAME_OVER, pb.GAME_STATUS_SERIES_OVER,
                       pb.GAME_STATUS_ABANDONED}
    listed, got = await statuses(h, tables)
    assert listed == got == {status: status for status in tables}

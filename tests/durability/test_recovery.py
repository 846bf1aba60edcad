"""Recovery in process: timers across a restart, snapshots refused cleanly, retention.

Each test runs a server on a SqliteStore in ``tmp_path``, stops it, and starts a new one on the
same directory (the restart), with a ManualClock so that time only moves when told to.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.clock import ManualClock
from tapis_service.recovery import RecoveryError
from tapis_service.server import RunningServer, create_server
from tapis_service.sqlite_store import FILE_NAME, SqliteStore
from tests.conftest import TEST_SETTINGS
from tests.durability.driver import all_events, auth, play, start_game

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))


class Restartable:
    """One server at a time on the same data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.running: RunningServer | None = None
        self.channel: grpc.aio.Channel | None = None

    async def start(self, clock: ManualClock, **settings: object) -> pb_grpc.GameServiceStub:
        config = replace(TEST_SETTINGS, store="sqlite", data_dir=self.data_dir,
                         **settings)  # type: ignore[arg-type]
        self.running = await create_server(config, clock=clock,
                                           store=SqliteStore(self.data_dir))
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.running.port}")
        return pb_grpc.GameServiceStub(self.channel)

    async def stop(self) -> None:
        if self.channel is not None:
            await self.channel.close()
        if self.running is not None:
            await self.running.stop(0)
        self.running = self.channel = None


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[Restartable]:
    servers = Restartable(tmp_path)
    yield servers
    await servers.stop()


async def war_between_people(stub: pb_grpc.GameServiceStub, turn_ms: int
                             ) -> tuple[str, list[str]]:
    created = await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, turn_time_limit_ms=turn_ms,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2,
        war=war_pb2.WarOptions(target_points=50)))
    game_id = created.game.game_id
    tokens = [(await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=s))).seat_token
              for s in (0, 1)]
    return game_id, tokens


async def view(stub: pb_grpc.GameServiceStub, game_id: str) -> pb.GameView:
    return (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game


async def test_a_timer_resumes_with_the_time_it_had_left(servers: Restartable) -> None:
    clock = ManualClock()
    stub = await servers.start(clock)
    game_id, _ = await war_between_people(stub, turn_ms=1000)
    before = await view(stub, game_id)
    clock.advance(300)
    await servers.stop()

    later = ManualClock(clock.now_ms() + 400)  # down for 400 ms: 300 ms are left
    stub = await servers.start(later)
    later.advance(0)
    assert (await view(stub, game_id)).version == before.version
    later.advance(299)
    assert (await view(stub, game_id)).version == before.version
    later.advance(1)
    after = await view(stub, game_id)
    assert after.version > before.version
    assert after.seats[before.awaiting_seats[0]].bot_controlled


async def test_a_timer_that_ran_out_while_down_fires_at_once_and_bots_go_on(
        servers: Restartable) -> None:
    clock = ManualClock()
    stub = await servers.start(clock)
    game_id, _ = await war_between_people(stub, turn_ms=1000)
    before = await view(stub, game_id)
    await servers.stop()

    later = ManualClock(clock.now_ms() + 60_000)
    stub = await servers.start(later)
    later.advance(0)
    after = await view(stub, game_id)
    assert after.version > before.version
    assert after.seats[before.awaiting_seats[0]].bot_controlled
    events = await all_events(stub, game_id, 0, after.last_sequence)
    assert [e.sequence for e in events] == list(range(1, after.last_sequence + 1))
    assert any(e.WhichOneof("body") == "seat_taken_over" for e in events)


async def finished_war(stub: pb_grpc.GameServiceStub, seed: int) -> str:
    game = await start_game(stub, "war", seed, war=war_pb2.WarOptions(target_points=3))
    while not await play(stub, game, random.Random(seed), 50):
        pass
    return game.game_id


async def test_finished_games_are_kept_up_to_the_retention_limit(servers: Restartable) -> None:
    clock = ManualClock()
    stub = await servers.start(clock, finished_retention=2)
    finished = [await finished_war(stub, seed) for seed in (1, 2, 3)]
    listed = await stub.ListGames(pb.ListGamesRequest(include_finished=True))
    assert {g.game_id for g in listed.games} == set(finished[1:])
    await servers.stop()
    stored = sqlite3.connect(servers.data_dir / FILE_NAME)
    assert {row[0] for row in stored.execute("SELECT game_id FROM games")} == set(finished[1:])
    assert stored.execute("SELECT COUNT(*) FROM journal WHERE game_id = ?",
                          (finished[0],)).fetchone()[0] == 0
    stored.close()

    stub = await servers.start(ManualClock(), finished_retention=1)
    listed = await stub.ListGames(pb.ListGamesRequest(include_finished=True))
    assert [g.game_id for g in listed.games] == [finished[2]]
    last = await view(stub, finished[2])
    events = await all_events(stub, finished[2], 0, last.last_sequence)  # a replay from 0
    assert [e.sequence for e in events] == list(range(1, last.last_sequence + 1))
    assert events[-1].WhichOneof("body") == "game_ended"


async def game_with_a_snapshot(servers: Restartable) -> str:
    stub = await servers.start(ManualClock(), snapshot_every=3)
    game_id, tokens = await war_between_people(stub, turn_ms=0)
    for _ in range(4):
        seat = (await view(stub, game_id)).awaiting_seats[0]
        await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                metadata=auth(tokens[seat]))
    await servers.stop()
    return game_id


def tamper(data_dir: Path, sql: str) -> None:
    stored = sqlite3.connect(data_dir / FILE_NAME)
    with stored:
        assert stored.execute(sql).rowcount == 1
    stored.close()


@pytest.mark.parametrize(("sql", "message"), [
    ("UPDATE snapshots SET format = 99", "snapshot format version 99 is unknown"),
    ("UPDATE snapshots SET data = substr(data, 1, 40)", "snapshot is corrupt"),
    ("UPDATE snapshots SET data = replace(data, '\"version\":3', '\"version\":4'), "
     "checksum = 'x'", "snapshot is corrupt"),
])
async def test_an_unknown_or_corrupt_snapshot_is_refused_with_a_clear_message(
        servers: Restartable, sql: str, message: str) -> None:
    game_id = await game_with_a_snapshot(servers)
    tamper(servers.data_dir, sql)
    with pytest.raises(RecoveryError, match=message) as refused:
        await servers.start(ManualClock())
    assert game_id in str(refused.value)


async def test_a_snapshot_the_replay_does_not_reproduce_is_refused(
        servers: Restartable) -> None:
    """Even with a matching checksum, a snapshot that disagrees with the journal is refused."""
    await game_with_a_snapshot(servers)
    stored = sqlite3.connect(servers.data_dir / FILE_NAME)
    text = stored.execute("SELECT data FROM snapshots").fetchone()[0]
    forged = text.replace('"next_sequence":', '"next_sequence":1', 1)
    from tapis_service.sqlite_store import checksum

    with stored:
        stored.execute("UPDATE snapshots SET data = ?, checksum = ?", (forged, checksum(forged)))
    stored.close()
    with pytest.raises(RecoveryError, match="differs from the replayed journal"):
        await servers.start(ManualClock())



async def test_a_retried_join_gets_the_same_seat_and_token_across_a_restart(
        servers: Restartable) -> None:
    stub = await servers.start(ManualClock())
    created = await stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seats=2))
    game_id = created.game.game_id
    first = await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, request_id="join-a-7f3c"))
    await servers.stop()
    stub = await servers.start(ManualClock())
    again = await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, request_id="join-a-7f3c"))
    assert (again.seat, again.seat_token) == (first.seat, first.seat_token)
    other = await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, request_id="join-b-91d2"))
    assert other.seat != first.seat
    mine = await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                              metadata=auth(again.seat_token))
    assert mine.game.your_seat == first.seat

"""Recovery in process: timers across a restart, snapshots refused cleanly, retention.

Each test runs a server on a SqliteStore in ``tmp_path``, stops it, and starts a new one on the
same directory (the restart), with a ManualClock so that time only moves when told to.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import structlog.testing

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.sqlite_store import FILE_NAME
from tapis_service.tables.ownership import Ownership
from tests.support.calls import auth, reason_of
from tests.support.damage import (
    FAILED_INSTALL,
    FailingInstall,
    fail_restoring,
    nest_journal_too_deep,
    nest_snapshot_too_deep,
)
from tests.support.driver import all_events, play, start_game
from tests.support.server import Restartable
from tests.support.tables import quarantined_of

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))


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


async def test_a_timer_resumes_with_a_whole_turn_after_a_restart(servers: Restartable) -> None:
    """Down 400 ms with 300 ms of the turn left: the turn timers stood still (docs/rulings.md),
    so the person awaited has a whole turn from the restart."""
    clock = ManualClock()
    stub = await servers.start(clock)
    game_id, _ = await war_between_people(stub, turn_ms=1000)
    before = await view(stub, game_id)
    clock.advance(300)
    await servers.stop()

    later = ManualClock(clock.now_ms() + 400)
    stub = await servers.start(later)
    later.advance(0)
    assert (await view(stub, game_id)).version == before.version
    later.advance(999)
    assert (await view(stub, game_id)).version == before.version
    later.advance(1)
    after = await view(stub, game_id)
    assert after.version > before.version
    assert after.seats[before.awaiting_seats[0]].bot_controlled


async def test_a_timer_that_ran_out_while_down_gets_a_whole_turn_and_bots_go_on(
        servers: Restartable) -> None:
    clock = ManualClock()
    stub = await servers.start(clock)
    game_id, _ = await war_between_people(stub, turn_ms=1000)
    before = await view(stub, game_id)
    await servers.stop()

    later = ManualClock(clock.now_ms() + 60_000)
    stub = await servers.start(later)
    later.advance(0)
    assert not (await view(stub, game_id)).seats[before.awaiting_seats[0]].bot_controlled
    later.advance(1000)
    after = await view(stub, game_id)
    assert after.version > before.version
    assert after.seats[before.awaiting_seats[0]].bot_controlled
    events = await all_events(stub, game_id, 0, after.last_sequence)
    assert [e.sequence for e in events] == list(range(1, after.last_sequence + 1))
    bodies = [e.WhichOneof("body") for e in events]
    assert bodies.index("turn_timers_resumed") < bodies.index("seat_taken_over")


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
    """``sql`` changes exactly one row. (Counted by ``total_changes``: ``journal`` is a view
    whose triggers change the row, and SQLite counts no row of a view in ``rowcount``.)"""
    stored = sqlite3.connect(data_dir / FILE_NAME)
    with stored:
        before = stored.total_changes
        stored.execute(sql)
        assert stored.total_changes - before == 1
    stored.close()


async def assert_quarantined_alone(servers: Restartable, game_id: str, message: str) -> None:
    """After a restart: that game is refused and listed as quarantined, with why in the log;
    every other game serves; the damaged records are left as they were."""
    before = dump(servers.data_dir)
    stub = await servers.start(ManualClock())
    assert servers.running is not None
    kind, why, owner = quarantined_of(servers.running.host)[game_id]
    assert owner == Ownership()  # created without a key: public, listed to anyone
    assert kind == "war" and message in why and game_id in why
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.GetGame(pb.GetGameRequest(game_id=game_id))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(refused.value) == "GAME_QUARANTINED"
    listed = {g.game_id: g for g in (await stub.ListGames(pb.ListGamesRequest())).games}
    assert listed[game_id].status == pb.GAME_STATUS_QUARANTINED
    assert listed[game_id].kind == pb.GAME_KIND_WAR
    others = [g for g in listed.values() if g.game_id != game_id]
    assert others, "the untouched game is served"
    for other in others:
        assert other.status == pb.GAME_STATUS_IN_PROGRESS
        await stub.GetGame(pb.GetGameRequest(game_id=other.game_id))
    await servers.stop()
    assert dump(servers.data_dir) == before


def dump(data_dir: Path) -> list[tuple[object, ...]]:
    stored = sqlite3.connect(data_dir / FILE_NAME)
    try:
        return [row for name in ("games", "journal", "snapshots")
                for row in stored.execute(f"SELECT * FROM {name} ORDER BY 1, 2")]
    finally:
        stored.close()


async def two_games_one_with_a_snapshot(servers: Restartable) -> str:
    """A game with a snapshot, and an untouched game beside it (the server is stopped)."""
    game_id = await game_with_a_snapshot(servers)
    stub = await servers.start(ManualClock())
    other, tokens = await war_between_people(stub, turn_ms=0)
    await stub.SubmitAction(pb.SubmitActionRequest(game_id=other, action=REVEAL),
                            metadata=auth(tokens[(await view(stub, other)).awaiting_seats[0]]))
    await servers.stop()
    return game_id


ONE_GAME = "game_id = (SELECT game_id FROM snapshots)"
"""The game with a snapshot (the other one has none)."""


@pytest.mark.parametrize(("sql", "message"), [
    ("UPDATE snapshots SET format = 99", "snapshot format version 99 is unknown"),
    ("UPDATE snapshots SET data = substr(data, 1, 40)", "snapshot is corrupt"),
    ("UPDATE snapshots SET data = replace(data, '\"version\":3', '\"version\":4'), "
     "checksum = 'x'", "snapshot is corrupt"),
    ("UPDATE journal SET entry = substr(entry, 1, 10) WHERE idx = 3 AND " + ONE_GAME,
     "not valid JSON"),
    ("UPDATE journal SET entry = '[1, 2]' WHERE idx = 2 AND " + ONE_GAME, "not a JSON object"),
    ("DELETE FROM journal WHERE idx = 2 AND " + ONE_GAME, "journal input 2 is missing"),
    ("UPDATE journal SET entry = replace(entry, '\"Act\"', '\"Flip\"') WHERE idx = 4 AND "
     + ONE_GAME,
     "malformed"),
    ("UPDATE games SET record = '{\"kind\": \"war\"}' WHERE " + ONE_GAME, "malformed"),
    # a record the engine refuses to create the table from (a RuleError, not a KeyError)
    ("UPDATE games SET record = json_set(record, '$.initial.turn_time_ms', -1) WHERE "
     + ONE_GAME, "the turn time limit cannot be negative"),
])
async def test_a_damaged_game_is_quarantined_and_every_other_game_serves(
        servers: Restartable, sql: str, message: str) -> None:
    game_id = await two_games_one_with_a_snapshot(servers)
    tamper(servers.data_dir, sql)
    await assert_quarantined_alone(servers, game_id, message)


async def test_a_snapshot_the_replay_does_not_reproduce_is_quarantined(
        servers: Restartable) -> None:
    """Even with a matching checksum, a snapshot that disagrees with the journal is refused."""
    game_id = await two_games_one_with_a_snapshot(servers)
    stored = sqlite3.connect(servers.data_dir / FILE_NAME)
    text = stored.execute("SELECT data FROM snapshots WHERE game_id = ?",
                          (game_id,)).fetchone()[0]
    forged = text.replace('"next_sequence":', '"next_sequence":1', 1)
    from tapis_service.stores.checksums import checksum

    with stored:
        stored.execute("UPDATE snapshots SET data = ?, checksum = ? WHERE game_id = ?",
                       (forged, checksum(forged), game_id))
    stored.close()
    await assert_quarantined_alone(servers, game_id, "differs from the replayed journal")


@pytest.mark.parametrize(("damage", "message"), [
    ("snapshot nested too deep", "RecursionError"),
    ("a bug restoring it", "RuntimeError: a bug met on this table only"),
])
async def test_a_game_restore_fails_on_unexpectedly_is_quarantined_and_the_server_starts(
        servers: Restartable, monkeypatch: pytest.MonkeyPatch, damage: str,
        message: str) -> None:
    """``restore`` raises something that is no ``RecoveryError`` for one game (damage nothing
    foresaw: a checksum-valid snapshot the JSON decoder cannot follow; or a bug): the start
    quarantines that game alone, its traceback logged, and serves the other."""
    game_id = await two_games_one_with_a_snapshot(servers)
    if damage == "a bug restoring it":
        fail_restoring(monkeypatch, game_id)
    else:
        nest_snapshot_too_deep(servers.data_dir, game_id)
    with structlog.testing.capture_logs() as logs:
        await assert_quarantined_alone(servers, game_id, message)
    failed = [line for line in logs if line["event"] == "game_rebuild_failed"]
    assert [line["game"] for line in failed] == [game_id]
    assert isinstance(failed[0]["exc_info"], BaseException)  # the traceback, for the operator
    assert [line["game"] for line in logs if line["event"] == "game_quarantined"] == [game_id]


async def test_a_journal_input_nested_too_deep_is_quarantined_and_the_server_starts(
        servers: Restartable) -> None:
    """A journal row the store cannot decode (valid JSON nested deeper than the decoder
    follows: RecursionError, not a ValueError) is damage like any undecodable row: that game
    alone is quarantined and the server starts."""
    await two_games_one_with_a_snapshot(servers)
    game_id = nest_journal_too_deep(servers.data_dir)
    await assert_quarantined_alone(servers, game_id, "is not valid JSON (nested too deep)")


@pytest.mark.parametrize("after_arming", [False, True], ids=["told", "armed"])
async def test_a_game_whose_install_fails_is_quarantined_and_the_server_starts(
        servers: Restartable, monkeypatch: pytest.MonkeyPatch, after_arming: bool) -> None:
    """A game restored faithfully whose install raises part way (a hook the host runs on a
    table read back, or its arming, deferred until every game is loaded): that game alone is
    quarantined, its traceback logged and nothing of it left installed (its turn timers
    cancelled), and the server starts, serving the other."""
    stub = await servers.start(ManualClock())
    damaged, _ = await war_between_people(stub, turn_ms=60_000)
    await war_between_people(stub, turn_ms=60_000)
    await servers.stop()
    failing = FailingInstall(damaged, after_arming)
    failing.at_start(monkeypatch)
    with structlog.testing.capture_logs() as logs:
        await assert_quarantined_alone(servers, damaged, FAILED_INSTALL)
    failing.assert_nothing_left(logs)
    assert bool(failing.armed) == after_arming


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

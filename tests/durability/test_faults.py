"""The commit path under faults other than a clean kill: a call cancelled mid-commit, a store
that refuses writes (injected, like a full disk), pipelined writes behind a refused one, and
request ids remembered for the table's whole life.

Faults are injected into the real SqliteStore through its failpoint (called by the writer just
before each COMMIT): it can hold the commit until the test releases it, or fail it as SQLite
fails on a full disk. Nothing here waits on wall-clock luck: the tests wait for the events they
expect (bounded by generous timeouts) and move a ManualClock by hand.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_engine import table as tbl
from tapis_engine.war import Reveal, WarOptions
from tapis_service.codec import wire
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tapis_service.stores.sqlite_store import FILE_NAME, SqliteStore
from tapis_service.tables.host import GameHost
from tests.support.calls import STREAM_DEADLINE_S, auth, person_seats, reason_of
from tests.support.server import TEST_SETTINGS, Harness, ServerFactory
from tests.support.tables import live_of

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
WAIT_S = 20.0


class Failpoint:
    """Awaited by the SqliteStore writer at each commit: a gate the test opens, and a switch that
    makes commits fail with SQLite's own full-disk error."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()
        self.failing = False
        self.failed = 0
        self.calls = 0

    async def __call__(self, where: str) -> None:
        self.calls += 1
        self.entered.set()
        await asyncio.wait_for(self.gate.wait(), WAIT_S)  # the test opens the gate
        if self.failing:
            self.failed += 1
            raise sqlite3.OperationalError("database or disk is full")

    async def wait_entered(self) -> None:
        await asyncio.wait_for(self.entered.wait(), WAIT_S)


@pytest.fixture
def failpoint() -> Failpoint:
    return Failpoint()


@pytest.fixture
async def durable(make_server: ServerFactory, tmp_path: Path,
                  failpoint: Failpoint) -> AsyncIterator[Harness]:
    """A server on a SQLite store whose commits pass ``failpoint``; readiness probes the store
    once, at start, and not again during the test (a probe is a write: one landing inside a
    test's gate would be the commit the test holds, not its action's)."""
    store = SqliteStore(tmp_path, synchronous="OFF", failpoint=failpoint)
    harness = await make_server(clock=ManualClock(), store=store, store_retry_ms=5,
                                probe_every_s=3600)
    while not failpoint.calls:  # readiness's first probe, through the failpoint
        await asyncio.sleep(0.001)
    failpoint.entered.clear()
    yield harness
    failpoint.failing = False
    failpoint.gate.set()


def journal(data_dir: Path, game_id: str) -> list[int]:
    stored = sqlite3.connect(data_dir / FILE_NAME)
    try:
        return [row[0] for row in stored.execute(
            "SELECT idx FROM journal WHERE game_id = ? ORDER BY idx", (game_id,))]
    finally:
        stored.close()


async def person_vs_bot(h: Harness) -> tuple[str, str]:
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seed=11, war=war_pb2.WarOptions(target_points=500),
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
    joined = await h.stub.JoinGame(pb.JoinGameRequest(game_id=created.game.game_id, seat=0))
    return created.game.game_id, joined.seat_token


async def two_people(h: Harness) -> tuple[str, list[str]]:
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seed=5, seat_configs=person_seats(2),
        war=war_pb2.WarOptions(target_points=500)))
    game_id = created.game.game_id
    tokens = [(await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=s))).seat_token
              for s in (0, 1)]
    return game_id, tokens


async def awaited(h: Harness, game_id: str) -> int:
    """The seat the table waits for."""
    return (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game.awaiting_seats[0]


async def next_events(stream: grpc.aio.UnaryStreamCall, until: int) -> list[pb.Event]:
    """Read a stream until it has delivered the event with sequence ``until``."""
    seen: list[pb.Event] = []
    async with asyncio.timeout(WAIT_S):
        while not seen or seen[-1].sequence < until:
            message = await stream.read()
            assert message is not grpc.aio.EOF
            seen.extend(message.events)
    return seen


async def health_status(h: Harness) -> int:
    health = health_pb2_grpc.HealthStub(h.channel)
    return (await health.Check(health_pb2.HealthCheckRequest())).status


async def wait_health(h: Harness, status: int) -> None:
    """Follow the health Watch stream until it reports ``status``."""
    health = health_pb2_grpc.HealthStub(h.channel)
    watch = health.Watch(health_pb2.HealthCheckRequest())
    async with asyncio.timeout(WAIT_S):
        async for answer in watch:
            if answer.status == status:
                break
    watch.cancel()


# --- a call cancelled while its input is being committed ---------------------------------------


async def test_a_call_cancelled_mid_commit_still_publishes_and_the_bot_moves_every_time(
        durable: Harness, failpoint: Failpoint) -> None:
    """The issue's reproduction, 50 times: the answer is lost, the game is not."""
    game_id, token = await person_vs_bot(durable)
    clock = durable.clock
    assert isinstance(clock, ManualClock)
    clock.advance(0)
    stream = durable.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                       timeout=STREAM_DEADLINE_S)
    view = (await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    await next_events(stream, view.last_sequence)
    for attempt in range(50):
        before = (await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert before.status == pb.GAME_STATUS_IN_PROGRESS, attempt
        assert 0 in before.awaiting_seats
        failpoint.entered.clear()
        failpoint.gate.clear()
        call = durable.stub.SubmitAction(
            pb.SubmitActionRequest(game_id=game_id, action=REVEAL,
                                   request_id=f"cancelled-{attempt}"),
            metadata=auth(token))
        await failpoint.wait_entered()  # the input is applied and its write is committing
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        failpoint.gate.set()
        # The person's reveal is published, and the bot (armed from the commit) answers it.
        seen = await next_events(stream, before.last_sequence + 1)
        assert seen[0].sequence == before.last_sequence + 1
        for _ in range(3):
            clock.advance(0)
            await asyncio.sleep(0)
        after = (await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        async with asyncio.timeout(WAIT_S):
            while 0 not in after.awaiting_seats and after.status == pb.GAME_STATUS_IN_PROGRESS:
                clock.advance(0)
                await asyncio.sleep(0.001)
                after = (await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert after.version >= before.version + 2, "the bot moved after the cancelled call"
        await next_events(stream, after.last_sequence)
        # A retry of the cancelled call gets the committed answer, not a second reveal.
        again = await durable.stub.SubmitAction(
            pb.SubmitActionRequest(game_id=game_id, action=REVEAL,
                                   request_id=f"cancelled-{attempt}"), metadata=auth(token))
        assert again.version == before.version + 1
    stream.cancel()


async def test_a_cancelled_submit_task_completes_its_commit_and_rearms_the_bot(
        tmp_path: Path, failpoint: Failpoint) -> None:
    """The same at the host: cancelling the awaiting task changes nothing of the input's fate."""
    clock = ManualClock()
    host = GameHost(TEST_SETTINGS, clock,
                    SqliteStore(tmp_path, synchronous="OFF", failpoint=failpoint))
    session = await host.create("war", 2, 3, 0, [None, "basic"], WarOptions(), None, None)
    await host.join(session.game_id, 0, "p")
    clock.advance(0)
    failpoint.gate.clear()
    task = asyncio.ensure_future(host.actor.submit(session, 0, tbl.Act(0, Reveal()), "r1", None))
    await failpoint.wait_entered()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert session.durable_sequence < session.last_sequence
    failpoint.gate.set()
    async with asyncio.timeout(WAIT_S):
        while session.writes or session.durable_sequence < session.last_sequence:
            await asyncio.sleep(0.001)
    assert session.published_sequence == session.last_sequence
    assert session.remembered(0, "r1") is not None
    assert session.bot_timers, "the bot is armed from the commit"
    await host.close()


# --- a store that refuses writes -----------------------------------------------------------


async def test_a_refused_write_answers_unavailable_and_the_retry_is_applied_once(
        durable: Harness, failpoint: Failpoint, tmp_path: Path) -> None:
    game_id, tokens = await two_people(durable)
    stream = durable.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                       timeout=STREAM_DEADLINE_S)
    for _ in range(4):
        await durable.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                        metadata=auth(tokens[await awaited(durable, game_id)]))
    before = (await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    await next_events(stream, before.last_sequence)
    failpoint.failing = True
    request = pb.SubmitActionRequest(game_id=game_id, action=REVEAL, request_id="disk-full-1")
    seat = before.awaiting_seats[0]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await durable.stub.SubmitAction(request, metadata=auth(tokens[seat]))
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason_of(refused.value) == "STORE_UNAVAILABLE"
    assert await health_status(durable) == health_pb2.HealthCheckResponse.NOT_SERVING
    # Nothing of it is in memory: the game answers UNAVAILABLE until it is rebuilt.
    with pytest.raises(grpc.aio.AioRpcError) as meanwhile:
        await durable.stub.SubmitAction(request, metadata=auth(tokens[seat]))
    assert meanwhile.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason_of(meanwhile.value) == "STORE_UNAVAILABLE"
    failpoint.failing = False
    await wait_health(durable, health_pb2.HealthCheckResponse.SERVING)
    first = await durable.stub.SubmitAction(request, metadata=auth(tokens[seat]))
    second = await durable.stub.SubmitAction(request, metadata=auth(tokens[seat]))
    assert first.version == second.version == before.version + 1
    assert [e.sequence for e in first.events] == [e.sequence for e in second.events]
    # The stream opened before the failure goes on, with no gap and no duplicate.
    after = (await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    seen = await next_events(stream, after.last_sequence)
    assert [e.sequence for e in seen] == list(range(before.last_sequence + 1,
                                                    after.last_sequence + 1))
    stream.cancel()
    assert journal(tmp_path, game_id) == list(range(1, 2 + 4 + 1 + 1))


async def test_writes_queued_behind_a_refused_one_are_refused_too_and_leave_no_hole(
        durable: Harness, failpoint: Failpoint, tmp_path: Path) -> None:
    game_id, tokens = await two_people(durable)
    first = await awaited(durable, game_id)
    order = (first, 1 - first)
    failpoint.gate.clear()
    failpoint.entered.clear()
    calls = [asyncio.ensure_future(durable.stub.SubmitAction(
        pb.SubmitActionRequest(game_id=game_id, action=REVEAL, request_id=f"queued-{first}"),
        metadata=auth(tokens[first])))]
    await failpoint.wait_entered()
    calls.append(asyncio.ensure_future(durable.stub.SubmitAction(
        pb.SubmitActionRequest(game_id=game_id, action=REVEAL,
                               request_id=f"queued-{1 - first}"),
        metadata=auth(tokens[1 - first]))))
    session = live_of(durable.host)[game_id]
    async with asyncio.timeout(WAIT_S):
        while len(session.writes) < 2:  # both reveals applied, both writes queued
            await asyncio.sleep(0.001)
    failpoint.failing = True
    failpoint.gate.set()
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert reason_of(refused.value) == "STORE_UNAVAILABLE"
    assert journal(tmp_path, game_id) == [1, 2]
    failpoint.failing = False
    await wait_health(durable, health_pb2.HealthCheckResponse.SERVING)
    versions = []
    for seat in order:
        answer = await durable.stub.SubmitAction(
            pb.SubmitActionRequest(game_id=game_id, action=REVEAL, request_id=f"queued-{seat}"),
            metadata=auth(tokens[seat]))
        versions.append(answer.version)
    assert versions == sorted(versions) and versions[1] == versions[0] + 1
    assert journal(tmp_path, game_id) == [1, 2, 3, 4]


async def test_a_refused_create_is_not_served_and_its_retry_creates_one_table(
        durable: Harness, failpoint: Failpoint) -> None:
    failpoint.failing = True
    request = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, request_id="create-on-full-disk")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await durable.stub.CreateGame(request)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason_of(refused.value) == "STORE_UNAVAILABLE"
    assert not (await durable.stub.ListGames(pb.ListGamesRequest())).games
    failpoint.failing = False
    await wait_health(durable, health_pb2.HealthCheckResponse.SERVING)
    first = await durable.stub.CreateGame(request)
    again = await durable.stub.CreateGame(request)
    assert first.game.game_id == again.game.game_id
    assert len((await durable.stub.ListGames(pb.ListGamesRequest())).games) == 1


async def test_the_store_refuses_a_hole_and_an_overwrite_without_failing_its_neighbours(
        tmp_path: Path) -> None:
    from tapis_service.stores.store import JournalConflict, StoreUnavailable

    store = SqliteStore(tmp_path, synchronous="OFF")
    await store.created("g", {"kind": "war"})
    results = await asyncio.gather(
        store.appended("g", 1, {"n": 1}),
        store.appended("g", 3, {"n": 3}),  # a hole: refused
        store.appended("g", 2, {"n": 2}),
        store.appended("g", 2, {"n": 22}),  # an overwrite: refused
        store.appended("h", 1, {"n": 1}),  # no creation record
        return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StoreUnavailable)
    assert isinstance(results[3], JournalConflict)
    assert isinstance(results[4], StoreUnavailable)
    stored = await store.load_game("g")
    assert stored is not None
    assert stored[2] == [{"n": 1}, {"n": 2}]
    store.close()


# --- request ids for the life of a table ------------------------------------------------------


async def test_a_retry_of_the_first_action_after_2000_more_gets_the_first_answer(
        tmp_path: Path) -> None:
    """Across a restart too: the ids come back from the journal."""
    clock = ManualClock()
    host = GameHost(TEST_SETTINGS, clock, SqliteStore(tmp_path, synchronous="OFF"))
    session = await host.create("war", 2, 9, 0, [None, None], WarOptions(target_points=10_000),
                                None, None)
    for seat in (0, 1):
        await host.join(session.game_id, seat, f"p{seat}")
    me = session.table.state.to_move  # the seat that moves first, and 2,000 times more
    first = await host.actor.submit(session, me, tbl.Act(me, Reveal()), "mine-0", None)
    made = 1
    while made < 2001:
        for seat in (me, 1 - me):
            session = await host.find(session.game_id)  # a finished game rests: loaded back
            move: tbl.Input = (tbl.NextGame(seat) if session.table.game_over(session.rules)
                               else tbl.Act(seat, Reveal()))
            try:
                await host.actor.submit(session, seat, move, f"seat{seat}-{made}", None)
            except ServiceError:
                continue  # not this seat's turn
            made += seat == me
    session = await host.find(session.game_id)
    version = session.table.version
    again = await host.actor.submit(session, me, tbl.Act(me, Reveal()), "mine-0", None)
    # as the caller gets it: the first game's events are compacted to bytes by now
    assert wire.answer_wire(session, again, me) == wire.answer_wire(session, first, me)
    assert session.table.version == version
    await host.close()

    restarted = GameHost(TEST_SETTINGS, clock, SqliteStore(tmp_path, synchronous="OFF"))
    await restarted.recover()
    reloaded = await restarted.find(session.game_id)
    after = await restarted.actor.submit(reloaded, me, tbl.Act(me, Reveal()), "mine-0", None)
    assert wire.answer_wire(reloaded, after, me) == \
        wire.answer_wire(session, first, me)
    assert reloaded.table.version == version
    await restarted.close()

"""What the PostgreSQL store says when a write fails: not applied (``StoreUnavailable``) when
the connection was gone before the commit was sent, in doubt (``CommitUnknown``) when it was
lost while the commit ran; each write of a batch gets its own outcome; a failed connection is
closed and never used again; and a server answers an in-doubt write ``COMMIT_UNKNOWN``, then
rebuilds the table from the store so that a retry with the same request id finds it.

Faults are injected at the writer's failpoint (awaited just before the statement that
commits) on a real embedded PostgreSQL: the test terminates the writer's backend there, or
holds the answer (the connection stops reading) until another connection sees the commit and
then cuts the connection. The tests wait for those events, never for time to pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import grpc
import pytest
import structlog.testing
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.postgres_store import PostgresStore
from tapis_service.stores.store import CommitUnknown, JournalConflict, StoreUnavailable
from tests.support.calls import auth, person_seats
from tests.support.server import ServerFactory
from tests.support.tables import live_of

WAIT_S = 30.0


async def until(condition: Callable[[], Any]) -> None:
    """Wait (bounded) until ``condition()`` (sync or async) holds: an event, not a delay."""
    async with asyncio.timeout(WAIT_S):
        while True:
            value = condition()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return
            await asyncio.sleep(0.001)


def closed(connection: asyncpg.Connection) -> bool:
    """The client has seen its connection end (a pool may have taken the proxy back)."""
    try:
        return connection.is_closed()
    except asyncpg.InterfaceError:
        return True


class Breaker:
    """The store's failpoint: at the commit stage, when armed for that call, breaks the
    writer's connection as asked."""

    def __init__(self, admin: asyncpg.Connection) -> None:
        self.admin = admin
        self.calls = 0
        self.at: set[int] = set()
        """The calls (1, 2, ...) at which to act."""
        self.action = "terminate"
        """``terminate`` (the backend, before the commit is sent), ``lose_answer`` (once the
        commit is visible to others), or ``fault`` (the writer's own code raises)."""
        self.committed: Callable[[], Any] = lambda: True
        """For ``lose_answer``: true once the commit is visible to another connection."""
        self.pids: list[int] = []
        self._cutters: list[asyncio.Future[None]] = []

    async def __call__(self, stage: str, connection: asyncpg.Connection) -> None:
        self.calls += 1
        self.pids.append(connection.get_server_pid())
        if self.calls not in self.at:
            return
        if self.action == "fault":
            raise RuntimeError("a fault of the writer's own")
        if self.action == "terminate":
            await self.admin.execute("SELECT pg_terminate_backend($1)",
                                     connection.get_server_pid())
            await until(lambda: closed(connection))
            return
        transport = connection._transport  # the answer stays unread until the cut
        transport.pause_reading()

        async def cut() -> None:
            await until(self.committed)
            transport.abort()
        self._cutters.append(asyncio.ensure_future(cut()))

    async def settle(self) -> None:
        await asyncio.gather(*self._cutters)


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(database_url)
    yield connection
    await connection.close()


@pytest.fixture
async def breaker(admin: asyncpg.Connection) -> Breaker:
    return Breaker(admin)


async def journal(admin: asyncpg.Connection, game_id: str) -> list[int]:
    rows = await admin.fetch("SELECT idx FROM journal WHERE game_id = $1 ORDER BY idx", game_id)
    return [row["idx"] for row in rows]


async def test_a_connection_lost_before_the_commit_is_unavailable_and_is_never_used_again(
        database_url: str, admin: asyncpg.Connection, breaker: Breaker) -> None:
    store = await PostgresStore.open(database_url, failpoint=breaker)
    rounds = 8  # more than the pool holds: each closed connection goes back to it
    for n in range(rounds):
        breaker.at = {breaker.calls + 1}
        outcomes = await asyncio.gather(store.created(f"g{n}", {"kind": "war"}),
                                        store.appended(f"g{n}", 1, {"i": 1}),
                                        return_exceptions=True)
        assert [type(o) for o in outcomes] == [StoreUnavailable, StoreUnavailable], outcomes
        assert "TypeError" not in str(outcomes[0])
    assert len(set(breaker.pids)) == rounds  # a fresh connection for each write
    assert await admin.fetchval("SELECT count(*) FROM games") == 0  # nothing kept
    await store.created("after", {"kind": "war"})
    await store.appended("after", 1, {"i": 1})
    assert await journal(admin, "after") == [1]
    await store.aclose()


@pytest.mark.parametrize("lone_insert", [False, True], ids=["transaction", "lone-insert"])
async def test_an_answer_lost_after_the_commit_is_commit_unknown_and_reading_says_applied(
        database_url: str, admin: asyncpg.Connection, breaker: Breaker,
        lone_insert: bool) -> None:
    store = await PostgresStore.open(database_url, failpoint=breaker)
    await store.created("warm", {"kind": "war"})
    await store.appended("warm", 1, {"i": 1})  # the INSERT is prepared on this connection
    if lone_insert:  # an append alone is one INSERT, its own transaction
        await store.created("g", {"kind": "war"})
        writes = [store.appended("g", 1, {"i": 1})]
    else:  # a create and an append: BEGIN, INSERT, INSERT, COMMIT
        writes = [store.created("g", {"kind": "war"}), store.appended("g", 1, {"i": 1})]
    breaker.action = "lose_answer"
    breaker.committed = lambda: journal(admin, "g")
    breaker.at = {breaker.calls + 1}
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    await breaker.settle()
    assert all(isinstance(o, CommitUnknown) for o in outcomes), outcomes
    with pytest.raises(JournalConflict):  # nothing more for the table until it is read again
        await store.appended("g", 2, {"i": 2})
    stored = await store.load_game("g")
    assert stored is not None and stored[2] == [{"i": 1}]  # it was applied
    await store.appended("g", 2, {"i": 2})  # and appends go on from what was read
    assert await journal(admin, "g") == [1, 2]
    assert len(set(breaker.pids)) == 2  # the cut connection was replaced
    await store.aclose()


@pytest.mark.parametrize(("action", "outcome", "behind"), [
    ("terminate", StoreUnavailable, StoreUnavailable),  # lost before c's commit: d never sent
    ("fault", CommitUnknown, CommitUnknown)])  # the writer cannot say what its fault did
async def test_a_batch_that_falls_back_to_one_by_one_fails_only_its_unwritten_writes(
        database_url: str, admin: asyncpg.Connection, breaker: Breaker, action: str,
        outcome: type[Exception], behind: type[Exception]) -> None:
    store = await PostgresStore.open(database_url, failpoint=breaker)
    for game_id in "abcd":
        await store.created(game_id, {"kind": "war"})
    await admin.execute("INSERT INTO journal VALUES ('b', 1, '{\"theirs\":true}')")
    breaker.action = action
    # The batch's INSERT is refused by b's key (call 1); then one by one: a (2), b (3), c (4).
    breaker.at = {breaker.calls + 4}
    outcomes = await asyncio.gather(*(store.appended(g, 1, {"i": 1}) for g in "abcd"),
                                    return_exceptions=True)
    assert outcomes[0] is None  # committed before the failure: never reported failed
    assert isinstance(outcomes[1], JournalConflict)
    assert type(outcomes[2]) is outcome
    assert type(outcomes[3]) is behind
    assert [await journal(admin, g) for g in "acd"] == [[1], [], []]
    await store.probe()  # the writer goes on, on a new connection
    assert breaker.pids[-1] != breaker.pids[-2]
    await store.aclose()


# --- a server on the store --------------------------------------------------------------------


def reason_of(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, "every refusal carries an ErrorInfo"
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return info.reason


async def test_a_server_answers_an_in_doubt_submit_commit_unknown_and_the_retry_finds_it(
        make_server: ServerFactory, database_url: str, admin: asyncpg.Connection,
        breaker: Breaker) -> None:
    store = await PostgresStore.open(database_url, failpoint=breaker)
    server = await make_server(clock=ManualClock(), store=store, store_retry_ms=1,
                               probe_every_s=3600)
    await until(lambda: breaker.calls >= 1)  # readiness's first probe: no other until the end
    stub = server.stub
    game_id = (await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, seat_configs=person_seats(2)))).game.game_id
    tokens = [(await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=s))).seat_token
              for s in range(2)]
    before = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    seat = before.awaiting_seats[0]
    view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                               metadata=auth(tokens[seat]))).game
    inputs = len(await journal(admin, game_id))
    breaker.action = "lose_answer"
    breaker.committed = lambda: admin.fetchval(
        "SELECT count(*) > $2 FROM journal WHERE game_id = $1", game_id, inputs)
    breaker.at = {breaker.calls + 1}
    request = pb.SubmitActionRequest(game_id=game_id, action=view.legal_actions[0],
                                     request_id="in-doubt")
    with structlog.testing.capture_logs() as lines, \
            pytest.raises(grpc.aio.AioRpcError) as in_doubt:
        await stub.SubmitAction(request, metadata=auth(tokens[seat]))
    assert in_doubt.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason_of(in_doubt.value) == "COMMIT_UNKNOWN"
    # the line says what the caller was told, once: in doubt, never applied
    told = [line for line in lines if line["event"].startswith("action_")
            or line["event"] == "refused"]
    assert [(line["event"], line["reason"]) for line in told] == [
        ("action_in_doubt", "COMMIT_UNKNOWN")], lines
    assert "may have been applied" in (in_doubt.value.details() or "")
    await breaker.settle()
    await until(lambda: game_id in live_of(server.host))  # rebuilt from the store
    answer = await stub.SubmitAction(request, metadata=auth(tokens[seat]))
    again = await stub.SubmitAction(request, metadata=auth(tokens[seat]))
    after = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    assert answer.version == again.version == after.version == before.version + 1
    assert len(await journal(admin, game_id)) == inputs + 1  # applied once


async def test_an_in_doubt_create_is_read_back_and_its_retry_gets_that_table(
        make_server: ServerFactory, database_url: str, admin: asyncpg.Connection,
        breaker: Breaker) -> None:
    store = await PostgresStore.open(database_url, failpoint=breaker)
    server = await make_server(clock=ManualClock(), store=store, store_retry_ms=1,
                               probe_every_s=3600)
    await until(lambda: breaker.calls >= 1)  # readiness's first probe: no other until the end
    breaker.action = "lose_answer"
    breaker.committed = lambda: admin.fetchval("SELECT count(*) FROM games")
    breaker.at = {breaker.calls + 1}
    request = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seats=2, seed=7,
                                   seat_configs=person_seats(2), request_id="create-in-doubt")
    with pytest.raises(grpc.aio.AioRpcError) as in_doubt:
        await server.stub.CreateGame(request)
    assert reason_of(in_doubt.value) == "COMMIT_UNKNOWN"
    await breaker.settle()
    stored = await admin.fetch("SELECT game_id FROM games")
    assert len(stored) == 1  # it was applied
    await until(lambda: stored[0]["game_id"] in live_of(server.host))  # read back
    retried = await server.stub.CreateGame(request)
    assert retried.game.game_id == stored[0]["game_id"]
    assert await admin.fetchval("SELECT count(*) FROM games") == 1


async def test_a_statement_that_times_out_is_in_doubt_and_its_connection_is_not_reused(
        database_url: str, admin: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timed-out statement is still running in the database when the client gives up (here
    it waits on a lock): it may be applied after the answer, so the answer is COMMIT_UNKNOWN.
    Its connection is closed: reused, asyncpg would fail "cannot switch to state 12; another
    operation is in progress" (seen when PostgreSQL stops)."""
    from tapis_service.stores import postgres_store

    monkeypatch.setattr(postgres_store, "COMMAND_TIMEOUT_S", 0.2)  # an injected short timer
    store = await PostgresStore.open(database_url)
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    locker = await asyncpg.connect(database_url)
    lock = locker.transaction()
    await lock.start()
    await locker.execute("LOCK TABLE journal IN ACCESS EXCLUSIVE MODE")  # the INSERT waits

    def running() -> Any:
        return admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND state = 'active' AND query LIKE 'INSERT INTO journal%'")

    with pytest.raises(CommitUnknown):
        await store.appended("g", 2, {"i": 2})
    await lock.rollback()  # the INSERT, if asyncpg's cancel did not reach it, goes on now
    await locker.close()
    await until(lambda: _none(running()))
    stored = await store.load_game("g")  # what was applied: either is a right outcome
    assert stored is not None and stored[2] in ([{"i": 1}], [{"i": 1}, {"i": 2}])
    following = len(stored[2]) + 1
    await store.appended("g", following, {"i": following})  # on a new connection
    assert await journal(admin, "g") == list(range(1, following + 1))
    await store.aclose()


async def _none(count: Any) -> bool:
    return await count == 0


async def test_every_transaction_is_timed_and_a_failed_one_is_counted(
        database_url: str, breaker: Breaker) -> None:
    from prometheus_client import REGISTRY, generate_latest

    def sample(name: str) -> float:
        return REGISTRY.get_sample_value(name, {"store": "postgres"}) or 0.0

    timed, failed = (sample("tapis_store_commit_seconds_count"),
                     sample("tapis_store_write_failures_total"))
    store = await PostgresStore.open(database_url, failpoint=breaker)
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    assert sample("tapis_store_commit_seconds_count") == timed + 2
    assert sample("tapis_store_write_failures_total") == failed
    breaker.at = {breaker.calls + 1}
    with pytest.raises(StoreUnavailable):
        await store.created("h", {"kind": "war"})
    assert sample("tapis_store_commit_seconds_count") == timed + 3
    assert sample("tapis_store_write_failures_total") == failed + 1
    text = generate_latest(REGISTRY).decode()
    assert 'tapis_store_commit_seconds_bucket{le="+Inf",store="postgres"}' in text
    await store.aclose()

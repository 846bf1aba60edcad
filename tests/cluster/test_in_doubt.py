"""Answers that know what they know: with the database away, a call that cannot be routed is
``STORE_UNAVAILABLE`` ("not applied") only when it cannot have been applied — a read; a write,
or a CreateGame retry, is ``COMMIT_UNKNOWN`` (an earlier attempt with its request id may have
committed), and its retry with the same id gets the committed answer once the database is back.
Every error asyncpg (or the socket, or a timeout) may raise maps to a status with a reason, never
UNKNOWN. The database's failures are injected into the directory's queries of nodes running in
this process; nothing is timed."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.stores.postgres_store import PostgresStore
from tapis_service.stores.store import StoreUnavailable
from tests.cluster.inprocess import Running, two_nodes
from tests.support.calls import person_seats, refusal
from tests.support.postgres import Postgres
from tests.support.tables import live_of

ERRORS: list[Callable[[], BaseException]] = [
    lambda: asyncpg.InternalClientError("cannot switch to state 12"),
    lambda: asyncpg.ProtocolError("unexpected message"),
    lambda: asyncpg.InterfaceError("connection is closed"),
    lambda: asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of "
                                                "operation"),
    lambda: asyncpg.CannotConnectNowError("the database system is starting up"),
    lambda: asyncpg.AdminShutdownError("terminating connection due to administrator command"),
    lambda: ConnectionRefusedError(111, "Connect call failed"),
    lambda: TimeoutError(),
]
"""What a query raises while PostgreSQL restarts, as seen in chaos runs and asyncpg's code."""


async def database_away(node: Running, monkeypatch: pytest.MonkeyPatch,
                        error: Callable[[], BaseException]) -> None:
    """The node's lease is out and every look in the directory fails with ``error``."""
    await node.node.cluster.membership.stopped()  # its renewals are the test's
    directory = node.node.cluster.directory

    async def failing(*_: Any) -> Any:
        raise error()

    for query in ("renew", "owner_of", "created_by", "holds", "live_members", "orphans"):
        monkeypatch.setattr(directory, query, failing)
    node.node.cluster.locator.lease_until = -math.inf


async def test_an_unroutable_write_is_in_doubt_a_read_unavailable_and_the_retry_answers(
        postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> None:
    async with two_nodes(postgres, store_retry_ms=50) as (_, a, b):
        created = await a.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2), request_id="create-1"))
        game_id = created.game.game_id
        join = pb.JoinGameRequest(game_id=game_id, display_name="Al", request_id="join-1")
        joined = await a.stub.JoinGame(join)
        for error in ERRORS:
            with monkeypatch.context() as patch:
                await database_away(a, patch, error)
                await database_away(b, patch, error)
                for stub in (a.stub, b.stub):  # held here, or to relay: the same answers
                    code, reason, _ = await refusal(stub.GetGame(pb.GetGameRequest(
                        game_id=game_id)))
                    assert (code, reason) == ("UNAVAILABLE", "STORE_UNAVAILABLE"), error()
                    code, reason, _ = await refusal(stub.JoinGame(join))
                    assert (code, reason) == ("UNAVAILABLE", "COMMIT_UNKNOWN"), error()
                code, reason, _ = await refusal(b.stub.CreateGame(pb.CreateGameRequest(
                    kind=pb.GAME_KIND_WAR, request_id="create-1")))
                assert (code, reason) == ("UNAVAILABLE", "COMMIT_UNKNOWN"), error()
                with pytest.raises(StoreUnavailable):  # the healer's and the shelf's check
                    await a.node.cluster.locator.owns(game_id, 1)
        # the database is back: the retries get the committed answers, applied once
        for stub in (b.stub, a.stub):
            assert await stub.JoinGame(join) == joined
            again = await stub.CreateGame(pb.CreateGameRequest(
                kind=pb.GAME_KIND_WAR, request_id="create-1"))
            assert again.game.game_id == game_id
        view = (await a.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert sum(seat.taken for seat in view.seats) == 1


async def test_a_write_for_a_table_awaiting_the_healer_is_in_doubt_until_it_is_rebuilt(
        postgres: Postgres) -> None:
    async with two_nodes(postgres, store_retry_ms=600_000) as (_, a, b):
        created = await a.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        join = pb.JoinGameRequest(game_id=game_id, display_name="Al", request_id="join-1")
        joined = await a.stub.JoinGame(join)
        host = a.node.host
        host.healing.store_failed(live_of(host)[game_id], StoreUnavailable("outage"))
        for stub in (a.stub, b.stub):  # its commit may have been the one cut short
            code, reason, _ = await refusal(stub.JoinGame(join))
            assert (code, reason) == ("UNAVAILABLE", "COMMIT_UNKNOWN")
            code, reason, _ = await refusal(stub.GetGame(pb.GetGameRequest(game_id=game_id)))
            assert (code, reason) == ("UNAVAILABLE", "STORE_UNAVAILABLE")
        host.healing.stop()
        await host.healing._rebuild(game_id)  # the database is back
        for stub in (a.stub, b.stub):
            assert await stub.JoinGame(join) == joined


async def test_a_load_the_database_cannot_answer_is_store_unavailable(
        database_url: str) -> None:
    store = await PostgresStore.open(database_url)
    await store.pool.close()
    with pytest.raises(StoreUnavailable):
        await store.load_game("gone")

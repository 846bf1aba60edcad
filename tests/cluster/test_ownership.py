"""A node serves a table only while the database confirms it owns it at its epoch: a table its
healer rebuilds after a PostgreSQL outage, one woken from rest, and one still waiting for the
healer when a lapse is rechecked are all checked first; one another node took meanwhile is not
served again (its reads are relayed to its owner) and its open streams end TABLE_MOVED with
where to resume, never stall. Nodes run in this process (``create_server``); the database's
ownership is moved by hand, as another node's takeover during the outage would."""

from __future__ import annotations

from dataclasses import replace

import asyncpg
import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.cluster import locator as locators
from tapis_service.cluster.directory import Owner
from tapis_service.stores.store import StoreUnavailable
from tests.cluster.harness import fetch, resume_point
from tests.cluster.inprocess import Running, judged_dead, two_nodes
from tests.support.calls import person_seats
from tests.support.postgres import Postgres
from tests.support.tables import live_of, resting_of, unavailable_of


async def move_to(url: str, game_id: str, node: Running) -> None:
    """Another node's takeover, as the database records it: owner and epoch moved on (and,
    by trigger, the takeover counted on the loser's row)."""
    await fetch(url, "UPDATE games SET owner = $2, epoch = epoch + 1 WHERE game_id = $1",
                game_id, node.node_id)


async def open_stream(stub: pb_grpc.GameServiceStub, game_id: str
                      ) -> tuple[grpc.aio.UnaryStreamCall, int]:
    """A stream from the start (a seat is claimed first: it has an event), and the last
    sequence of its first message."""
    await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, display_name="Al"))
    call = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id, after_sequence=0))
    first = await call.read()
    assert isinstance(first, pb.StreamEventsResponse)
    return call, first.events[-1].sequence


async def ended(call: grpc.aio.UnaryStreamCall) -> grpc.aio.AioRpcError:
    """How a stream ended (it must end with a refusal, not stall: the test's timeout)."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        while (await call.read()) is not grpc.aio.EOF:
            pass
    return caught.value


async def test_a_table_healed_after_an_outage_is_not_served_when_another_node_took_it(
        postgres: Postgres) -> None:
    async with two_nodes(postgres, store_retry_ms=50) as (url, a, b):
        created = await a.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        call, last = await open_stream(a.stub, game_id)
        session = live_of(a.node.host)[game_id]
        await a.node.cluster.membership.stopped()  # (a renewal of A's would see it first)
        await move_to(url, game_id, b)  # another node took it over ...
        # ... while A's write failed (PostgreSQL away): discarded, for the healer to rebuild
        a.node.host.healing.store_failed(session, StoreUnavailable("the database restarted"))
        assert game_id in unavailable_of(a.node.host)
        await b.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, display_name="Bea"))
        task = a.node.host.healing._task
        assert task is not None
        await task

        assert game_id not in live_of(a.node.host) and not unavailable_of(a.node.host)
        error = await ended(call)
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert resume_point(error) == ("TABLE_MOVED", str(last))
        through_a = (await a.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        through_b = (await b.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert through_a.version == through_b.version > created.game.version  # not stale


async def test_a_table_healed_while_still_owned_is_served_again_with_its_stream(
        postgres: Postgres) -> None:
    async with two_nodes(postgres, store_retry_ms=50) as (_, a, _b):
        created = await a.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        call, _ = await open_stream(a.stub, game_id)
        a.node.host.healing.store_failed(live_of(a.node.host)[game_id],
                                         StoreUnavailable("the database restarted"))
        task = a.node.host.healing._task
        assert task is not None
        await task
        assert live_of(a.node.host)[game_id].epoch == 1
        await a.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, display_name="Cy"))
        more = await call.read()  # the stream carried on
        assert isinstance(more, pb.StreamEventsResponse) and more.events
        call.cancel()


async def test_a_lapse_gives_up_a_table_awaiting_the_healer_and_ends_its_streams(
        postgres: Postgres) -> None:
    async with two_nodes(postgres, store_retry_ms=600_000) as (url, a, b):
        created = await a.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        call, last = await open_stream(a.stub, game_id)
        await a.node.cluster.membership.stopped()  # its renewals are the test's
        a.node.host.healing.store_failed(live_of(a.node.host)[game_id],
                                         StoreUnavailable("the database restarted"))
        # A's heartbeat stopped during the outage; B took the table over
        await move_to(url, game_id, b)
        await a.node.cluster.locator.renewal()  # reads the takeover: rechecks what A holds

        assert game_id not in unavailable_of(a.node.host)
        error = await ended(call)
        assert resume_point(error) == ("TABLE_MOVED", str(last))
        await b.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, display_name="Bea"))
        through_a = (await a.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        through_b = (await b.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert through_a.version == through_b.version > created.game.version + 1  # at B


async def test_a_table_woken_from_rest_is_confirmed_first(postgres: Postgres) -> None:
    async with two_nodes(postgres, store_retry_ms=50) as (url, a, b):
        games = []
        for _ in range(2):
            created = await a.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
            games.append(created.game.game_id)
            a.node.host.shelf.rest(live_of(a.node.host)[created.game.game_id])
        await a.node.host.store.settled()  # type: ignore[attr-defined]
        kept, moved = games
        await fetch(url, "UPDATE games SET epoch = 4 WHERE game_id = $1", kept)
        listed = a.node.host.tables.unlist_resting(kept)  # listed again at the new epoch
        a.node.host.tables.listed_at_rest(kept, replace(listed, epoch=4))
        await a.node.cluster.membership.stopped()  # (a renewal of A's would unlist it first)
        await move_to(url, moved, b)

        woken = await a.node.host.shelf.wake(kept)
        assert live_of(a.node.host)[kept] is woken and woken.epoch == 4  # its own epoch
        with pytest.raises(Exception) as caught:
            await a.node.host.shelf.wake(moved)
        assert getattr(caught.value, "reason", "") == "TABLE_MOVED"
        assert moved not in live_of(a.node.host) and moved not in resting_of(a.node.host)


async def test_a_table_at_rest_taken_over_across_a_lapse_is_confirmed_first(
        postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> None:
    async with two_nodes(postgres, store_retry_ms=50) as (url, a, b):
        created = await b.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
        game_id = created.game.game_id
        b.node.host.shelf.rest(live_of(b.node.host)[game_id])
        await b.node.host.store.settled()  # type: ignore[attr-defined]
        await a.node.cluster.membership.stopped()
        await judged_dead(a, b)  # B died
        locator = a.node.cluster.locator
        (orphan, listing), = await locator.directory.orphans(True, 10)
        assert orphan == game_id and listing is not None
        take_over = locator.directory.take_over

        async def across_a_lapse(game: str, seen: Owner) -> int | None:
            epoch = await take_over(game, seen)
            locator._lapses += 1  # A's membership lapsed meanwhile; B came back, took it
            await fetch(url, "UPDATE games SET owner = $2, epoch = epoch + 1 "
                        "WHERE game_id = $1", game, b.node_id)
            return epoch

        monkeypatch.setattr(locator.directory, "take_over", across_a_lapse)
        assert await locator.adopt_resting(game_id, listing)
        assert game_id not in resting_of(a.node.host)  # never listed as A's


async def test_a_renewal_after_a_lost_answer_rechecks_what_the_node_holds(
        postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> None:
    """A paused and B took A's table over; A's next renewal read the takeover's count but its
    answer was lost (its connection cut after the commit). The one after reads the same count,
    which A has still not seen: it rechecks, gives the table up and relays its reads to B,
    never answers from its old copy."""
    async with two_nodes(postgres, store_retry_ms=50) as (url, a, b):
        created = await a.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        locator = a.node.cluster.locator
        await a.node.cluster.membership.stopped()  # its renewals are the test's
        now = [locators.lease_clock()]
        monkeypatch.setattr(locators, "lease_clock", lambda: now[0])
        await locator.renewal()
        assert locator.confirmed()

        now[0] += 10 * locator.ttl_s  # A paused; B judged it dead and took the table
        await move_to(url, game_id, b)
        await b.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, display_name="Bea"))
        at_b = (await b.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game.version
        renew = locator.directory.renew

        async def answer_lost() -> int:
            await renew()  # committed: it read the takeover, but A never learns it
            raise asyncpg.ConnectionDoesNotExistError("connection was closed mid-operation")

        monkeypatch.setattr(locator.directory, "renew", answer_lost)
        with pytest.raises(asyncpg.ConnectionDoesNotExistError):
            await locator.renewal()
        monkeypatch.setattr(locator.directory, "renew", renew)
        await locator.renewal()  # the same count: one A has not seen

        assert game_id not in live_of(a.node.host)
        through_a = (await a.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert through_a.version == at_b > created.game.version

"""A cluster ListGames is complete only when every table of the cluster had a node to list it:
while a dead node's tables are not all taken over it is ``partial`` and names that node, even
once its membership expired (the live nodes no longer ask it); tables a stopped node handed off
that nobody took yet are named ``unowned``; a node taking tables over while it answers (one
it owns in the database may not be loaded yet) is named too. Once they are taken over, the
answer is complete and lists them. Nodes run in this process; the death is the database's
view of it (the membership expired, its renewals and the sweeps stopped)."""

from __future__ import annotations

from typing import Any

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.cluster.directory import UNOWNED
from tests.cluster.harness import fetch
from tests.cluster.inprocess import judged_dead, two_nodes
from tests.support.postgres import Postgres


async def test_a_dead_nodes_tables_make_the_listing_partial_until_taken_over(
        postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> None:
    async with two_nodes(postgres, store_retry_ms=50) as (url, a, b):
        mine = {(await a.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)))
                .game.game_id for _ in range(2)}
        theirs = {(await b.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)))
                  .game.game_id for _ in range(3)}
        handed_off = sorted(theirs)[0]
        for node in (a, b):  # nothing moves but what the test says
            await node.node.cluster.membership.stopped()
        listing = a.node.cluster.listing

        async def not_yet(*_: Any) -> None:  # the sweep has not reached them
            return None

        monkeypatch.setattr(listing, "_adopt_orphans", not_yet)
        await judged_dead(a, b)  # B died: A saw its heartbeat stopped for a TTL
        answer = await a.stub.ListGames(pb.ListGamesRequest())
        assert answer.partial and list(answer.missing_nodes) == [b.node.cluster.settings.advertise]
        assert {g.game_id for g in answer.games} == mine

        await fetch(url, "UPDATE games SET owner = NULL WHERE game_id = $1", handed_off)
        answer = await a.stub.ListGames(pb.ListGamesRequest())
        assert answer.partial
        assert sorted(answer.missing_nodes) == sorted([b.node.cluster.settings.advertise,
                                                       UNOWNED])

        monkeypatch.undo()  # A takes them over as it lists
        answer = await a.stub.ListGames(pb.ListGamesRequest())
        assert not answer.partial and not answer.missing_nodes
        assert {g.game_id for g in answer.games} == mine | theirs


async def test_a_node_taking_tables_over_makes_the_listing_partial(
        postgres: Postgres) -> None:
    async with two_nodes(postgres, store_retry_ms=50) as (_, a, b):
        games = {(await stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)))
                 .game.game_id for stub in (a.stub, b.stub)}
        address = a.node.cluster.settings.advertise
        with a.node.cluster.locator.taking_over():  # owned in the database, not loaded yet
            for stub in (a.stub, b.stub):  # its own page, and its page relayed to B
                answer = await stub.ListGames(pb.ListGamesRequest())
                assert answer.partial and list(answer.missing_nodes) == [address]
                assert {g.game_id for g in answer.games} == games  # what it holds, listed
        for stub in (a.stub, b.stub):
            answer = await stub.ListGames(pb.ListGamesRequest())
            assert not answer.partial and {g.game_id for g in answer.games} == games

"""The cluster's edges: a node answers for a table only while its ownership is confirmed (a
paused owner serves nothing stale once it runs again), a call relayed to a frozen owner is
answered within about a TTL and the tunnel's deadline, a write relayed to an owner lost
before it answered is COMMIT_UNKNOWN (never "not applied"), and ListGames says when it is
partial."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
from collections.abc import AsyncIterator

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.cluster.relay import DEADLINE_TTLS
from tests.cluster.harness import TTL_S, Node, StartNodes, fetch, journals
from tests.cluster.play import Stats, ledger_problems, new_table, play_to_the_end, retrying
from tests.support.calls import auth, reason_of
from tests.support.driver import Ack, Game


async def _next_move(stub: pb_grpc.GameServiceStub, stats: Stats, table: Game,
                     rng: random.Random) -> tuple[int, pb.SubmitActionRequest]:
    """A legal move for the table's awaited seat (asked of ``stub``), not yet sent."""
    while True:
        spectator = (await retrying(stats, lambda: stub.GetGame(
            pb.GetGameRequest(game_id=table.game_id), timeout=5))).game
        seat = rng.choice(list(spectator.awaiting_seats) or [0])
        view = (await retrying(stats, lambda seat=seat: stub.GetGame(  # type: ignore[misc]
            pb.GetGameRequest(game_id=table.game_id), metadata=auth(table.tokens[seat]),
            timeout=5))).game
        choices = [a for a in view.legal_actions
                   if a.WhichOneof("action") not in ("start_next_game", "reclaim_seat")]
        if choices:
            return seat, pb.SubmitActionRequest(
                game_id=table.game_id, action=rng.choice(choices),
                request_id=f"{table.game_id}-{len(table.acks)}-{rng.getrandbits(32):x}",
                expected_version=view.version)


@contextlib.asynccontextmanager
async def _kept_beating(database_url: str, node: Node) -> AsyncIterator[None]:
    """The database sees ``node`` renew (a new heartbeat every tenth of a TTL), whatever it
    does: the other nodes count it alive until a TTL after the block."""
    async def beat() -> None:
        while True:
            await fetch(database_url, "UPDATE members SET expires_at = now() "
                        "WHERE address = $1", node.address)
            await asyncio.sleep(TTL_S / 10)

    beating = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating


async def test_a_paused_owner_is_looked_past_within_a_ttl_and_serves_nothing_stale_after(
        start_nodes: StartNodes, cluster_url: str) -> None:
    owner, other = await start_nodes(2)
    stats = Stats()
    rng = random.Random(21)
    async with grpc.aio.insecure_channel(owner.address) as to_owner, \
            grpc.aio.insecure_channel(other.address) as to_other:
        at_owner = pb_grpc.GameServiceStub(to_owner)
        at_other = pb_grpc.GameServiceStub(to_other)
        table = await new_table(at_owner, stats, "war", seed=21)
        await play_to_the_end(at_owner, stats, table, rng, max_actions=3)
        await play_to_the_end(at_other, stats, table, rng, max_actions=4)  # relayed: known
        seat, request = await _next_move(at_other, stats, table, rng)

        owner.signal(signal.SIGSTOP)
        # relayed to the frozen owner: the other node stops waiting once the owner's
        # membership expires (or at the tunnel's deadline), takes the table over and answers
        answer = await at_other.SubmitAction(request, metadata=auth(table.tokens[seat]),
                                             timeout=TTL_S + DEADLINE_TTLS * TTL_S)
        table.acks.append(Ack(table.game_id, seat, request.request_id, request, answer.version))
        await play_to_the_end(at_other, stats, table, rng, max_actions=7)
        acknowledged = table.acks[-1].version

        # asked while still frozen (the request waits in its socket), answered after SIGCONT:
        # from the new owner (relayed) once its ownership is checked, never from memory
        asked = [asyncio.ensure_future(at_owner.GetGame(
            pb.GetGameRequest(game_id=table.game_id), metadata=auth(table.tokens[0]),
            timeout=30)) for _ in range(3)]
        for _ in range(20):  # let the calls be written to the socket (they wait there)
            await asyncio.sleep(0)
        owner.signal(signal.SIGCONT)
        for call in asked:
            try:
                assert (await call).game.version >= acknowledged
            except grpc.aio.AioRpcError as error:  # a refusal says retry, never stale state
                assert error.code() == grpc.StatusCode.UNAVAILABLE, error
        view = (await retrying(stats, lambda: at_owner.GetGame(
            pb.GetGameRequest(game_id=table.game_id), metadata=auth(table.tokens[0]),
            timeout=5))).game
        assert view.version >= acknowledged
        await play_to_the_end(at_owner, stats, table, rng, max_actions=10)
    assert stats.errors == []
    assert len(table.acks) == 10
    assert ledger_problems([table], await journals(cluster_url)) == []
    rows = await fetch(cluster_url, "SELECT owner, epoch FROM games WHERE game_id = $1",
                       table.game_id)
    assert rows[0]["epoch"] >= 2


async def test_a_write_relayed_to_a_lost_owner_is_in_doubt_and_listing_says_partial(
        start_nodes: StartNodes, cluster_url: str) -> None:
    survivor, lost = await start_nodes(2)
    stats = Stats()
    rng = random.Random(22)
    async with grpc.aio.insecure_channel(survivor.address) as to_survivor, \
            grpc.aio.insecure_channel(lost.address) as to_lost:
        at_survivor = pb_grpc.GameServiceStub(to_survivor)
        here = await new_table(at_survivor, stats, "war", seed=22)
        there = await new_table(pb_grpc.GameServiceStub(to_lost), stats, "war", seed=23)
        await play_to_the_end(at_survivor, stats, there, rng, max_actions=2)
        seat, request = await _next_move(at_survivor, stats, there, rng)

        async with _kept_beating(cluster_url, lost):  # lost, not yet known dead
            lost.kill()
            listed = await at_survivor.ListGames(pb.ListGamesRequest(), timeout=10)
            assert listed.partial
            assert list(listed.missing_nodes) == [lost.address]
            assert [g.game_id for g in listed.games] == [here.game_id]

            try:
                await at_survivor.SubmitAction(request, metadata=auth(there.tokens[seat]),
                                               timeout=10)
                raise AssertionError("a write relayed to a lost owner was answered OK")
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE
                assert reason_of(error) == "COMMIT_UNKNOWN"

        answer = await retrying(stats, lambda: at_survivor.SubmitAction(  # the same id
            request, metadata=auth(there.tokens[seat]), timeout=5))
        there.acks.append(Ack(there.game_id, seat, request.request_id, request,
                              answer.version))
        listed = await at_survivor.ListGames(pb.ListGamesRequest(), timeout=10)
        assert not listed.partial and list(listed.missing_nodes) == []
        assert {g.game_id for g in listed.games} == {here.game_id, there.game_id}
    assert stats.errors == []
    assert ledger_problems([there], await journals(cluster_url)) == []

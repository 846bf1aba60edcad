"""A retried CreateGame (the same ``request_id``) gets the table of its first attempt whichever
node it reaches: while the creating node lives, after it was killed, and when two nodes get
the same request at once (the database's unique request id lets only one of them create).
A killed node's tables, those nobody calls too, are listed by the others."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.cluster.harness import StartNodes


def create(request_id: str) -> pb.CreateGameRequest:
    return pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seats=2, request_id=request_id)


async def listed(stub: pb_grpc.GameServiceStub) -> list[str]:
    answer = await stub.ListGames(pb.ListGamesRequest(include_finished=True))
    return [g.game_id for g in answer.games]


async def retried(stub: pb_grpc.GameServiceStub, request: pb.CreateGameRequest,
                  tries: int = 100) -> pb.CreateGameResponse:
    """What a client does: retry UNAVAILABLE (a node that answers TABLE_MOVED, or one whose
    dead peer has not expired yet) with the same request."""
    for _ in range(tries):
        try:
            answer: pb.CreateGameResponse = await stub.CreateGame(request, timeout=10)
            return answer
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            await asyncio.sleep(0.1)  # a client's backoff; bounded by ``tries``
    raise AssertionError("CreateGame never succeeded")


async def test_a_retry_on_another_node_gets_the_same_table(start_nodes: StartNodes) -> None:
    first, second = await start_nodes(2)
    async with grpc.aio.insecure_channel(first.address) as one, \
            grpc.aio.insecure_channel(second.address) as two:
        at_first, at_second = pb_grpc.GameServiceStub(one), pb_grpc.GameServiceStub(two)
        made = await at_first.CreateGame(create("create-1"))
        again = await at_second.CreateGame(create("create-1"))
        assert again.game == made.game
        joined = await at_second.JoinGame(pb.JoinGameRequest(game_id=made.game.game_id))
        assert joined.seat == 0
        other = await at_second.CreateGame(create("create-2"))
        assert other.game.game_id != made.game.game_id
        assert sorted(await listed(at_first)) == sorted([made.game.game_id,
                                                         other.game.game_id])

        quiet = await at_first.CreateGame(create(""))  # nobody calls it after the kill

        first.kill()
        after = await retried(at_second, create("create-1"))
        assert after.game.game_id == made.game.game_id
        assert after.game.seats[0].taken  # the join above is kept: the same table
        every = sorted(g.game.game_id for g in (made, other, quiet))
        for _ in range(100):  # the dead node's tables are listed once its membership expires
            if sorted(await listed(at_second)) == every:
                break
            await asyncio.sleep(0.1)  # bounded: 10 s, the TTL is 1.5 s
        assert sorted(await listed(at_second)) == every


@pytest.mark.parametrize("round_", range(3))
async def test_the_same_create_on_two_nodes_at_once_makes_one_table(
        start_nodes: StartNodes, round_: int) -> None:
    first, second = await start_nodes(2)
    request = create(f"together-{round_}")
    async with grpc.aio.insecure_channel(first.address) as one, \
            grpc.aio.insecure_channel(second.address) as two:
        answers = await asyncio.gather(retried(pb_grpc.GameServiceStub(one), request),
                                       retried(pb_grpc.GameServiceStub(two), request))
        assert answers[0].game.game_id == answers[1].game.game_id
        assert await listed(pb_grpc.GameServiceStub(one)) == [answers[0].game.game_id]

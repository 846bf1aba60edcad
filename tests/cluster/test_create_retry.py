"""A retried CreateGame (the same ``request_id``) gets the table of its first attempt whichever
node it reaches: while the creating node lives, after it was killed, and when two nodes get
the same request at once (the database's unique request id lets only one of them create).
A killed node's tables, those nobody calls too, are listed by the others. A backend's retry
gets its reserved seats' tokens through any node."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.cluster.harness import Node, StartNodes
from tests.support.calls import auth
from tests.trust.door import KEY_A, backend


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


async def test_a_backend_retry_on_a_node_that_does_not_hold_the_table_gets_its_tokens(
        cluster_url: str, tmp_path: Path) -> None:
    """The seat tokens of a backend's reserved seats come back with a retry sent to another
    node than the table's owner (it relays the retry to the owner), as with one sent to the
    owner."""
    keys = tmp_path / "api-keys"
    keys.write_text(f"{KEY_A} backend-a\n", encoding="utf-8")
    nodes = [Node(cluster_url, tmp_path, extra=("--api-keys-file", str(keys)))
             for _ in range(2)]
    request = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, request_id="reserved-1", seat_configs=[
        pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id=f"u-{seat}") for seat in (0, 1)])
    try:
        for node in nodes:
            await node.start()
        async with grpc.aio.insecure_channel(nodes[0].address) as one, \
                grpc.aio.insecure_channel(nodes[1].address) as two:
            at_owner, at_other = pb_grpc.GameServiceStub(one), pb_grpc.GameServiceStub(two)
            made = await at_owner.CreateGame(request, metadata=backend(KEY_A))
            assert [t.player_id for t in made.seat_tokens] == ["u-0", "u-1"]
            for stub in (at_other, at_owner, at_other):
                again = await stub.CreateGame(request, metadata=backend(KEY_A))
                assert again.game.game_id == made.game.game_id
                assert list(again.seat_tokens) == list(made.seat_tokens)
            view = await at_other.GetGame(pb.GetGameRequest(game_id=made.game.game_id),
                                          metadata=auth(made.seat_tokens[1].seat_token))
            assert view.game.your_seat == 1  # a token that works, through either node
    finally:
        for node in nodes:
            node.stop()

"""A cluster node reads requests as raw bytes (to relay them): bytes that are not a message
are still INVALID_ARGUMENT / INVALID_REQUEST from every method, never UNKNOWN, whether the
table is served here, relayed, or missing."""

from __future__ import annotations

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.cluster.harness import StartNodes
from tests.support.calls import reason_of
from tests.support.raw import JUNK, METHODS, raw_call


async def test_undecodable_bytes_on_a_node_are_invalid_requests(start_nodes: StartNodes) -> None:
    owner, other = await start_nodes(2)
    async with grpc.aio.insecure_channel(owner.address) as to_owner, \
            grpc.aio.insecure_channel(other.address) as to_other:
        made = await pb_grpc.GameServiceStub(to_owner).CreateGame(
            pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seats=2))
        game_id = made.game.game_id.encode()
        # field 1 = this table's id, then junk: routed (here, or relayed), then not decodable
        routed = [b"\x0a" + bytes([len(game_id)]) + game_id + junk for junk in JUNK]
        for channel in (to_owner, to_other):
            for method in METHODS:
                for payload in [*JUNK, *routed]:
                    error = await raw_call(channel, method, payload,
                                           method.endswith("StreamEvents"))
                    assert error is not None, (method, payload)
                    assert (error.code(), reason_of(error)) == (
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"), (method, payload)
        view = await pb_grpc.GameServiceStub(to_other).GetGame(
            pb.GetGameRequest(game_id=made.game.game_id))
        assert view.game.version == made.game.version

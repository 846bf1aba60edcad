"""A relayed call counts against the client that made it, not against the relaying node: the
owner's per-connection stream cap lets many clients watch a table through another node (all of
their streams reach the owner over that node's one connection), still caps each client's own
connection, and a client cannot pass itself off as a relaying node with the cluster's headers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.cluster.harness import Node
from tests.cluster.play import Stats, new_table
from tests.support.calls import reason_of

CAP = 3
SEPARATE = [("grpc.use_local_subchannel_pool", 1)]
"""Each client channel on a connection of its own."""


@pytest.fixture
async def two_nodes(cluster_url: str, tmp_path: Path) -> AsyncIterator[list[Node]]:
    nodes = [Node(cluster_url, tmp_path, extra=("--max-streams-per-connection", str(CAP)))
             for _ in range(2)]
    try:
        for node in nodes:
            await node.start()
        yield nodes
    finally:
        for node in nodes:
            node.stop()


async def opened(channel: grpc.aio.Channel, game_id: str,
                 metadata: tuple[tuple[str, str], ...] = ()) -> tuple[grpc.aio.Call, str]:
    """Open a spectator stream and read its first message: (the call, "" or its refusal)."""
    call = pb_grpc.GameServiceStub(channel).StreamEvents(
        pb.StreamEventsRequest(game_id=game_id), metadata=metadata)
    try:
        await call.read()
    except grpc.aio.AioRpcError as error:
        return call, f"{error.code().name}/{reason_of(error)}"
    return call, ""


async def test_streams_relayed_for_many_clients_count_against_each_client(
        two_nodes: list[Node]) -> None:
    owner, relay = two_nodes
    async with grpc.aio.insecure_channel(owner.address) as to_owner:
        table = await new_table(pb_grpc.GameServiceStub(to_owner), Stats(), "war", seed=3)
    clients = [grpc.aio.insecure_channel(relay.address, options=SEPARATE)
               for _ in range(CAP + 2)]
    try:
        # one stream per client, all relayed to the owner over the relay's one connection
        results = [await opened(channel, table.game_id) for channel in clients]
        assert [refused for _, refused in results] == [""] * (CAP + 2)
        # one client's own connection is still capped, at the owner
        more = [await opened(clients[0], table.game_id) for _ in range(CAP)]
        assert [refused for _, refused in more] == [""] * (CAP - 1) + [
            "RESOURCE_EXHAUSTED/TOO_MANY_STREAMS"]
        assert relay.metric("tapis_cluster_forwards_total", method="StreamEvents") >= CAP + 2
        for call, _ in results + more:
            call.cancel()
    finally:
        for channel in clients:
            await channel.close()


async def test_a_client_cannot_pass_for_a_relaying_node(two_nodes: list[Node]) -> None:
    owner, _ = two_nodes
    forged = (("tapis-forwarded", "1"), ("tapis-forwarded-for", "ipv4:10.9.8.7:1"))
    async with grpc.aio.insecure_channel(owner.address, options=SEPARATE) as channel:
        table = await new_table(pb_grpc.GameServiceStub(channel), Stats(), "war", seed=4)
        results = [await opened(channel, table.game_id, forged) for _ in range(CAP + 1)]
    assert [refused for _, refused in results] == [""] * CAP + [
        "RESOURCE_EXHAUSTED/TOO_MANY_STREAMS"]

"""A refused call relayed to its table's owner counts in the refusal budget of the node the client
is connected to, the only one that can cut it (``door.Door.refused``): a stranger flooding a bad
seat token at node B for a table node A owns is cut at B after the same budget as a flood at a
single node (``tests/limits/test_refusal_door.py``), over gRPC or the WebSocket, and A counts
none of it (it is never counted twice)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import grpc
import pytest
from prometheus_client import REGISTRY

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.cluster import frames
from tapis_service.door.connections import counts_against_address
from tapis_service.observe.errors import ServiceError
from tapis_service.process.server import RunningServer, create_server
from tests.support.postgres import Postgres
from tests.support.process import free_port
from tests.support.refusals import grpc_flood, socket_flood
from tests.support.server import TEST_SETTINGS

BUDGET = 4
RATE_PER_S = 0.001
"""One refusal forgiven every 1000 s: none during a test (the nodes' clocks are real ones)."""


@asynccontextmanager
async def owner_and_entry(postgres: Postgres, bad_token_burst: int = 100
                          ) -> AsyncIterator[tuple[RunningServer, RunningServer]]:
    """Two nodes in this process over a fresh database, each with the refusal budget and the
    wrong-token limit (``bad_token_burst``), the second with a WebSocket port."""
    database = await postgres.create_database()
    url = postgres.url(database)
    nodes: list[RunningServer] = []
    try:
        for ws_port in (None, 0):
            port = free_port()
            nodes.append(await create_server(replace(
                TEST_SETTINGS, port=port, store="postgres", database_url=url,
                advertise=f"127.0.0.1:{port}", node_ttl_s=3.0, ws_port=ws_port,
                refusal_burst=BUDGET, refusal_rate_per_s=RATE_PER_S,
                refusal_cooldown_s=60.0, bad_token_burst=bad_token_burst,
                bad_token_rate_per_s=RATE_PER_S)))
        yield nodes[0], nodes[1]
    finally:
        for node in reversed(nodes):
            await node.stop(0)
        await postgres.drop_database(database)


def relayed_refusals() -> float:
    """GetGame calls relayed to an owner and refused there (the nodes share this process's
    metrics; only the owner serves relayed calls)."""
    return REGISTRY.get_sample_value("grpc_server_handled_total", {
        "grpc_type": "unary", "grpc_service": "tapis.v1.GameService", "grpc_method": "GetGame",
        "grpc_code": "UNAUTHENTICATED", "transport": "relay"}) or 0.0


async def new_game(node: RunningServer) -> str:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{node.port}") as channel:
        return str((await pb_grpc.GameServiceStub(channel).CreateGame(
            pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))).game.game_id)


@pytest.mark.parametrize("transport", ["grpc", "websocket"])
async def test_a_bad_token_flood_relayed_by_another_node_is_cut_there_after_the_same_budget(
        postgres: Postgres, transport: str) -> None:
    async with owner_and_entry(postgres) as (owner, entry):
        game_id = await new_game(owner)
        assert owner.connection_limits is not None and entry.connection_limits is not None
        before = relayed_refusals()
        if transport == "grpc":
            await grpc_flood(entry.port, game_id, entry.connection_limits, BUDGET)
        else:
            assert entry.ws_port is not None
            await socket_flood(entry.ws_port, game_id, entry.connection_limits, BUDGET)
        assert entry.host.tables.session(game_id) is None
        assert relayed_refusals() - before >= BUDGET  # refused by A, the table's owner
        # the owner counted none of them: the stranger has its whole budget there
        await grpc_flood(owner.port, game_id, owner.connection_limits, BUDGET)


@pytest.mark.parametrize("transport", ["grpc", "websocket"])
async def test_the_owner_s_rate_limit_answers_to_a_relayed_flood_spend_the_entry_s_budget(
        postgres: Postgres, transport: str) -> None:
    """The owner answers a bad token RATE_LIMITED past its wrong-token limit; that answer
    crosses the tunnel with the wrong token it answers (``cluster.frames.CAUSE``), so the entry
    node counts it as a single node would (``tests/limits/test_refusal_door.py``)."""
    async with owner_and_entry(postgres, bad_token_burst=2) as (owner, entry):
        game_id = await new_game(owner)
        assert entry.connection_limits is not None
        reasons = ["INVALID_TOKEN"] * 2 + ["RATE_LIMITED"] * (BUDGET - 2)
        if transport == "grpc":
            await grpc_flood(entry.port, game_id, entry.connection_limits, BUDGET,
                             reasons=reasons)
        else:
            assert entry.ws_port is not None
            await socket_flood(entry.ws_port, game_id, entry.connection_limits, BUDGET,
                               reasons=reasons)
        assert entry.host.tables.session(game_id) is None


def test_a_refusal_s_cause_crosses_the_tunnel_and_no_further() -> None:
    wrong = ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "bad token")
    limited = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", "slow down",
                           {"kept": "yes"})
    limited.__cause__ = wrong
    _, crossed = frames.decode_answer(frames.encode_refusal(7, limited))
    assert isinstance(crossed, ServiceError) and counts_against_address(crossed)
    assert (crossed.code, crossed.reason, crossed.metadata) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", {"kept": "yes"})  # no CAUSE
    assert isinstance(crossed.__cause__, ServiceError)
    assert (crossed.__cause__.code, crossed.__cause__.reason) == (
        grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN")
    _, alone = frames.decode_answer(frames.encode_refusal(8, ServiceError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", "too many tables")))
    assert isinstance(alone, ServiceError) and not counts_against_address(alone)
    garbled = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", "slow down",
                           {frames.CAUSE: "16/not-hex"})
    _, read = frames.decode_answer(frames.encode_refusal(9, garbled))
    assert isinstance(read, ServiceError) and read.__cause__ is None and read.metadata == {}

"""A stranger's bad-token flood from another loopback address, over gRPC or the WebSocket:
answered one refusal at a time within its address's budget (``connections.RefusalBudget``),
cut at the first refusal past it — whatever carried the calls (the door counts them all)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.door.connections import ConnectionLimits
from tests.support.calls import auth, reason_of
from tests.support.relay import SourceRelay
from tests.support.websocket import Client, reason

STRANGER = "127.0.0.2"
STRANGER_KEY = ipaddress.ip_network(f"{STRANGER}/32")
BAD_TOKEN = "not-a-seat-token"


def from_address(address: str, port: int) -> Any:
    """picows's socket factory: a connection to 127.0.0.1:``port`` from ``address``."""

    def connect(_: object) -> socket.socket:
        sock = socket.socket()
        sock.bind((address, 0))
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        return sock

    return connect


async def grpc_flood(port: int, game_id: str, limits: ConnectionLimits, budget: int,
                     stream: bool = False, reasons: list[str] | None = None) -> None:
    """``budget`` GetGame calls of ``game_id`` (``stream``: StreamEvents) with a bad seat token
    from ``STRANGER`` to the gRPC port ``port``, each refused INVALID_TOKEN with the stranger
    not cut (or with ``reasons``, one each); one more, and its connection is cut and its
    address cools down in ``limits``."""
    async with SourceRelay(STRANGER, "127.0.0.1", port) as far, \
            grpc.aio.insecure_channel(f"127.0.0.1:{far.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)

        async def call() -> None:
            if stream:
                await stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                        metadata=auth(BAD_TOKEN), timeout=5).read()
            else:
                await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                   metadata=auth(BAD_TOKEN), timeout=5)

        for number in range(budget):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call()
            assert reason_of(refused.value) == (reasons or ["INVALID_TOKEN"] * budget)[number]
            assert not limits.budget.cooling(STRANGER_KEY), number
        with pytest.raises(grpc.aio.AioRpcError):  # past the budget: cut
            await call()
        assert limits.budget.cooling(STRANGER_KEY)


async def socket_flood(ws_port: int, game_id: str, limits: ConnectionLimits,
                       budget: int, stream: bool = False,
                       reasons: list[str] | None = None) -> None:
    """The same flood over the WebSocket port ``ws_port``, on one socket: past the budget the
    socket is closed and the address cools down."""
    client = await Client.open(f"ws://127.0.0.1:{ws_port}/ws",
                               socket_factory=from_address(STRANGER, ws_port))
    try:
        request: dict[str, Any] = {"stream_events": pb.StreamEventsRequest(game_id=game_id)} \
            if stream else {"get_game": pb.GetGameRequest(game_id=game_id)}
        for number in range(budget):
            refused = await client.call(seat_token=BAD_TOKEN, **request)
            assert reason(refused) == (reasons or ["INVALID_TOKEN"] * budget)[number]
            assert not limits.budget.cooling(STRANGER_KEY), number
        client.send(ws_pb.ClientFrame(seat_token=BAD_TOKEN, **request))
        await asyncio.wait_for(client.closed(), 5)  # past the budget: the socket is closed
        assert limits.budget.cooling(STRANGER_KEY)
    finally:
        client.close()

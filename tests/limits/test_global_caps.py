"""Server-wide caps, every address together: spectators' streams and seated players' streams
each have their own (strangers never lock the players out), and connections are capped by
grpc's core (``grpc.max_allowed_incoming_connections``); all sized for the machine unless set."""

from __future__ import annotations

import grpc
import pytest
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.door import capacity
from tapis_service.door.capacity import Capacity
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tapis_service.settings import Settings
from tapis_service.tables.streams import StreamGuard
from tests.support.calls import auth
from tests.support.server import ServerFactory

OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)


def test_spectators_and_seated_players_have_caps_of_their_own() -> None:
    guard = StreamGuard(ManualClock(), per_table=100, per_connection=100, per_peer=100,
                        stall_ms=0, spectators=2, seated=1)
    watching = [guard.open_stream(f"ipv4:10.0.0.{n}:1", 0, lambda _: None) for n in range(2)]
    with pytest.raises(ServiceError) as refused:
        guard.open_stream("ipv4:10.0.0.9:1", 0, lambda _: None)
    assert refused.value.reason == "TOO_MANY_STREAMS"
    assert "2 spectators' streams" in refused.value.message
    player = guard.open_stream("ipv4:10.0.0.9:1", 0, lambda _: None, seated=True)
    with pytest.raises(ServiceError) as refused:
        guard.open_stream("ipv4:10.0.0.8:1", 0, lambda _: None, seated=True)
    assert "1 players' streams" in refused.value.message
    guard.close_stream(watching[0])
    guard.close_stream(watching[0])  # closing twice frees once
    assert (guard.spectator_streams, guard.seat_streams) == (1, 1)
    guard.open_stream("ipv4:10.0.0.9:1", 0, lambda _: None)
    guard.close_stream(player)
    guard.open_stream("ipv4:10.0.0.7:1", 0, lambda _: None, seated=True)


def test_the_caps_are_sized_for_the_machine() -> None:
    gib = 1 << 30
    assert capacity.stream_cap(gib) == gib // 4 // capacity.STREAM_BYTES == 10_737
    assert capacity.stream_cap(64 << 20) == capacity.MIN_STREAMS
    assert capacity.stream_cap(1 << 50) == capacity.MAX_STREAMS
    assert capacity.connection_cap(1024, websocket=False) == 768
    assert capacity.connection_cap(1024, websocket=True) == 384
    assert capacity.connection_cap(100, websocket=False) == capacity.MIN_CONNECTIONS
    sized = Capacity.of(Settings())
    assert sized.connections == capacity.connection_cap(capacity.open_files_limit(), False)
    assert sized.spectator_streams == sized.seat_streams == capacity.stream_cap(
        capacity.memory_bytes())
    assert capacity.memory_bytes() > 0
    files = capacity.open_files_limit()
    assert Capacity.of(Settings(max_connections=7, max_spectator_streams=8,
                                max_seat_streams=9)) == Capacity(
        7, 8, 9, capacity.MIN_PER_ADDRESS, files - capacity.RESERVED_FILES - 7,
        capacity.address_cap(files - capacity.RESERVED_FILES - 7))
    assert Capacity.of(Settings(max_connections_per_address=3,
                                ws_max_connections_per_address=4)).connections_per_address == 3


def test_the_websocket_port_gets_the_descriptors_grpc_leaves() -> None:
    """With 2,048 descriptors and --ws-port: gRPC's connections and the WebSocket's together
    never reach the limit (20,000 sockets were allowed whatever the limit), and one address
    may hold a sixteenth of each."""
    grpc_share = capacity.connection_cap(2048, websocket=True)
    ws_share = capacity.websocket_cap(2048, grpc_share)
    assert (grpc_share, ws_share) == (896, 896)
    assert grpc_share + ws_share + capacity.RESERVED_FILES == 2048
    assert capacity.address_cap(896) == 56
    assert capacity.address_cap(40) == capacity.MIN_PER_ADDRESS
    assert capacity.websocket_cap(300, 10_000) == capacity.MIN_CONNECTIONS


async def test_spectators_streams_never_lock_out_the_seated_players_server_wide(
        make_server: ServerFactory) -> None:
    harness = await make_server(clock=ManualClock(), max_spectator_streams=2)
    stub = harness.stub
    tables = [(await stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))).game.game_id
              for _ in range(3)]
    tokens = [(await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0))).seat_token
              for game_id in tables]  # a seat claimed: an event each stream reads at once
    token = tokens[2]
    spectators = [stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id))
                  for game_id in tables[:2]]
    for stream in spectators:
        await stream.read()
    third = stub.StreamEvents(pb.StreamEventsRequest(game_id=tables[2]))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await third.read()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    status = rpc_status.from_call(refused.value)  # type: ignore[arg-type]
    assert status is not None and "2 spectators' streams" in status.message
    seated = stub.StreamEvents(pb.StreamEventsRequest(game_id=tables[2]), metadata=auth(token))
    assert (await seated.read()).events
    spectators[0].cancel()
    again = stub.StreamEvents(pb.StreamEventsRequest(game_id=tables[2]))
    assert (await again.read()).events
    for stream in [*spectators, seated, again]:
        stream.cancel()


async def test_connections_beyond_the_cap_are_closed_by_grpc(
        make_server: ServerFactory) -> None:
    harness = await make_server(clock=ManualClock(), max_connections=2)
    await harness.stub.ListGames(pb.ListGamesRequest())  # the harness's own: one
    target = f"127.0.0.1:{harness.running.port}"
    second = grpc.aio.insecure_channel(target, options=OWN_CONNECTION)
    await pb_grpc.GameServiceStub(second).ListGames(pb.ListGamesRequest())
    third = grpc.aio.insecure_channel(target, options=OWN_CONNECTION)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await pb_grpc.GameServiceStub(third).ListGames(pb.ListGamesRequest(), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    await third.close()
    await harness.stub.ListGames(pb.ListGamesRequest())  # the connections open keep working
    await pb_grpc.GameServiceStub(second).ListGames(pb.ListGamesRequest())
    await second.close()

"""The WebSocket gateway's frames, limits and dispatch, against a small in-test GameApi."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.codec.requests import ActionRequest
from tapis_service.door.caller import Caller
from tapis_service.door.door import Door
from tapis_service.door.limits import MAX_METADATA_BYTES
from tapis_service.observe import metrics
from tapis_service.observe.errors import ServiceError
from tapis_service.ws import frames
from tapis_service.ws.connection import CLOSE_TOO_BIG, Connection, SocketLimits
from tapis_service.ws.frames import Format


@dataclass
class FakeApi:
    """Answers from memory; a stream yields what its table's queue holds."""

    callers: list[Any] = field(default_factory=list)
    gate: asyncio.Event | None = None
    """When set, get_game waits for it (requests held in flight)."""
    queues: dict[str, asyncio.Queue[pb.StreamEventsResponse | ServiceError | None]] = \
        field(default_factory=dict)
    closed_streams: list[str] = field(default_factory=list)
    ends: dict[str, Callable[[ServiceError], None]] = field(default_factory=dict)

    async def create_game(self, request: pb.CreateGameRequest,
                          caller: Any) -> pb.CreateGameResponse:
        self.callers.append(caller)
        return pb.CreateGameResponse(game=pb.GameView(game_id="t1", kind=request.kind))

    async def join_game(self, request: pb.JoinGameRequest, caller: Any) -> pb.JoinGameResponse:
        return pb.JoinGameResponse(seat=1, seat_token="secret")

    async def get_game(self, request: pb.GetGameRequest, caller: Any) -> pb.GetGameResponse:
        self.callers.append(caller)
        if self.gate is not None:
            await self.gate.wait()
        if request.game_id != "t1":
            raise ServiceError(grpc.StatusCode.NOT_FOUND, "GAME_NOT_FOUND", "no such table")
        return pb.GetGameResponse(game=pb.GameView(game_id="t1", version=7))

    async def submit_action(self, request: ActionRequest, caller: Any) -> bytes:
        if request.seat is not None and request.seat != 0:
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_SEAT", "not yours")
        return pb.SubmitActionResponse(version=8).SerializeToString()  # pre-serialized answer

    async def stream_events(self, request: pb.StreamEventsRequest, caller: Any,
                            end: Callable[[ServiceError], None], writer: Any = None
                            ) -> AsyncIterator[pb.StreamEventsResponse | bytes]:
        self.ends[request.game_id] = end
        queue = self.queues.setdefault(request.game_id, asyncio.Queue())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                if isinstance(item, ServiceError):
                    raise item
                yield item
        finally:
            self.closed_streams.append(request.game_id)

    async def list_games(self, request: pb.ListGamesRequest, caller: Any) -> pb.ListGamesResponse:
        return pb.ListGamesResponse()


@dataclass
class FakeSocket:
    sent: list[bytes | str] = field(default_factory=list)
    closed: tuple[int, str] | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def send(self, message: bytes | str) -> None:
        self.sent.append(message)
        self.arrived.set()

    def send_all(self, messages: list[bytes | str]) -> None:
        self.sent.extend(messages)
        self.arrived.set()

    def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def frames(self) -> list[ws_pb.ServerFrame]:
        out = []
        for message in self.sent:
            frame = ws_pb.ServerFrame()
            if isinstance(message, bytes):
                frame.ParseFromString(message)
            else:
                json_format.Parse(message, frame)
            out.append(frame)
        return out

    async def wait_for(self, count: int) -> list[ws_pb.ServerFrame]:
        while len(self.sent) < count:
            self.arrived.clear()
            await self.arrived.wait()
        return self.frames()


def connect(api: FakeApi, limits: SocketLimits | None = None) -> tuple[Connection, FakeSocket]:
    socket = FakeSocket()
    return Connection(api, "ipv4:10.0.0.9:4242", socket,  # type: ignore[arg-type]
                      limits or SocketLimits()), socket


def client(frame_id: int, **request: Any) -> bytes:
    return ws_pb.ClientFrame(id=frame_id, **request).SerializeToString()


def reason(frame: ws_pb.ServerFrame) -> str:
    assert frame.WhichOneof("response") == "refusal", frame
    info = error_details_pb2.ErrorInfo()
    assert frame.refusal.details[0].Unpack(info)
    assert info.domain == "tapis.v1"
    return info.reason


def test_each_request_is_answered_by_the_field_of_the_same_number() -> None:
    requests = ws_pb.ClientFrame.DESCRIPTOR.oneofs_by_name["request"].fields
    assert {f.name: frames.RESPONSE_FIELD[f.name] for f in requests} == {
        "create_game": "create_game", "join_game": "join_game", "get_game": "get_game",
        "submit_action": "submit_action", "stream_events": "events",
        "list_games": "list_games", "stop_events": "events_stopped"}


async def test_a_binary_request_gets_its_binary_answer_with_its_id() -> None:
    api = FakeApi()
    connection, socket = connect(api)
    connection.received(client(5, create_game=pb.CreateGameRequest(kind=pb.GAME_KIND_WAR),
                               seat_token="tok", api_key="key"), Format.BINARY)
    [frame] = await socket.wait_for(1)
    assert isinstance(socket.sent[0], bytes)
    assert frame.id == 5 and frame.create_game.game.game_id == "t1"
    assert frame.create_game.game.kind == pb.GAME_KIND_WAR
    assert api.callers == [Caller(peer="ipv4:10.0.0.9:4242", seat_token="tok", api_key="key")]


async def test_a_json_request_gets_a_json_answer() -> None:
    connection, socket = connect(FakeApi())
    connection.received(b'{"id": "3", "getGame": {"gameId": "t1"}}', Format.JSON)
    [frame] = await socket.wait_for(1)
    assert isinstance(socket.sent[0], str) and '"getGame"' in socket.sent[0]
    assert frame.id == 3 and frame.get_game.game.version == 7


async def test_a_pre_serialized_answer_is_carried_as_the_message() -> None:
    connection, socket = connect(FakeApi())
    connection.received(client(1, submit_action=pb.SubmitActionRequest(game_id="t1")),
                        Format.BINARY)
    [frame] = await socket.wait_for(1)
    assert frame.submit_action.version == 8


async def test_a_refusal_is_the_status_grpc_sends() -> None:
    connection, socket = connect(FakeApi())
    connection.received(client(2, submit_action=pb.SubmitActionRequest(game_id="t1", seat=1)),
                        Format.BINARY)
    connection.received(client(3, get_game=pb.GetGameRequest(game_id="nope")), Format.BINARY)
    answers = {f.id: f for f in await socket.wait_for(2)}
    assert reason(answers[2]) == "NOT_YOUR_SEAT"
    assert answers[2].refusal.code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert reason(answers[3]) == "GAME_NOT_FOUND"
    assert answers[3].refusal.message == "no such table"


async def test_a_message_over_the_limit_is_refused_and_the_socket_closed() -> None:
    connection, socket = connect(FakeApi())
    big = client(1, join_game=pb.JoinGameRequest(display_name="x" * frames.MAX_FRAME_BYTES))
    connection.received(big, Format.BINARY)
    [frame] = socket.frames()
    assert frame.id == 0 and reason(frame) == "VALUE_TOO_LONG"
    assert socket.closed is not None and socket.closed[0] == CLOSE_TOO_BIG


@pytest.mark.parametrize(("payload", "fmt"), [
    (b"\xff\xff\xff", Format.BINARY), (b"{not json", Format.JSON), (b"\xc3(", Format.JSON),
    (b'{"id": "1", "nope": 2}', Format.JSON)])
async def test_a_message_that_is_no_frame_is_refused_and_the_socket_stays(
        payload: bytes, fmt: Format) -> None:
    connection, socket = connect(FakeApi())
    connection.received(payload, fmt)
    [frame] = socket.frames()
    assert frame.id == 0 and reason(frame) == "INVALID_REQUEST"
    assert socket.closed is None
    connection.received(client(4, list_games=pb.ListGamesRequest()), Format.BINARY)
    assert (await socket.wait_for(2))[1].HasField("list_games")


async def test_a_frame_needs_an_id_and_a_request() -> None:
    connection, socket = connect(FakeApi())
    connection.received(client(0, list_games=pb.ListGamesRequest()), Format.BINARY)
    connection.received(client(6), Format.BINARY)
    first, second = socket.frames()
    assert (first.id, reason(first)) == (0, "INVALID_REQUEST")
    assert (second.id, reason(second)) == (6, "INVALID_REQUEST")


async def test_requests_in_flight_are_capped_and_an_id_in_use_refused() -> None:
    """...and each refusal counted in the RPC metrics under its method, as gRPC counts the
    calls its door refuses."""
    get_game = ("unary", "tapis.v1.GameService", "GetGame")
    started = metrics.RPC_STARTED.value(*get_game, "websocket")
    overloaded = metrics.RPC_HANDLED.value(*get_game, "RESOURCE_EXHAUSTED", "websocket")
    list_games = ("unary", "tapis.v1.GameService", "ListGames")
    invalid = metrics.RPC_HANDLED.value(*list_games, "INVALID_ARGUMENT", "websocket")
    api = FakeApi(gate=asyncio.Event())
    connection, socket = connect(api, SocketLimits(max_in_flight=2))
    for frame_id in (1, 2, 3):
        connection.received(client(frame_id, get_game=pb.GetGameRequest(game_id="t1")),
                            Format.BINARY)
    connection.received(client(1, list_games=pb.ListGamesRequest()), Format.BINARY)
    refused = socket.frames()
    assert [(f.id, reason(f)) for f in refused] == [(3, "OVERLOADED"), (1, "INVALID_REQUEST")]
    assert metrics.RPC_STARTED.value(*get_game, "websocket") == started + 3
    assert metrics.RPC_HANDLED.value(*get_game, "RESOURCE_EXHAUSTED", "websocket") == \
        overloaded + 1
    assert metrics.RPC_HANDLED.value(*list_games, "INVALID_ARGUMENT", "websocket") == \
        invalid + 1
    api.gate.set()
    answered = (await socket.wait_for(4))[2:]
    assert sorted(f.id for f in answered) == [1, 2]
    assert all(f.get_game.game.version == 7 for f in answered)
    assert not connection.in_flight


async def test_several_tables_are_followed_on_one_socket_and_stopped_one_by_one() -> None:
    api = FakeApi()
    connection, socket = connect(api)
    connection.received(client(10, stream_events=pb.StreamEventsRequest(game_id="a")),
                        Format.BINARY)
    connection.received(client(11, stream_events=pb.StreamEventsRequest(game_id="b")),
                        Format.BINARY)
    await asyncio.sleep(0)  # both streams subscribe
    api.queues["a"].put_nowait(pb.StreamEventsResponse(events=[pb.Event(sequence=1)]))
    api.queues["b"].put_nowait(pb.StreamEventsResponse(events=[pb.Event(sequence=4)]))
    got = await socket.wait_for(2)
    assert {(f.id, f.events.events[0].sequence) for f in got} == {(10, 1), (11, 4)}
    connection.received(client(12, stop_events=ws_pb.StopEvents(stream_id=10)), Format.BINARY)
    stopped = (await socket.wait_for(3))[2]
    assert stopped.id == 12 and stopped.HasField("events_stopped")
    while "a" not in api.closed_streams:  # the stream's subscription is closed
        await asyncio.sleep(0)
    assert list(connection.streams) == [11]
    connection.received(client(13, stop_events=ws_pb.StopEvents(stream_id=10)), Format.BINARY)
    assert reason((await socket.wait_for(4))[3]) == "INVALID_REQUEST"


async def test_streams_are_capped_per_socket() -> None:
    stream = ("server_stream", "tapis.v1.GameService", "StreamEvents")
    capped = metrics.RPC_HANDLED.value(*stream, "RESOURCE_EXHAUSTED", "websocket")
    connection, socket = connect(FakeApi(), SocketLimits(max_streams=1))
    for frame_id, table in ((1, "a"), (2, "b")):
        connection.received(client(frame_id, stream_events=pb.StreamEventsRequest(
            game_id=table)), Format.BINARY)
    [frame] = socket.frames()
    assert (frame.id, reason(frame)) == (2, "TOO_MANY_STREAMS")
    assert metrics.RPC_HANDLED.value(*stream, "RESOURCE_EXHAUSTED", "websocket") == capped + 1


async def test_a_stream_cut_by_the_api_ends_with_its_refusal_and_resume_point() -> None:
    api = FakeApi()
    connection, socket = connect(api)
    connection.received(client(7, stream_events=pb.StreamEventsRequest(game_id="a")),
                        Format.BINARY)
    await asyncio.sleep(0)
    cut = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "STREAM_TOO_SLOW", "resume",
                       {"resume_after_sequence": "41"})
    api.queues["a"].put_nowait(cut)
    [frame] = await socket.wait_for(1)
    assert frame.id == 7 and reason(frame) == "STREAM_TOO_SLOW"
    info = error_details_pb2.ErrorInfo()
    frame.refusal.details[0].Unpack(info)
    assert info.metadata["resume_after_sequence"] == "41"
    assert not connection.streams


async def test_a_full_socket_holds_events_until_it_drains() -> None:
    api = FakeApi()
    connection, socket = connect(api)
    connection.received(client(1, stream_events=pb.StreamEventsRequest(game_id="a")),
                        Format.BINARY)
    await asyncio.sleep(0)
    connection.pause_writing()
    api.queues["a"].put_nowait(pb.StreamEventsResponse(events=[pb.Event(sequence=1)]))
    while not api.queues["a"].empty():
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert socket.sent == []
    connection.resume_writing()
    assert (await socket.wait_for(1))[0].events.events[0].sequence == 1


async def test_a_closed_socket_cancels_its_requests_and_streams() -> None:
    api = FakeApi(gate=asyncio.Event())
    connection, socket = connect(api)
    connection.received(client(1, get_game=pb.GetGameRequest(game_id="t1")), Format.BINARY)
    connection.received(client(2, stream_events=pb.StreamEventsRequest(game_id="a")),
                        Format.BINARY)
    await asyncio.sleep(0)
    connection.disconnected()
    while connection.in_flight or connection.streams:
        await asyncio.sleep(0)
    assert api.closed_streams == ["a"]
    assert socket.sent == []


async def test_the_api_may_end_a_stream_from_outside() -> None:
    api = FakeApi()
    connection, socket = connect(api)
    connection.pause_writing()  # a client that stopped reading
    connection.received(client(3, stream_events=pb.StreamEventsRequest(game_id="a")),
                        Format.BINARY)
    await asyncio.sleep(0)
    api.queues["a"].put_nowait(pb.StreamEventsResponse(events=[pb.Event(sequence=1)]))
    while not api.queues["a"].empty():
        await asyncio.sleep(0)
    cut = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "STREAM_TOO_SLOW", "resume")
    api.ends["a"](cut)
    [frame] = socket.frames()
    assert frame.id == 3 and reason(frame) == "STREAM_TOO_SLOW"
    while "a" not in api.closed_streams:
        await asyncio.sleep(0)
    assert not connection.streams


async def test_the_servers_bound_on_calls_in_flight_counts_every_socket_and_transport() -> None:
    api = FakeApi(gate=asyncio.Event())
    door = Door(max_in_flight=2)
    sockets = [FakeSocket() for _ in range(2)]
    first, second = (Connection(api, "ipv4:10.0.0.9:4242", socket,  # type: ignore[arg-type]
                                door=door) for socket in sockets)
    first.received(client(1, get_game=pb.GetGameRequest(game_id="t1")), Format.BINARY)
    door.enter()  # a gRPC call in flight: the same door
    second.received(client(1, get_game=pb.GetGameRequest(game_id="t1")), Format.BINARY)
    refused = await sockets[1].wait_for(1)
    assert [(f.id, reason(f)) for f in refused] == [(1, "OVERLOADED")]
    assert door.in_flight == 2 and not sockets[0].sent
    door.leave()
    api.gate.set()
    answered = await sockets[0].wait_for(1)
    assert answered[0].get_game.game.version == 7
    assert door.in_flight == 0


async def test_socket_calls_count_in_the_rpc_metrics_with_their_transport() -> None:
    labels = ("unary", "tapis.v1.GameService", "GetGame")
    before = {code: metrics.RPC_HANDLED.value(*labels, code, "websocket")
              for code in ("OK", "NOT_FOUND")}
    grpc_before = metrics.RPC_HANDLED.value(*labels, "OK", "grpc")
    started = metrics.RPC_STARTED.value(*labels, "websocket")
    connection, socket = connect(FakeApi())
    connection.received(client(1, get_game=pb.GetGameRequest(game_id="t1")), Format.BINARY)
    connection.received(client(2, get_game=pb.GetGameRequest(game_id="nope")), Format.BINARY)
    await socket.wait_for(2)
    assert metrics.RPC_STARTED.value(*labels, "websocket") == started + 2
    assert metrics.RPC_HANDLED.value(*labels, "OK", "websocket") == before["OK"] + 1
    assert metrics.RPC_HANDLED.value(*labels, "NOT_FOUND", "websocket") == \
        before["NOT_FOUND"] + 1
    assert metrics.RPC_HANDLED.value(*labels, "OK", "grpc") == grpc_before
    stream = ("server_stream", "tapis.v1.GameService", "StreamEvents")
    sent = metrics.RPC_SENT.value(*stream, "websocket")
    api = FakeApi()
    connection, socket = connect(api)
    connection.received(client(3, stream_events=pb.StreamEventsRequest(game_id="a")),
                        Format.BINARY)
    api.queues.setdefault("a", asyncio.Queue()).put_nowait(pb.StreamEventsResponse())
    api.queues["a"].put_nowait(None)
    await socket.wait_for(2)
    assert metrics.RPC_SENT.value(*stream, "websocket") == sent + 1


async def test_credentials_longer_than_grpcs_headers_may_be_are_refused_and_not_kept() -> None:
    """gRPC bounds a call's headers (its seat token and API key) at 8 KiB; a frame's
    credentials are bounded alike: refused VALUE_TOO_LONG before any caller is built from
    them (a socket keeps its callers), the socket still served."""
    connection, socket = connect(FakeApi())
    long = "t" * (MAX_METADATA_BYTES - 15)
    connection.received(client(1, seat_token=long, api_key="k" * 16,
                               get_game=pb.GetGameRequest(game_id="t1")), Format.BINARY)
    connection.received(client(2, seat_token=long, api_key="k" * 15,  # at the bound: served
                               get_game=pb.GetGameRequest(game_id="t1")), Format.BINARY)
    refused, answered = await socket.wait_for(2)
    assert (refused.id, reason(refused)) == (1, "VALUE_TOO_LONG")
    assert answered.id == 2 and answered.get_game.game.version == 7
    assert [len(token) + len(key) for token, key in connection._callers] == [
        MAX_METADATA_BYTES]

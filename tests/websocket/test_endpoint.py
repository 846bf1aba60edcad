"""The WebSocket port over real sockets: frames, the web client's files, the caps."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.door.caller import Caller
from tapis_service.observe.errors import ServiceError
from tapis_service.settings import Settings
from tapis_service.ws import endpoint as endpoint_module
from tapis_service.ws import frames, sink
from tapis_service.ws.endpoint import EndpointLimits, WebClient, WebSocketEndpoint
from tests.support.websocket import Client, reason


class TinyApi:
    """GetGame and nothing else, recording who asked."""

    def __init__(self) -> None:
        self.callers: list[Caller] = []

    async def get_game(self, request: pb.GetGameRequest, caller: Caller) -> pb.GetGameResponse:
        self.callers.append(caller)
        if caller.seat_token != "good":
            raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "bad token")
        return pb.GetGameResponse(game=pb.GameView(game_id=request.game_id))

    def __getattr__(self, name: str) -> Any:
        """Every other method fails when called (bound once, at the endpoint's start)."""
        async def missing(*_: Any) -> Any:
            raise AttributeError(name)

        return missing

    async def stream_events(self, request: pb.StreamEventsRequest, caller: Any,
                            end: Any) -> AsyncIterator[pb.StreamEventsResponse]:
        await asyncio.Event().wait()
        yield pb.StreamEventsResponse()


@pytest.fixture
async def endpoint(tmp_path: Path) -> AsyncIterator[tuple[WebSocketEndpoint, int]]:
    (tmp_path / "index.html").write_text("<html><body>Tapis</body></html>")
    (tmp_path / "app.js").write_text("console.log('tapis')")
    served = WebSocketEndpoint(TinyApi(), EndpointLimits(max_sockets_per_peer=3),  # type: ignore[arg-type]
                               WebClient(tmp_path))
    port = await served.start("127.0.0.1", 0)
    yield served, port
    await served.stop(0)


async def http_get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


async def test_the_web_client_is_served_on_the_plain_http_side(
        endpoint: tuple[WebSocketEndpoint, int]) -> None:
    _, port = endpoint
    status, headers, body = await http_get(port, "/")
    assert status == 200 and body == b"<html><body>Tapis</body></html>"
    assert headers["content-type"] == "text/html; charset=utf-8"
    status, headers, _ = await http_get(port, "/app.js?v=2")
    assert status == 200 and "javascript" in headers["content-type"]
    assert (await http_get(port, "/../secret"))[0] == 404


async def test_a_socket_carries_requests_with_the_frames_credentials(
        endpoint: tuple[WebSocketEndpoint, int]) -> None:
    served, port = endpoint
    client = await Client.open(f"ws://127.0.0.1:{port}/ws")
    answer = await client.call(seat_token="good", get_game=pb.GetGameRequest(game_id="t9"))
    assert answer.get_game.game.game_id == "t9"
    refused = await client.call(seat_token="bad", get_game=pb.GetGameRequest(game_id="t9"))
    assert reason(refused) == "INVALID_TOKEN"
    assert refused.refusal.code == grpc.StatusCode.UNAUTHENTICATED.value[0]
    client.send(ws_pb.ClientFrame(id=50, seat_token="good",
                                  get_game=pb.GetGameRequest(game_id="j")), text=True)
    assert (await client.receive()).get_game.game.game_id == "j"
    assert client.collector.texts and '"getGame"' in client.collector.texts[0]
    caller = served.api.callers[0]  # type: ignore[attr-defined]
    assert caller.peer.startswith("ipv4:127.0.0.1:")
    client.close()


async def test_an_admitted_sockets_frames_go_to_the_compiled_on_frame_itself(
        endpoint: tuple[WebSocketEndpoint, int]) -> None:
    """picows looks ``on_ws_frame`` up on the listener for every frame: once the socket is
    admitted it finds ``sink.on_frame`` bound to the socket's connection (the plain call's
    function and arguments, without a Python frame), and the class's own method, which serves
    nothing, only before (and after the socket is gone). An answer proves which one ran."""
    served, port = endpoint
    calls: list[object] = []
    plain = sink.on_frame

    def counted(connection: Any, transport: Any, frame: Any) -> None:
        calls.append(connection)
        plain(connection, transport, frame)

    original = endpoint_module.on_frame
    endpoint_module.on_frame = counted  # bound at the socket's admission
    try:
        client = await Client.open(f"ws://127.0.0.1:{port}/ws")
        answer = await client.call(seat_token="good", get_game=pb.GetGameRequest(game_id="t1"))
    finally:
        endpoint_module.on_frame = original
    assert answer.get_game.game.game_id == "t1"
    (connection,) = served.connections
    assert calls == [connection]
    client.close()
    while served.connections:  # the server sees the socket go
        await asyncio.sleep(0.01)


async def test_a_message_over_the_limit_is_refused_then_the_socket_closed(
        endpoint: tuple[WebSocketEndpoint, int]) -> None:
    _, port = endpoint
    client = await Client.open(f"ws://127.0.0.1:{port}/ws")
    client.send_raw(b"\x00" * (frames.MAX_FRAME_BYTES + 1))
    refused = await client.receive()
    assert (refused.id, reason(refused)) == (0, "VALUE_TOO_LONG")
    assert await client.closed() == 1009


async def test_sockets_from_one_address_are_capped(
        endpoint: tuple[WebSocketEndpoint, int]) -> None:
    served, port = endpoint
    clients = [await Client.open(f"ws://127.0.0.1:{port}/ws") for _ in range(3)]
    extra = await Client.open(f"ws://127.0.0.1:{port}/ws")
    refused = await extra.receive()
    assert reason(refused) == "TOO_MANY_STREAMS"
    assert await extra.closed() == 1013
    clients[0].close()
    while served.sockets.total() > 2:  # the server sees the socket go
        await asyncio.sleep(0.01)
    again = await Client.open(f"ws://127.0.0.1:{port}/ws")
    assert (await again.call(seat_token="good", get_game=pb.GetGameRequest(
        game_id="x"))).HasField("get_game")
    for client in (*clients[1:], again):
        client.close()


async def test_stopping_the_endpoint_closes_its_sockets(
        endpoint: tuple[WebSocketEndpoint, int]) -> None:
    served, port = endpoint
    client = await Client.open(f"ws://127.0.0.1:{port}/ws")
    client.send(ws_pb.ClientFrame(stream_events=pb.StreamEventsRequest(game_id="a")))
    while not served.transports:
        await asyncio.sleep(0.01)
    await served.stop(0)
    assert await client.closed() == 1001


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


async def test_with_a_certificate_the_port_is_wss_and_https(
        tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    (tmp_path / "index.html").write_text("<html>Tapis</html>")
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    client_side = ssl.create_default_context(cafile=str(cert))
    served = WebSocketEndpoint(TinyApi(), webclient=WebClient(tmp_path))  # type: ignore[arg-type]
    port = await served.start("127.0.0.1", 0, ssl_context=server_side)
    client = await Client.open(f"wss://127.0.0.1:{port}/ws", ssl_context=client_side)
    answer = await client.call(seat_token="good", get_game=pb.GetGameRequest(game_id="s"))
    assert answer.get_game.game.game_id == "s"
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_side)
    writer.write(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert (await reader.read()).endswith(b"<html>Tapis</html>")
    writer.close()
    client.close()
    await served.stop(0)


async def test_sockets_are_capped_in_all(tmp_path: Path) -> None:
    served = WebSocketEndpoint(TinyApi(), EndpointLimits(max_sockets=2))  # type: ignore[arg-type]
    port = await served.start("127.0.0.1", 0)
    clients = [await Client.open(f"ws://127.0.0.1:{port}/ws") for _ in range(2)]
    extra = await Client.open(f"ws://127.0.0.1:{port}/ws")
    assert reason(await extra.receive()) == "TOO_MANY_STREAMS"
    assert await extra.closed() == 1013
    for client in clients:
        client.close()
    await served.stop(0)


async def test_a_socket_that_does_not_answer_pings_is_dropped() -> None:
    """Pinged when idle for half a second; dropped when the pong does not come within the next
    half second (a margin a loop stalled a moment on a busy host never eats)."""
    served = WebSocketEndpoint(TinyApi(), EndpointLimits(  # type: ignore[arg-type]
        ping_idle_s=0.5, ping_timeout_s=0.5))
    port = await served.start("127.0.0.1", 0)
    answering = await Client.open(f"ws://127.0.0.1:{port}/ws")
    silent = await Client.open(f"ws://127.0.0.1:{port}/ws", auto_pong=False)
    await silent.closed()  # the server gave up on it
    while served.sockets.total() > 1:  # and counts it gone
        await asyncio.sleep(0.01)
    answer = await answering.call(seat_token="good", get_game=pb.GetGameRequest(game_id="p"))
    assert answer.HasField("get_game")  # pinged too, and answered: still open
    answering.close()
    await served.stop(0)


async def test_a_keepalive_timeout_above_its_time_still_serves_websockets() -> None:
    """gRPC takes a keepalive timeout above the keepalive time; picows does not (it closed
    every socket as it opened): the port waits for a pong the keepalive time at most."""
    limits = EndpointLimits.of(Settings(keepalive_time_ms=1_000, keepalive_timeout_ms=20_000))
    assert (limits.ping_idle_s, limits.ping_timeout_s) == (1.0, 20.0)
    assert endpoint_module.ping_reply_s(limits) == 1.0
    served = WebSocketEndpoint(TinyApi(), limits)  # type: ignore[arg-type]
    port = await served.start("127.0.0.1", 0)
    client = await Client.open(f"ws://127.0.0.1:{port}/ws")
    answer = await client.call(seat_token="good", get_game=pb.GetGameRequest(game_id="p"))
    assert answer.HasField("get_game")
    client.close()
    await served.stop(0)

"""What grpcio's C core answers by itself, before any server code runs (docs/limits.md): these
answers cannot be configured, so the tests pin them (raw HTTP/2 frames, sent with h2)."""

from __future__ import annotations

import asyncio
import socket

import grpc
import h2.config
import h2.connection
import h2.events

from tapis.v1 import game_service_pb2 as pb
from tests.support.server import Harness

EMPTY_MESSAGE = b"\x00\x00\x00\x00\x00"  # a gRPC frame: uncompressed, length 0


def _headers(port: int, extra: list[tuple[bytes, bytes]],
             path: bytes = b"/tapis.v1.GameService/ListGames") -> list[tuple[bytes, bytes]]:
    return [(b":method", b"POST"), (b":scheme", b"http"), (b":path", path),
            (b":authority", f"127.0.0.1:{port}".encode()),
            (b"content-type", b"application/grpc"), (b"te", b"trailers"), *extra]


def raw_call(port: int, headers: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """One HTTP/2 request with exactly these headers (no client-side checks); the response
    headers and trailers."""
    config = h2.config.H2Configuration(client_side=True, header_encoding=None,
                                       validate_outbound_headers=False,
                                       normalize_outbound_headers=False)
    connection = h2.connection.H2Connection(config=config)
    answer: dict[bytes, bytes] = {}
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        connection.initiate_connection()
        stream = connection.get_next_available_stream_id()
        connection.send_headers(stream, headers)
        connection.send_data(stream, EMPTY_MESSAGE, end_stream=True)
        sock.sendall(connection.data_to_send())
        while True:
            data = sock.recv(65_535)
            if not data:
                return answer
            for event in connection.receive_data(data):
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    answer.update(dict(event.headers))  # type: ignore[arg-type]
                if isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                    return answer
            sock.sendall(connection.data_to_send())


async def test_the_core_answers_malformed_headers_itself_with_internal(server: Harness) -> None:
    port = server.running.port
    ok = await asyncio.to_thread(raw_call, port, _headers(port, []))
    assert ok[b"grpc-status"] == b"0"
    for name in (b"Upper-Case", b"with space", b"colon:inside"):
        answer = await asyncio.to_thread(raw_call, port, _headers(port, [(name, b"v")]))
        assert answer[b"grpc-status"] == str(grpc.StatusCode.INTERNAL.value[0]).encode()
        assert answer[b"grpc-message"].startswith(b"Illegal header key")
    for name, value, parsing in ((b"grpc-timeout", b"soon", b"grpc-timeout"),
                                 (b"grpc-encoding", b"nope", b"grpc-encoding")):
        answer = await asyncio.to_thread(raw_call, port, _headers(port, [(name, value)]))
        assert answer[b"grpc-status"] == b"13" and parsing in answer[b"grpc-message"]
    unknown = await asyncio.to_thread(raw_call, port, _headers(port, [], b"/nope/Nope"))
    assert unknown[b"grpc-status"] == str(grpc.StatusCode.UNIMPLEMENTED.value[0]).encode()


async def test_metadata_beyond_the_hard_limit_is_refused_by_grpc(server: Harness) -> None:
    code = None
    try:
        await server.stub.ListGames(pb.ListGamesRequest(),
                                    metadata=(("x-filler", "a" * 20_000),))
    except grpc.aio.AioRpcError as error:
        code = error.code()
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (await server.stub.ListGames(pb.ListGamesRequest(),
                                        metadata=(("x-filler", "a" * 1000),))) is not None

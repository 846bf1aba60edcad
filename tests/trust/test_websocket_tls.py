"""With TLS, the player WebSocket (and the web client's page) is served over TLS too: a seat
token never travels in clear on either port; renewed certificates reach it on a reload."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from tapis.v1 import game_service_pb2 as pb
from tests.support.certificates import issue
from tests.support.websocket import Client, tls_handshake
from tests.trust.door import StartSecured, door


async def test_the_websocket_port_speaks_tls_when_the_server_does(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files = door(tmp_path)
    secured = await start_secured(files, keys=False, ws_port=0)
    port = secured.running.ws_port
    assert port is not None
    trusting = ssl.create_default_context(cafile=str(files.server.ca))
    client = await Client.open(f"wss://localhost:{port}/ws", ssl_context=trusting)
    try:
        answer = await client.call(list_games=pb.ListGamesRequest())
        assert answer.HasField("list_games")
    finally:
        client.close()
    # in clear, the port answers no HTTP at all (a TLS server reads no plain request)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(), timeout=30)
    writer.close()
    assert not answer.startswith(b"HTTP/")


async def test_a_reload_serves_the_new_certificate_to_the_next_wss_connection(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files = door(tmp_path)
    first, second = issue(tmp_path, "first"), issue(tmp_path, "second")
    files.server.cert.write_bytes(first.cert_bytes())
    files.server.key.write_bytes(first.key_bytes())
    secured = await start_secured(files, keys=False, ws_port=0)
    port, security = secured.running.ws_port, secured.running.security
    assert port is not None and security is not None
    before = await Client.open(f"wss://localhost:{port}/ws",
                               ssl_context=ssl.create_default_context(cafile=str(first.ca)))
    assert await tls_handshake(port, first.ca) and not await tls_handshake(port, second.ca)
    files.server.cert.write_bytes(second.cert_bytes())
    files.server.key.write_bytes(second.key_bytes())
    security.reload()  # what SIGHUP does (tests/trust/test_server_process.py sends it)
    assert await tls_handshake(port, second.ca) and not await tls_handshake(port, first.ca)
    after = await Client.open(f"wss://localhost:{port}/ws",
                              ssl_context=ssl.create_default_context(cafile=str(second.ca)))
    try:  # the socket opened before the reload keeps its connection, and is served
        for client in (before, after):
            assert (await client.call(list_games=pb.ListGamesRequest())).HasField("list_games")
    finally:
        before.close()
        after.close()

"""Silent connections from a few addresses no longer lock new players out (issue 36): a server
limited to 2,048 descriptors, 1,500 connections that never send a byte to each of its gRPC and
WebSocket ports from each of 4 addresses (12,000 in all), and a new client from another
address still gets a gRPC answer and a WebSocket upgrade within 5 s; the server stays up and
its log small. Before: the gRPC port's connection cap was full (UNAVAILABLE at once) and the
WebSocket port's accept loop wrote 14 MB of "Too many open files" tracebacks in 12 s."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from picows import WSListener, ws_connect

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.support.process import free_port, wait_serving
from tests.support.relay import SourceRelay

pytestmark = pytest.mark.slow  # a server process, 12,000 connections

DESCRIPTORS = 2048
PER_ADDRESS = 1500
STRANGERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
NEWCOMER = "127.0.0.6"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, int, Path]]:
    port, ws_port = free_port(), free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tapis_service.main", "--port", str(port),
             "--ws-port", str(ws_port), "--store", "memory", "--log-level", "info"],
            stdout=out, stderr=out, preexec_fn=_limited,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    yield process, port, ws_port, log
    process.kill()
    process.wait(10)


def flood(ports: tuple[int, ...]) -> list[socket.socket]:
    """Connections that never send a byte, from each stranger to each port (not waited for)."""
    opened = []
    for source in STRANGERS:
        for port in ports:
            for _ in range(PER_ADDRESS):
                sock = socket.socket()
                sock.setblocking(False)
                sock.bind((source, 0))
                with contextlib.suppress(BlockingIOError):
                    sock.connect(("127.0.0.1", port))
                opened.append(sock)
    return opened


async def test_silent_connections_from_four_addresses_do_not_lock_a_newcomer_out(
        server: tuple[subprocess.Popen[bytes], int, int, Path]) -> None:
    process, port, ws_port, log = server
    await wait_serving(f"127.0.0.1:{port}", process=process)
    opened = flood((port, ws_port))
    try:
        async with SourceRelay(NEWCOMER, "127.0.0.1", port) as relay, \
                grpc.aio.insecure_channel(f"127.0.0.1:{relay.port}") as channel:
            answer = await pb_grpc.GameServiceStub(channel).ListGames(
                pb.ListGamesRequest(), timeout=5, wait_for_ready=True)
        assert answer is not None

        def from_newcomer(_: object) -> socket.socket:
            sock = socket.socket()
            sock.bind((NEWCOMER, 0))
            sock.settimeout(5)
            sock.connect(("127.0.0.1", ws_port))
            sock.setblocking(False)
            return sock

        transport, _ = await asyncio.wait_for(ws_connect(
            WSListener, f"ws://127.0.0.1:{ws_port}/ws", socket_factory=from_newcomer), 5)
        transport.disconnect()
        assert process.poll() is None  # up
    finally:
        for sock in opened:
            sock.close()
    assert log.stat().st_size < 1 << 20, log.read_text()[-2000:]

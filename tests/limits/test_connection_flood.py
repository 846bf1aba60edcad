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
import select
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
from tests.support.refusals import from_address
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
            [sys.executable, "-m", "tapis_service.process.main", "--port", str(port),
             "--ws-port", str(ws_port), "--store", "memory", "--log-level", "info"],
            stdout=out, stderr=out, preexec_fn=_limited,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    yield process, port, ws_port, log
    process.kill()
    process.wait(10)


def flood(ports: tuple[int, ...], per_address: int = PER_ADDRESS) -> list[socket.socket]:
    """Connections that never send a byte, from each stranger to each port (not waited for)."""
    opened = []
    for source in STRANGERS:
        for port in ports:
            for _ in range(per_address):
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
        transport, _ = await asyncio.wait_for(ws_connect(
            WSListener, f"ws://127.0.0.1:{ws_port}/ws",
            socket_factory=from_address(NEWCOMER, ws_port)),
            5)
        transport.disconnect()
        assert process.poll() is None  # up
    finally:
        for sock in opened:
            sock.close()
    assert log.stat().st_size < 1 << 20, log.read_text()[-2000:]


UPGRADE = (b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           b"Sec-WebSocket-Version: 13\r\n\r\n")


async def test_upgraded_sockets_past_the_descriptor_limit_do_not_lock_a_newcomer_out(
        server: tuple[subprocess.Popen[bytes], int, int, Path]) -> None:
    """2,400 WebSocket upgrades from 4 addresses against 2,048 descriptors (2,274 once wrote
    516 MB of log in 30 s): each address keeps its share, the rest are closed or dropped."""
    process, port, ws_port, log = server
    await wait_serving(f"127.0.0.1:{port}", process=process)
    opened = flood((ws_port,), per_address=600)
    try:
        pending = {sock.fileno(): sock for sock in opened}
        watch = select.poll()
        for fd in pending:
            watch.register(fd, select.POLLOUT)
        loop, upgraded = asyncio.get_running_loop(), 0
        give_up = loop.time() + 3
        while pending and loop.time() < give_up:  # each upgrade sent once its socket connects
            for fd, _ in watch.poll(50):
                watch.unregister(fd)
                with contextlib.suppress(OSError):
                    pending.pop(fd).send(UPGRADE)
                    upgraded += 1
            await asyncio.sleep(0)
        assert upgraded > 224  # more than the 4 addresses' shares (56 each) asked
        transport, _ = await asyncio.wait_for(ws_connect(
            WSListener, f"ws://127.0.0.1:{ws_port}/ws",
            socket_factory=from_address(NEWCOMER, ws_port)),
            5)
        transport.disconnect()
        assert process.poll() is None
    finally:
        for sock in opened:
            sock.close()
    assert log.stat().st_size < 1 << 20, log.read_text()[-2000:]

"""Connections from other loopback addresses (127.0.0.2, ...), for the per-address limits: a
TCP relay whose outgoing connections come from a chosen address (a gRPC channel cannot choose
its source address), silent connections, and a socket's TCP state."""

from __future__ import annotations

import asyncio
import contextlib
import socket

TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT"}


def tcp_state(sock: socket.socket) -> str:
    """The socket's TCP state (TCP_INFO's first byte): ``SYN_SENT`` while the server's filter
    drops its SYNs."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
    return TCP_STATES.get(info[0], str(info[0]))


def silent(source: str, port: int, target: str = "127.0.0.1") -> socket.socket:
    """A connection from ``source`` that never sends a byte (not waited for)."""
    family = socket.AF_INET6 if ":" in source else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.bind((source, 0))
    with contextlib.suppress(BlockingIOError):
        sock.connect((target, port))
    return sock


class SourceRelay:
    """Listens on 127.0.0.1; each connection is carried to ``host:port`` from ``source``."""

    def __init__(self, source: str, host: str, port: int) -> None:
        self.source = source
        self.target = (host, port)
        self.server: asyncio.Server | None = None
        self.port = 0
        self.carrying: set[asyncio.Task[object]] = set()

    async def __aenter__(self) -> SourceRelay:
        self.server = await asyncio.start_server(self._carry, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self.carrying):
            task.cancel()
        await asyncio.gather(*self.carrying, return_exceptions=True)

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.carrying.add(task)
        task.add_done_callback(self.carrying.discard)
        try:
            far_reader, far_writer = await asyncio.open_connection(
                *self.target, local_addr=(self.source, 0))
            await asyncio.gather(_pump(reader, far_writer), _pump(far_reader, writer))
        except (OSError, asyncio.CancelledError):  # refused, or the relay closing: ends here
            writer.close()  # (asyncio's stream server logs a handler that ends cancelled)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()

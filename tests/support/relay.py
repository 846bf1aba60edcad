"""A TCP relay whose outgoing connections come from a chosen loopback address: a gRPC client
(whose channel cannot choose its source address) seen by the server as another client."""

from __future__ import annotations

import asyncio
import contextlib


class SourceRelay:
    """Listens on 127.0.0.1; each connection is carried to ``host:port`` from ``source``."""

    def __init__(self, source: str, host: str, port: int) -> None:
        self.source = source
        self.target = (host, port)
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> SourceRelay:
        self.server = await asyncio.start_server(self._carry, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            far_reader, far_writer = await asyncio.open_connection(
                *self.target, local_addr=(self.source, 0))
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pump(reader, far_writer), _pump(far_reader, writer))


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()

"""A database one node cannot reach while the others can: a TCP proxy to the run's embedded
PostgreSQL (its Unix socket) that can be frozen — it then passes no byte either way and keeps
every connection open, as a paused PostgreSQL or a network that drops everything silently."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


def socket_of(url: str) -> str:
    """The Unix socket of the embedded PostgreSQL behind ``url`` (``...?host=DIR``)."""
    directory = Path(parse_qs(urlsplit(url).query)["host"][0])
    return str(next(directory.glob(".s.PGSQL.*")))


class FreezableProxy:
    """Listens on 127.0.0.1 and carries each connection to the database's socket."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: asyncio.Server | None = None
        self.port = 0
        self.carrying: set[asyncio.Task[None]] = set()
        self.writers: list[asyncio.StreamWriter] = []

    def url(self, database: str) -> str:
        """A URL to ``database`` through this proxy."""
        return f"postgresql://postgres:@127.0.0.1:{self.port}/{database}"

    def freeze(self) -> None:
        """From now on no byte passes, either way (the connections stay open)."""
        self.flowing.clear()

    async def __aenter__(self) -> FreezableProxy:
        self.server = await asyncio.start_server(self._carry, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self.carrying):
            task.cancel()
        for writer in self.writers:
            writer.close()
        await asyncio.gather(*self.carrying, return_exceptions=True)

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.carrying.add(task)
        self.writers.append(writer)
        try:
            await self.flowing.wait()
            to_reader, to_writer = await asyncio.open_unix_connection(self.socket_path)
            self.writers.append(to_writer)
            await asyncio.gather(self._pump(reader, to_writer), self._pump(to_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self.carrying.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while data := await source.read(65536):
            await self.flowing.wait()  # frozen: held here, and nothing more is read
            sink.write(data)
            await sink.drain()
        sink.close()

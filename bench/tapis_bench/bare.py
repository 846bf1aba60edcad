"""The bare baseline: a minimal grpc.aio server doing an action's transport work.

``Submit`` (unary) pushes one message to each open ``Stream`` of a game; nothing else. Run as
``python -m tapis_bench.bare PORT [--loop uvloop|asyncio]``; it serves until SIGTERM. It runs on
the event loop Tapis runs on (uvloop) unless told ``--loop asyncio`` (the plain loop, measured
beside it: a comparison of our code with a bare server is fair only on the same loop).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import AsyncIterator

import grpc

SERVICE = "tapis.bench.Bare"
SUBMIT = f"/{SERVICE}/Submit"
STREAM = f"/{SERVICE}/Stream"


def _same(data: bytes) -> bytes:
    return data


class Bare:
    """Games as lists of stream queues, keyed by a game id (bytes)."""

    def __init__(self) -> None:
        self.games: dict[bytes, list[asyncio.Queue[bytes]]] = {}

    async def submit(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        """``request`` = game id (16 bytes) + version; every stream of the game gets it."""
        for queue in self.games.get(request[:16], ()):
            queue.put_nowait(request[16:])
        return request[16:]

    async def stream(self, request: bytes,
                     context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        streams = self.games.setdefault(request[:16], [])
        streams.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            streams.remove(queue)


async def serve(port: int) -> None:
    bare = Bare()
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "Submit": grpc.unary_unary_rpc_method_handler(
            bare.submit, request_deserializer=_same, response_serializer=_same),
        "Stream": grpc.unary_stream_rpc_method_handler(
            bare.stream, request_deserializer=_same, response_serializer=_same),
    })
    server.add_generic_rpc_handlers((handler,))
    await serve_until_stopped(server, port)


async def serve_until_stopped(server: grpc.aio.Server, port: int) -> None:
    """Serve on 127.0.0.1:``port`` until SIGINT or SIGTERM."""
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.bare")
    parser.add_argument("port", type=int)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                        help="the event loop (default: uvloop, as the Tapis server runs)")
    args = parser.parse_args(argv)
    if args.loop == "uvloop":
        import uvloop

        uvloop.install()
    asyncio.run(serve(args.port))


if __name__ == "__main__":
    main(sys.argv[1:])

"""The floor of a relayed call: a bytes relay with none of our logic in front of a Tapis node.

Every ``tapis.v1.GameService`` method is relayed as raw bytes to one upstream address with the
caller's headers (no routing, no interceptor, no metrics), streams included. The cluster bench
runs the relayed load through it beside the real relaying node: ``forward_bound_ratio`` is what
a relay costs on this machine before any work of ours. Run as
``python -m tapis_bench.relay PORT UPSTREAM``; it serves until SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc

from tapis_bench.bare import serve_until_stopped

SERVICE = "tapis.v1.GameService"
UNARY = ("CreateGame", "JoinGame", "GetGame", "SubmitAction", "ListGames")


def _headers(context: grpc.aio.ServicerContext) -> list[tuple[str, str | bytes]]:
    return [(k, v) for k, v in (context.invocation_metadata() or ())
            if k != "user-agent" and not k.startswith("grpc-")]


def _unary(channel: grpc.aio.Channel, name: str
           ) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
    method = channel.unary_unary(f"/{SERVICE}/{name}")

    async def relay(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        answer: bytes = await method(raw, metadata=_headers(context))
        return answer

    return relay


async def serve(port: int, upstream: str) -> None:
    channel = grpc.aio.insecure_channel(upstream)
    stream = channel.unary_stream(f"/{SERVICE}/StreamEvents")

    async def relay_stream(raw: bytes, context: grpc.aio.ServicerContext
                           ) -> AsyncIterator[bytes]:
        call = stream(raw, metadata=_headers(context))
        while (chunk := await call.read()) is not grpc.aio.EOF:
            yield chunk

    methods = {name: grpc.unary_unary_rpc_method_handler(_unary(channel, name))
               for name in UNARY}
    methods["StreamEvents"] = grpc.unary_stream_rpc_method_handler(relay_stream)
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
    await serve_until_stopped(server, port)


if __name__ == "__main__":
    try:
        import uvloop
        uvloop.install()  # as the nodes run
    except ImportError:
        pass
    asyncio.run(serve(int(sys.argv[1]), sys.argv[2]))

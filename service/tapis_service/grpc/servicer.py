"""The gRPC adapter of tapis.v1.GameService: a call's context becomes a ``Caller``
(``door.caller_of``) and the request goes to ``GameApi``, by the method's row of the table of
RPCs (``rpcs``). A refusal the API raises becomes a gRPC status with ErrorInfo once, in the
call guard every method passes (``callguard``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import structlog

from tapis_service.codec import requests
from tapis_service.door.caller import Caller
from tapis_service.door.door import caller_of
from tapis_service.door.limits import clip
from tapis_service.door.rpcs import RPCS, SERVICE, Rpc
from tapis_service.game_api import GameApi
from tapis_service.observe.errors import ServiceError, to_status
from tapis_service.tables.streams import EndStream

_ENDING: set[asyncio.Future[None]] = set()
log = structlog.get_logger("tapis.rpc")


def stream_ender(context: grpc.aio.ServicerContext) -> EndStream:
    """How a server stream of ``context`` is ended from another task (the watchdog): its
    status is queued behind the messages grpc holds, then the stream's task is cancelled (the
    call guard sent the stream's headers first: ``callguard._stream`` says why)."""

    async def end(error: ServiceError) -> None:
        try:
            await context.abort_with_status(to_status(error))
        except grpc.aio.AbortError:  # raised once the status is queued: the normal end
            return
        except Exception as failure:  # the status is not sent: say so, never silently
            if context.done():  # the call ended meanwhile (its client went): nothing lost
                return
            log.warning("stream_end_failed", reason=error.reason,
                        error=type(failure).__name__, detail=clip(str(failure), 120))

    def start(error: ServiceError) -> None:
        ending = asyncio.ensure_future(end(error))
        _ENDING.add(ending)
        ending.add_done_callback(_ENDING.discard)

    return start


class GameServicer:
    """Every RPC of tapis.v1.GameService, served by ``api``: each method hands the request and
    its ``Caller`` to the API's method the table of RPCs names (``rpcs``) and returns what the
    API returns (an awaitable answer, or a stream's async iterator), which the call guard
    awaits or iterates."""

    def __init__(self, api: GameApi) -> None:
        self.api = api

    def caller(self, context: grpc.aio.ServicerContext) -> Caller:
        """The call's ``Caller`` (behind a trusted proxy, the client's address)."""
        return caller_of(context, self.api.proxies)


Behavior = Callable[[Any, grpc.aio.ServicerContext], Any]


def behavior(rpc: Rpc, serve: Callable[..., Any],
             caller: Callable[[grpc.aio.ServicerContext], Caller]) -> Behavior:
    """The gRPC behavior of ``rpc``: ``serve(request, caller)`` (a stream's: with its ender),
    built once at start."""
    if rpc.streams:
        def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            return serve(request, caller(context), stream_ender(context))

        return stream

    def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        return serve(request, caller(context))

    return unary


def handler(rpc: Rpc, behavior: Behavior, *, raw: bool = False) -> grpc.RpcMethodHandler:
    """The gRPC method handler of ``rpc`` (``raw``: its request and answer stay bytes, as a
    cluster node routes them; an answer the API serialized already is sent as it is)."""
    parse = None if raw else requests.reader(rpc)
    write = None if raw or rpc.serialized else rpc.response.SerializeToString
    if rpc.streams:
        return grpc.unary_stream_rpc_method_handler(
            behavior, request_deserializer=parse, response_serializer=write)
    return grpc.unary_unary_rpc_method_handler(
        behavior, request_deserializer=parse, response_serializer=write)


def method_handlers(servicer: GameServicer,
                    table: tuple[Rpc, ...] = RPCS) -> dict[str, grpc.RpcMethodHandler]:
    """The handler of every method of ``table``, derived once."""
    return {rpc.name: handler(rpc, behavior(rpc, getattr(servicer.api, rpc.api),
                                            servicer.caller))
            for rpc in table}


def add_to_server(servicer: GameServicer, server: grpc.aio.Server) -> None:
    """Register every method of the servicer (as generic handlers: ``callguard`` says why)."""
    handlers = method_handlers(servicer)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


__all__ = ["SERVICE", "GameServicer", "add_to_server", "behavior", "caller_of", "handler",
           "method_handlers", "stream_ender"]

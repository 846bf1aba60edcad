"""The gRPC adapter of tapis.v1.GameService: a call's context becomes a ``Caller`` and the request
goes to ``GameApi``. A refusal the API raises becomes a gRPC status with ErrorInfo once, in the
call guard every method passes (``callguard``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import structlog

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service import tracing
from tapis_service.caller import Caller, deadline_in
from tapis_service.errors import ServiceError, to_status
from tapis_service.game_api import EndStream, GameApi
from tapis_service.limits import clip
from tapis_service.proxies import FORWARDED_FOR, TrustedProxies

SERVICE = pb.DESCRIPTOR.services_by_name["GameService"].full_name
AUTHORIZATION = "authorization"
API_KEY = "x-api-key"


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def caller_of(context: grpc.aio.ServicerContext,
              proxies: TrustedProxies | None = None) -> Caller:
    """The ``Caller`` of a gRPC call: its seat token, API key, peer (behind one of
    ``proxies``, the client's from ``x-forwarded-for``) and deadline."""
    token: str | None = None
    bad = False
    api_key: str | None = None
    forwarded: list[str] = []
    for key, value in context.invocation_metadata() or ():
        if key == AUTHORIZATION and token is None and not bad:
            scheme, _, rest = _text(value).partition(" ")
            if scheme.lower() == "bearer" and rest.strip():
                token = rest.strip()
            else:
                bad = True
        elif key == API_KEY and api_key is None:
            api_key = _text(value)
        elif key == FORWARDED_FOR:
            forwarded.append(_text(value))
    peer = str(context.peer())
    if proxies is not None and proxies.networks:
        peer = proxies.client_peer(peer, forwarded)
    return Caller(seat_token=token, bad_authorization=bad, api_key=api_key,
                  peer=peer, deadline=deadline_in(context.time_remaining()),
                  traceparent=tracing.traceparent())


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


class GameServicer(pb_grpc.GameServiceServicer):
    """Every RPC of tapis.v1.GameService, served by ``api``: each method hands the request and
    its ``Caller`` to the API and returns what the API returns (an awaitable answer, or a
    stream's async iterator), which the call guard awaits or iterates."""

    def __init__(self, api: GameApi) -> None:
        self.api = api

    def caller(self, context: grpc.aio.ServicerContext) -> Caller:
        """The call's ``Caller`` (behind a trusted proxy, the client's address)."""
        return caller_of(context, self.api.proxies)

    def CreateGame(self, request: pb.CreateGameRequest, context: grpc.aio.ServicerContext
                   ) -> Awaitable[pb.CreateGameResponse]:
        return self.api.create_game(request, self.caller(context))

    def JoinGame(self, request: pb.JoinGameRequest, context: grpc.aio.ServicerContext
                 ) -> Awaitable[pb.JoinGameResponse]:
        return self.api.join_game(request, self.caller(context))

    def GetGame(self, request: pb.GetGameRequest, context: grpc.aio.ServicerContext
                ) -> Awaitable[pb.GetGameResponse]:
        return self.api.get_game(request, self.caller(context))

    def SubmitAction(  # type: ignore[override]
            self, request: pb.SubmitActionRequest, context: grpc.aio.ServicerContext
    ) -> Awaitable[bytes]:
        """The answer is the serialized ``SubmitActionResponse`` (sent as it is)."""
        return self.api.submit_action(request, self.caller(context))

    def StreamEvents(  # type: ignore[override]
            self, request: pb.StreamEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        """Each message is a serialized ``StreamEventsResponse`` (sent as it is)."""
        return self.api.stream_events(request, self.caller(context), stream_ender(context))

    def ListGames(self, request: pb.ListGamesRequest, context: grpc.aio.ServicerContext
                  ) -> Awaitable[pb.ListGamesResponse]:
        return self.api.list_games(request, self.caller(context))

    def WatchResults(self, request: pb.WatchResultsRequest, context: grpc.aio.ServicerContext
                     ) -> AsyncIterator[pb.WatchResultsResponse]:
        return self.api.watch_results(request, self.caller(context))

    def AckResults(self, request: pb.AckResultsRequest, context: grpc.aio.ServicerContext
                   ) -> Awaitable[pb.AckResultsResponse]:
        return self.api.ack_results(request, self.caller(context))

    def EndTable(self, request: pb.EndTableRequest, context: grpc.aio.ServicerContext
                 ) -> Awaitable[pb.EndTableResponse]:
        return self.api.end_table(request, self.caller(context))

    def ReplaceSeat(self, request: pb.ReplaceSeatRequest, context: grpc.aio.ServicerContext
                    ) -> Awaitable[pb.ReplaceSeatResponse]:
        return self.api.replace_seat(request, self.caller(context))

    def CreateSpectatorToken(self, request: pb.CreateSpectatorTokenRequest,
                             context: grpc.aio.ServicerContext
                             ) -> Awaitable[pb.CreateSpectatorTokenResponse]:
        return self.api.create_spectator_token(request, self.caller(context))

    def RotateSpectatorToken(self, request: pb.RotateSpectatorTokenRequest,
                             context: grpc.aio.ServicerContext
                             ) -> Awaitable[pb.RotateSpectatorTokenResponse]:
        return self.api.rotate_spectator_token(request, self.caller(context))


def _unary(behavior: Callable[..., Any], request: Any, response: Any
           ) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        behavior, request_deserializer=request.FromString,
        response_serializer=None if response is bytes else response.SerializeToString)


def method_handlers(servicer: GameServicer) -> dict[str, grpc.RpcMethodHandler]:
    """The handler of every method (``SubmitAction`` and ``StreamEvents`` answer bytes that
    are serialized already, and grpc sends them as they are)."""
    return {
        "CreateGame": _unary(servicer.CreateGame, pb.CreateGameRequest, pb.CreateGameResponse),
        "JoinGame": _unary(servicer.JoinGame, pb.JoinGameRequest, pb.JoinGameResponse),
        "GetGame": _unary(servicer.GetGame, pb.GetGameRequest, pb.GetGameResponse),
        "SubmitAction": _unary(servicer.SubmitAction, pb.SubmitActionRequest, bytes),
        "StreamEvents": grpc.unary_stream_rpc_method_handler(
            servicer.StreamEvents, request_deserializer=pb.StreamEventsRequest.FromString),
        "ListGames": _unary(servicer.ListGames, pb.ListGamesRequest, pb.ListGamesResponse),
        "CreateSpectatorToken": _unary(servicer.CreateSpectatorToken,
                                       pb.CreateSpectatorTokenRequest,
                                       pb.CreateSpectatorTokenResponse),
        "RotateSpectatorToken": _unary(servicer.RotateSpectatorToken,
                                       pb.RotateSpectatorTokenRequest,
                                       pb.RotateSpectatorTokenResponse),
        "WatchResults": grpc.unary_stream_rpc_method_handler(
            servicer.WatchResults, request_deserializer=pb.WatchResultsRequest.FromString,
            response_serializer=pb.WatchResultsResponse.SerializeToString),
        "AckResults": _unary(servicer.AckResults, pb.AckResultsRequest, pb.AckResultsResponse),
        "EndTable": _unary(servicer.EndTable, pb.EndTableRequest, pb.EndTableResponse),
        "ReplaceSeat": _unary(servicer.ReplaceSeat, pb.ReplaceSeatRequest,
                              pb.ReplaceSeatResponse),
    }


def add_to_server(servicer: GameServicer, server: grpc.aio.Server) -> None:
    """Register every method of the servicer (as generic handlers: ``callguard`` says why)."""
    handlers = method_handlers(servicer)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))

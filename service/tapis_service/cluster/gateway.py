"""The gRPC face of a cluster node: every GameService method on raw request bytes (only the
table id is read to route a call: the node that serves it parses it), and the tunnel other
nodes relay calls through. Like the single node's servicer, it builds the ``Caller`` once; the
call guard every method passes turns a refusal into its status."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis_service.caller import Caller
from tapis_service.cluster.listing import Listing
from tapis_service.cluster.relay import Relay, parsed
from tapis_service.proxies import TrustedProxies
from tapis_service.servicer import (
    SERVICE,
    GameServicer,
    caller_of,
    method_handlers,
    stream_ender,
)

Serve = Callable[[bytes, Caller], Awaitable[bytes]]


def _unary(serve: Serve, proxies: TrustedProxies) -> grpc.RpcMethodHandler:
    def handle(raw: bytes, context: grpc.aio.ServicerContext) -> Awaitable[bytes]:
        return serve(raw, caller_of(context, proxies))

    return grpc.unary_unary_rpc_method_handler(handle)


def game_service(relay: Relay, listing: Listing) -> grpc.GenericRpcHandler:
    """Every GameService method, served here or relayed to its table's owner."""
    proxies = relay.api.proxies

    async def list_games(raw: bytes, caller: Caller) -> bytes:
        answer = await listing.list_games(parsed(pb.ListGamesRequest, raw), caller)
        return bytes(answer.SerializeToString())

    def stream_events(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        return relay.stream(raw, caller_of(context, proxies), stream_ender(context))

    methods = {
        "CreateGame": _unary(relay.create_game, proxies),
        "JoinGame": _unary(functools.partial(relay.call, "JoinGame"), proxies),
        "GetGame": _unary(functools.partial(relay.call, "GetGame"), proxies),
        "SubmitAction": _unary(functools.partial(relay.call, "SubmitAction"), proxies),
        "StreamEvents": grpc.unary_stream_rpc_method_handler(stream_events),
        "ListGames": _unary(list_games, proxies),
        "CreateSpectatorToken": _unary(functools.partial(relay.call, "CreateSpectatorToken"),
                                       proxies),
        "EndTable": _unary(functools.partial(relay.call, "EndTable"), proxies),
        "ReplaceSeat": _unary(functools.partial(relay.call, "ReplaceSeat"), proxies),
        "RotateSpectatorToken": _unary(functools.partial(relay.call, "RotateSpectatorToken"),
                                       proxies),
    }
    # results are the backend's, not a table's: any node serves them from the database
    local = method_handlers(GameServicer(relay.api))
    methods.update({name: handler for name, handler in local.items() if name not in methods})
    return grpc.method_handlers_generic_handler(SERVICE, methods)

"""The gRPC face of a cluster node: every GameService method on raw request bytes (only the
table id is read to route a call: the node that serves it parses it), and the tunnel other
nodes relay calls through. Each method's handler is derived from its row of the table of RPCs
(``rpcs``), by its ``Routing``; like the single node's servicer, it builds the ``Caller`` once,
and the call guard every method passes turns a refusal into its status."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis_service.cluster.listing import Listing
from tapis_service.cluster.relay import Relay, parsed
from tapis_service.door.caller import Caller
from tapis_service.door.rpcs import RPCS, SERVICE, Route, Routing, Rpc
from tapis_service.grpc.servicer import behavior, caller_of, handler

Serve = Callable[..., Any]
"""A method served on raw bytes: ``(raw, caller)``, or a stream's ``(raw, caller, end)``."""


def routes(relay: Relay, listing: Listing, table: tuple[Rpc, ...] = RPCS) -> dict[str, Route]:
    """How this node serves each method, over gRPC and the WebSocket alike: its row, the
    function serving it, and whether that function takes the request's bytes (routed ones)
    or its message (served here)."""

    async def list_games(raw: bytes, caller: Caller) -> bytes:
        answer = await listing.list_games(parsed(pb.ListGamesRequest, raw), caller)
        return bytes(answer.SerializeToString())

    served: dict[str, Route] = {}
    for rpc in table:
        if rpc.routing is Routing.TABLE:
            serve: Serve = relay.stream if rpc.streams else functools.partial(relay.call,
                                                                               rpc.name)
            served[rpc.name] = Route(rpc, serve, raw=True)
        elif rpc.routing is Routing.PLACE:
            served[rpc.name] = Route(rpc, relay.create_game, raw=True)
        elif rpc.routing is Routing.EVERY_NODE:
            served[rpc.name] = Route(rpc, list_games, raw=True)
        else:  # results are the backend's, not a table's: any node serves them from the database
            served[rpc.name] = Route(rpc, getattr(relay.api, rpc.api))
    return served


def game_service(relay: Relay, listing: Listing) -> grpc.GenericRpcHandler:
    """Every GameService method, served here or relayed to its table's owner."""
    caller = functools.partial(caller_of, proxies=relay.api.proxies)
    methods = {name: handler(rpc, behavior(rpc, serve, caller), raw=raw)
               for name, (rpc, serve, raw) in routes(relay, listing).items()}
    return grpc.method_handlers_generic_handler(SERVICE, methods)

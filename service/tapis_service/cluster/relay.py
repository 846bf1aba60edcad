"""A call for a table, served where the table is: here through ``GameApi``, or relayed to its
owner through the tunnel with the same ``Caller``.

Only the table id is read from the request bytes to route it (``cluster.wire``); the request is
parsed once, by the node that serves it. An owner that cannot be reached (dead, stopping) is
looked past once: the table is looked up again (and taken over if its owner is gone).

A relayed call carries the client's deadline, capped at ``DEADLINE_TTLS`` TTLs: the relaying
node waits no longer for the owner (a frozen one), then looks the table up again. A write
whose request went to an owner lost before it answered may have been applied there: unless
the second attempt answers it, it is answered ``COMMIT_UNKNOWN``, never as not applied; so is
a write (or a CreateGame retry) that cannot be routed because the database is away: an earlier
attempt with its request id may have been applied. A read that cannot be routed is
``STORE_UNAVAILABLE``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from tapis.v1 import game_service_pb2 as pb
from tapis_service.cluster import frames, metrics, tunnel
from tapis_service.cluster.locator import DATABASE_ERRORS, Locator, table_moved
from tapis_service.cluster.wire import game_id_of
from tapis_service.codec import requests
from tapis_service.door.caller import Caller, deadline_in
from tapis_service.door.limits import check_sizes
from tapis_service.door.rpcs import BY_NAME, RPCS, Rpc
from tapis_service.door.tls import ClusterTls
from tapis_service.game_api import GameApi
from tapis_service.observe.errors import ServiceError
from tapis_service.tables.host import GameHost
from tapis_service.tables.ownership import scope_of
from tapis_service.tables.streams import EndStream, too_slow

DEADLINE_TTLS = 2.0
"""The longest a relayed unary call waits for the owner's answer, in TTLs (the tunnel's
deadline; a client's shorter deadline is passed on as it is)."""


def commit_unknown(game_id: str) -> ServiceError:
    """A write relayed to an owner lost before it answered: it may have been applied."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "COMMIT_UNKNOWN",
                        f"the node serving game {game_id} was lost while it served this "
                        "request: it may have been applied; retry with the same request_id")


def unrouted(game_id: str) -> ServiceError:
    """A write (or a CreateGame retry) that could not be routed: this attempt changed nothing,
    but an earlier one with the same request id may have been applied, which only the database
    can tell."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "COMMIT_UNKNOWN",
                        f"the database cannot be reached to find where game {game_id or '?'} "
                        "is served: an earlier attempt of this request may have been applied; "
                        "retry with the same request_id")


PARTIAL = pb.ListGamesResponse(partial=True).SerializeToString()
"""Appended to a serialized ListGames answer, it says partial (a message's bytes merge)."""

IN_DOUBT = frozenset(rpc.name for rpc in RPCS if rpc.writes)
"""The methods whose refusal must never say "not applied" unless the table said it: a retry of
one may find its first attempt committed."""

CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1000),
                   # a node gone without a reset (a machine lost): its tunnel ends within 30 s
                   ("grpc.keepalive_time_ms", 20_000), ("grpc.keepalive_timeout_ms", 10_000)]



def parsed(message: type[Message], raw: bytes,
           read: Callable[[bytes], Any] | None = None) -> Any:
    """``raw`` decoded as ``message`` (by ``read``, the RPC's reader, if given); bytes that are
    not one are INVALID_REQUEST."""
    try:
        return message.FromString(raw) if read is None else read(raw)
    except DecodeError as error:
        raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST",
                           f"the request is not a valid "
                           f"{message.DESCRIPTOR.name.removesuffix('Request')} message"
                           ) from error


def _compacted(message: type[Message], raw: bytes) -> bytes:
    """A request too big for a tunnel frame, as the owner would read it: parsed, its sizes
    checked (a too long field is refused here), its unknown fields dropped."""
    request = parsed(message, raw)
    check_sizes(request)
    request.DiscardUnknownFields()
    return bytes(request.SerializeToString())


def _serialized(answer: Any) -> bytes:
    return answer if isinstance(answer, bytes) else bytes(answer.SerializeToString())


class Tunnels:
    """The open tunnel to each other node, by address."""

    def __init__(self, relay_key: str, tls: ClusterTls | None = None) -> None:
        self.relay_key = relay_key
        self.tls = tls
        """How the tunnels reach the other nodes over TLS (None: in clear, a server without
        TLS)."""
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._tunnels: dict[str, tunnel.TunnelClient] = {}

    def addresses(self) -> set[str]:
        """The owners a tunnel is open to."""
        return {address for address, client in self._tunnels.items() if not client.broken}

    def close_others(self, live: set[str]) -> None:
        """Close the tunnels to nodes not in ``live`` (their membership expired: frozen or
        dead); the calls waiting in them fail as unreachable and are routed again."""
        for address in self.addresses() - live:
            self._tunnels.pop(address).close()

    def to(self, address: str) -> tunnel.TunnelClient:
        client = self._tunnels.get(address)
        if client is None or client.broken:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = (
                    grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
                    if self.tls is None else grpc.aio.secure_channel(
                        address, self.tls.credentials(),
                        options=[*CHANNEL_OPTIONS, *self.tls.channel_options()]))
            client = self._tunnels[address] = tunnel.TunnelClient(channel, self.relay_key)
        return client

    async def close(self) -> None:
        for client in self._tunnels.values():
            client.close()
        for channel in self._channels.values():
            await channel.close()


class Relay:
    """Serves each call here or at its table's owner."""

    def __init__(self, api: GameApi, host: GameHost, locator: Locator, tunnels: Tunnels,
                 stream_queue_size: int, ttl_s: float) -> None:
        self.deadline_s = DEADLINE_TTLS * ttl_s
        self.api = api
        self.host = host
        self.locator = locator
        self.tunnels = tunnels
        self.stream_queue_size = stream_queue_size
        self.relayed_streams: dict[tunnel.RelayedStream, str] = {}
        """Streams relayed to another node -> their table."""
        self.served: dict[str, tuple[Rpc, Callable[[Any, Caller], Awaitable[Any]]]] = {
            rpc.name: (rpc, getattr(api, rpc.api)) for rpc in RPCS if not rpc.streams}
        """Each unary method served here: its row and its ``GameApi`` method (bound once)."""

    async def local(self, method: str, raw: bytes, caller: Caller) -> bytes:
        """Serve a unary call here. A table this node let go of while the call was on its way
        (a graceful stop hands every table off) has moved, not vanished: TABLE_MOVED, which
        the client retries where it went, never NOT_FOUND."""
        rpc, serve = self.served[method]
        try:
            return _serialized(await serve(parsed(rpc.request, raw, requests.reader(rpc)),
                                           caller))
        except ServiceError as refused:
            if refused.code == grpc.StatusCode.NOT_FOUND and self.locator.leaving:
                raise table_moved(game_id_of(raw)) from refused
            raise

    async def create_game(self, raw: bytes, caller: Caller) -> bytes:
        """CreateGame places a new table here; a retry (the same ``request_id`` from the same
        sender: the same backend, or any caller without a key) whose table was created on any
        node gets its first answer, seat tokens and all: here if the table is served here now
        (taken over from a dead node, say), else from its owner, to which the retry is
        relayed. Another sender's request id is never looked up: it creates a table of its
        own."""
        request = parsed(pb.CreateGameRequest, raw)
        request_id = request.request_id
        try:
            scope = scope_of(self.api.security.backend_of(caller.api_key))
        except ServiceError:  # a wrong key: create_game refuses it (and counts it)
            request_id = ""
        if request_id and self.host.tables.session(
                self.host.tables.create_request(scope, request_id) or "") is None:
            try:
                game_id = await self.locator.directory.created_by(scope, request_id)
            except DATABASE_ERRORS as error:  # its first attempt may have created it
                raise unrouted("") from error
            if game_id is not None:
                try:
                    answer = await self._relayed_create(raw, caller, game_id)
                    if answer is not None:  # its owner answered it (the seat tokens too)
                        return answer
                    if not self._created_here(scope, request_id, game_id):
                        view = await self.call("GetGame", pb.GetGameRequest(
                            game_id=game_id).SerializeToString(),
                            caller.anonymous()._replace(api_key=caller.api_key))
                        if not self._created_here(scope, request_id, game_id):
                            return view  # else taken over meanwhile: its first answer, below
                except ServiceError as refused:  # created, but where it is cannot be said
                    if refused.reason == "STORE_UNAVAILABLE":
                        raise unrouted(game_id) from refused
                    raise
        return _serialized(await self.api.create_game(request, caller))

    async def _relayed_create(self, raw: bytes, caller: Caller, game_id: str) -> bytes | None:
        """A CreateGame retry answered by the owner of the table it created (None: this node
        serves it now). An owner lost on the way is forgotten and the table looked up once
        more, as ``call`` does (one that stopped handed it off: this node may take it over);
        lost again, TABLE_MOVED (the table exists: a retry finds where it went)."""
        for last in (False, True):
            address = await self.locator.route(game_id, caller.forwarded)
            if address is None:
                return None
            try:
                return await self._relay(address, "CreateGame", raw, caller, game_id)
            except tunnel.OwnerUnreachable as error:
                self.locator.forget(game_id)
                if last:
                    raise table_moved(game_id) from error
        return None

    def _created_here(self, scope: str, request_id: str, game_id: str) -> bool:
        """This node serves ``game_id`` as the table ``request_id`` of ``scope`` created."""
        host = self.host
        return host.tables.create_request(scope, request_id) == game_id \
            and host.tables.listed(game_id) is not None

    async def call(self, method: str, raw: bytes, caller: Caller) -> bytes:
        """A unary call for the table named in ``raw``, answered wherever it is served."""
        if method == "CreateGame":  # a retry another node relayed here, the table's owner
            return await self.create_game(raw, caller)
        game_id = game_id_of(raw)
        if method == "ListGames":  # this node's part: only while its ownership is confirmed
            await self.locator.confirm()
            page = await self._once(method, raw, caller, game_id)
            # partial while it takes tables over (one it owns may not be listed yet)
            return page + PARTIAL if self.locator.moving else page
        try:
            return await self._once(method, raw, caller, game_id)
        except tunnel.OwnerUnreachable as error:
            self.locator.forget(game_id)  # it died, is stopping or frozen: look again, once
            in_doubt = error.sent and BY_NAME[method].writes
        try:
            return await self._once(method, raw, caller, game_id)
        except tunnel.OwnerUnreachable as error:
            if in_doubt or (error.sent and BY_NAME[method].writes):
                raise commit_unknown(game_id) from error
            raise table_moved(game_id) from error
        except ServiceError as refused:  # "not applied" would be wrong: the first may have
            if in_doubt and refused.code == grpc.StatusCode.UNAVAILABLE:
                raise commit_unknown(game_id) from refused
            raise

    async def _once(self, method: str, raw: bytes, caller: Caller, game_id: str) -> bytes:
        try:
            address = await self.locator.route(game_id, caller.forwarded)
        except ServiceError as refused:  # the database cannot say where the table is
            if method in IN_DOUBT and refused.reason == "STORE_UNAVAILABLE":
                raise unrouted(game_id) from refused
            raise
        if address is None:
            return await self.local(method, raw, caller)
        return await self._relay(address, method, raw, caller, game_id)

    async def _relay(self, address: str, method: str, raw: bytes, caller: Caller,
                     game_id: str) -> bytes:
        """A unary call answered by the node at ``address`` through the tunnel."""
        rpc = BY_NAME[method]
        if not frames.fits(caller, raw):
            raw = _compacted(rpc.request, raw)
        left = caller.time_remaining()
        wait_s = self.deadline_s if left is None else min(left, self.deadline_s)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(wait_s):
                answer = await self.tunnels.to(address).call(
                    rpc.code, caller._replace(deadline=deadline_in(wait_s)), raw)
        except TimeoutError as error:  # a frozen owner, or one too slow to count on
            raise tunnel.OwnerUnreachable(
                f"the table's owner did not answer within {wait_s:.1f} s") from error
        except ServiceError as refused:
            if refused.code == grpc.StatusCode.UNAVAILABLE:  # moved, or its owner stopping
                self.locator.forget(game_id)
            raise
        metrics.FORWARDS.labels(method).inc()
        metrics.FORWARD_SECONDS.labels(method).observe(time.perf_counter() - started)
        return answer

    async def stream(self, raw: bytes, caller: Caller, end: EndStream) -> AsyncIterator[bytes]:
        """A StreamEvents call, served here or relayed to its table's owner; ``end`` ends it
        from outside (a slow client: its relayed messages overflowed this node's queue)."""
        game_id = game_id_of(raw)
        address = await self.locator.route(game_id, caller.forwarded)
        if address is None:
            session = self.host.tables.session(game_id)
            sent = b""
            async for message in self.api.stream_events(parsed(pb.StreamEventsRequest, raw),
                                                        caller, end):
                sent = message
                yield message
            if session is not None and self.host.tables.session(game_id) is not session:
                # the table left (lost, or healed as a new session): resume where it is
                raise table_moved(game_id, _last_sequence(sent, raw))
            return
        if not frames.fits(caller, raw):
            raw = _compacted(pb.StreamEventsRequest, raw)
        metrics.FORWARDS.labels("StreamEvents").inc()
        last = b""  # the last message relayed (where a cut one resumes)
        task = asyncio.current_task()

        def overflowed() -> None:
            end(too_slow(_last_sequence(last, raw)))
            if task is not None:
                task.cancel()

        relayed = self.tunnels.to(address).stream(caller, raw, self.stream_queue_size,
                                                  overflowed)
        self.relayed_streams[relayed] = game_id
        try:
            while True:
                answer = await relayed.read()
                if answer is None:
                    break
                last = answer
                yield answer
        except ServiceError as refused:
            if refused.code == grpc.StatusCode.UNAVAILABLE:
                self.locator.forget(game_id)
            raise
        except tunnel.OwnerUnreachable as error:
            self.locator.forget(game_id)
            raise table_moved(game_id, _last_sequence(last, raw)) from error
        finally:
            self.relayed_streams.pop(relayed, None)
            relayed.stop()

    def cut_relayed_streams(self) -> None:
        """This node is leaving: every stream it relays ends TABLE_MOVED (the client resumes
        on another node)."""
        for relayed, game_id in list(self.relayed_streams.items()):
            relayed.stop(table_moved(game_id))


def _last_sequence(last: bytes, request: bytes) -> int:
    """Where a stream cut off resumes: after its last message's last event (or where it
    started)."""
    events = pb.StreamEventsResponse.FromString(last).events if last else ()
    if events:
        return int(events[-1].sequence)
    return int(pb.StreamEventsRequest.FromString(request).after_sequence)
